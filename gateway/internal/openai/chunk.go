package openai

import (
	"errors"
	"fmt"

	"github.com/valyala/fastjson"
)

// ErrInvalidChunk is returned (wrapped) by ChunkParser.Parse when the event
// data is not a JSON object. The caller should still forward the raw event.
var ErrInvalidChunk = errors.New("openai: invalid stream chunk")

// Chunk is one parsed streaming event: a chat.completion.chunk, a
// text_completion chunk, the include_usage final chunk, an error object, or
// the [DONE] marker.
//
// A Chunk is meant to be reused across events: Parse resets it (keeping the
// ToolCalls backing array). Byte slices borrow from the ChunkParser and are
// valid until the next Parse with the same parser; copy to keep them.
type Chunk struct {
	Done    bool // the data was exactly [DONE]; nothing else is set
	Error   bool // the event is an error object ({"error":{...}})
	Choices int  // len(choices)

	// Index is the "index" of the first element of choices. Text, Role,
	// ToolCalls and FinishReason describe that element, which with n > 1
	// may be any choice; callers counting output should sum over all
	// chunks regardless of Index.
	Index int

	Text         []byte          // delta.content (chat) or text (completions) of the first choice, JSON-unescaped
	HasText      bool            // that field is present as a string (possibly empty)
	Role         []byte          // delta.role of the first choice, nil if absent
	ToolCalls    []ToolCallDelta // delta.tool_calls of the first choice
	FinishReason []byte          // finish_reason of the first choice, nil if null or absent

	// ErrorMessage is error.message when Error is set (nil otherwise).
	ErrorMessage []byte

	Usage Usage // "usage"; "usage": null means Usage.Present is false
}

// ToolCallDelta is one element of a streamed delta.tool_calls array. Only
// the first delta of a call carries ID and Name; Arguments arrive in
// pieces to be concatenated per Index. Slices follow Chunk's lifetime.
type ToolCallDelta struct {
	Index     int
	ID        []byte
	Name      []byte // function.name
	Arguments []byte // function.arguments fragment
}

// IsUsageOnly reports a chunk that carries usage and no choices: the final
// chunk an upstream sends when stream_options.include_usage is true.
func (c *Chunk) IsUsageOnly() bool {
	return c.Usage.Present && c.Choices == 0
}

// reset clears c for reuse, keeping the ToolCalls backing array.
func (c *Chunk) reset() {
	tc := c.ToolCalls[:0]
	*c = Chunk{ToolCalls: tc}
}

// ChunkParser parses streaming event data into a Chunk. It reuses its
// memory across calls and does not allocate in steady state. It is not safe
// for concurrent use; keep one per stream or goroutine. The zero value is
// ready to use.
type ChunkParser struct {
	p fastjson.Parser
}

// Parse parses an event's data (as produced by sse.AppendData) into c,
// which is reset first. Data exactly "[DONE]" sets c.Done. Otherwise the
// data must be a JSON object; fields of unexpected types are ignored, so a
// nonconforming but well-formed chunk still yields what can be read. It
// returns an error wrapping ErrInvalidChunk for data that is not a JSON
// object; the caller should still forward the raw event.
//
// data is copied; c's slices point into the parser, not into data.
func (p *ChunkParser) Parse(data []byte, c *Chunk) error {
	c.reset()
	if string(data) == "[DONE]" {
		c.Done = true
		return nil
	}
	root, err := p.p.ParseBytes(data)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidChunk, err)
	}
	if root.Type() != fastjson.TypeObject {
		return fmt.Errorf("%w: data is a JSON %s, not an object", ErrInvalidChunk, root.Type())
	}
	if e := root.Get("error"); e != nil && e.Type() != fastjson.TypeNull {
		c.Error = true
		c.ErrorMessage = stringOrNil(e.Get("message"))
	}
	c.Usage = ParseUsage(root.Get("usage"))
	choices := root.GetArray("choices")
	c.Choices = len(choices)
	if len(choices) == 0 {
		return nil
	}
	ch := choices[0]
	c.Index = ch.GetInt("index")
	c.FinishReason = stringOrNil(ch.Get("finish_reason"))
	delta := ch.Get("delta")
	if delta == nil || delta.Type() != fastjson.TypeObject {
		// text_completion chunk.
		c.Text = stringOrNil(ch.Get("text"))
		c.HasText = c.Text != nil
		return nil
	}
	c.Text = stringOrNil(delta.Get("content"))
	c.HasText = c.Text != nil
	c.Role = stringOrNil(delta.Get("role"))
	for _, tc := range delta.GetArray("tool_calls") {
		if tc.Type() != fastjson.TypeObject {
			continue
		}
		fn := tc.Get("function")
		c.ToolCalls = append(c.ToolCalls, ToolCallDelta{
			Index:     tc.GetInt("index"),
			ID:        stringOrNil(tc.Get("id")),
			Name:      stringOrNil(fn.Get("name")),
			Arguments: stringOrNil(fn.Get("arguments")),
		})
	}
	return nil
}

// noBytes is the non-nil empty slice returned for empty strings, so that
// nil always means absent.
var noBytes = []byte{}

// stringOrNil returns v's unescaped string (non-nil, possibly empty), or
// nil if v is not a string.
func stringOrNil(v *fastjson.Value) []byte {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil
	}
	s, _ := v.StringBytes()
	if s == nil {
		return noBytes
	}
	return s
}
