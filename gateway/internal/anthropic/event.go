package anthropic

import (
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// ErrInvalidEvent is returned (wrapped) for stream event data that is not
// a JSON object.
var ErrInvalidEvent = errors.New("anthropic: invalid stream event")

// EventType is the "type" of a Messages API stream event.
type EventType uint8

// The stream event types. EventUnknown covers types this package does not
// know (the API may add some; they are to be ignored).
const (
	EventUnknown           EventType = iota
	EventMessageStart                // message_start
	EventContentBlockStart           // content_block_start
	EventContentBlockDelta           // content_block_delta
	EventContentBlockStop            // content_block_stop
	EventMessageDelta                // message_delta
	EventMessageStop                 // message_stop
	EventPing                        // ping
	EventError                       // error
)

var eventTypes = [...]string{
	EventUnknown:           "unknown",
	EventMessageStart:      "message_start",
	EventContentBlockStart: "content_block_start",
	EventContentBlockDelta: "content_block_delta",
	EventContentBlockStop:  "content_block_stop",
	EventMessageDelta:      "message_delta",
	EventMessageStop:       "message_stop",
	EventPing:              "ping",
	EventError:             "error",
}

// String returns the wire name of t ("unknown" for EventUnknown).
func (t EventType) String() string {
	if int(t) < len(eventTypes) {
		return eventTypes[t]
	}
	return "unknown"
}

func eventTypeOf(name []byte) EventType {
	for t := EventMessageStart; int(t) < len(eventTypes); t++ {
		if string(name) == eventTypes[t] {
			return t
		}
	}
	return EventUnknown
}

// BlockType is the type of a content block a content_block_start opens.
type BlockType uint8

// Content block types. BlockOther covers the rest (redacted_thinking,
// server_tool_use, web_search_tool_result, ...).
const (
	BlockNone     BlockType = iota // not a content_block_start
	BlockText                      // "text"
	BlockToolUse                   // "tool_use"
	BlockThinking                  // "thinking"
	BlockOther
)

// DeltaType is the type of a content_block_delta's delta.
type DeltaType uint8

// Delta types. DeltaOther covers the rest (signature_delta,
// citations_delta, ...).
const (
	DeltaNone      DeltaType = iota // not a content_block_delta
	DeltaText                       // "text_delta"
	DeltaInputJSON                  // "input_json_delta"
	DeltaThinking                   // "thinking_delta"
	DeltaOther
)

// Usage is the token usage an Anthropic message reports. Counts are
// cumulative for the message.
type Usage struct {
	Present                  bool // a "usage" object was there
	InputTokens              int64
	OutputTokens             int64
	CacheCreationInputTokens int64
	CacheReadInputTokens     int64
}

// merge applies a message_delta's usage to u: its counts are cumulative,
// and input counts appear there only in newer API versions.
func (u *Usage) merge(d Usage) {
	if !d.Present {
		return
	}
	u.Present = true
	if d.InputTokens > 0 {
		u.InputTokens = d.InputTokens
	}
	if d.CacheCreationInputTokens > 0 {
		u.CacheCreationInputTokens = d.CacheCreationInputTokens
	}
	if d.CacheReadInputTokens > 0 {
		u.CacheReadInputTokens = d.CacheReadInputTokens
	}
	if d.OutputTokens > 0 {
		u.OutputTokens = d.OutputTokens
	}
}

// PromptTokens is what OpenAI calls prompt_tokens: every input token,
// cached or not.
func (u Usage) PromptTokens() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// OpenAI returns u in OpenAI's terms: prompt_tokens counts the cache's
// reads and writes too (Anthropic's input_tokens leaves them out), the
// reads reported again as cached_tokens and the writes as
// cache_write_tokens, which are priced apart.
func (u Usage) OpenAI() openai.Usage {
	if !u.Present {
		return openai.Usage{}
	}
	p := u.PromptTokens()
	return openai.Usage{Present: true, PromptTokens: p, CompletionTokens: u.OutputTokens, TotalTokens: p + u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
}

// Event is one parsed stream event. Byte slices borrow from the
// EventParser and are valid until its next Parse; copy them to keep them.
type Event struct {
	Type  EventType
	Index int       // content block index (content_block_* events)
	Block BlockType // content_block_start: content_block.type
	Delta DeltaType // content_block_delta: delta.type

	// Text is the text of a text_delta, or the initial text of a text
	// block in content_block_start (usually empty). JSON-unescaped.
	Text []byte
	// PartialJSON is the partial_json fragment of an input_json_delta.
	PartialJSON []byte

	ToolID, ToolName []byte // content_block_start of a tool_use block
	MessageID, Model []byte // message_start's message.id and message.model

	// StopReason is message_delta's delta.stop_reason; nil when null or
	// absent.
	StopReason []byte

	// Usage is message_start's message.usage or message_delta's usage.
	Usage Usage

	// ErrorType and ErrorMessage are an error event's error.type and
	// error.message.
	ErrorType, ErrorMessage []byte
}

// EventParser parses Messages API stream event data into an Event. It
// reuses its memory and does not allocate in steady state. It is not safe
// for concurrent use. The zero value is ready to use.
type EventParser struct {
	p fastjson.Parser
}

// Parse parses one event's data (the JSON after "data:", as produced by
// sse.AppendData) into ev, which is reset first. The event type is the
// data's "type" member; name (the SSE "event:" field, may be nil) is used
// only when the data has none. Members of unexpected types are ignored, so
// a well-formed but odd event still yields what can be read. It returns
// an error wrapping ErrInvalidEvent when data is not a JSON object.
func (p *EventParser) Parse(data, name []byte, ev *Event) error {
	*ev = Event{}
	root, err := p.p.ParseBytes(data)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if root.Type() != fastjson.TypeObject {
		return fmt.Errorf("%w: data is a JSON %s, not an object", ErrInvalidEvent, root.Type())
	}
	if typ, ok := stringOf(root.Get("type")); ok {
		name = typ
	}
	ev.Type = eventTypeOf(name)
	switch ev.Type {
	case EventMessageStart:
		msg := root.Get("message")
		ev.MessageID, _ = stringOf(msg.Get("id"))
		ev.Model, _ = stringOf(msg.Get("model"))
		ev.Usage = usageOf(msg.Get("usage"))
	case EventContentBlockStart:
		ev.Index = root.GetInt("index")
		parseBlockStart(root.Get("content_block"), ev)
	case EventContentBlockDelta:
		ev.Index = root.GetInt("index")
		parseDelta(root.Get("delta"), ev)
	case EventContentBlockStop:
		ev.Index = root.GetInt("index")
	case EventMessageDelta:
		ev.StopReason, _ = stringOf(root.Get("delta", "stop_reason"))
		ev.Usage = usageOf(root.Get("usage"))
	case EventError:
		ev.ErrorType, _ = stringOf(root.Get("error", "type"))
		ev.ErrorMessage, _ = stringOf(root.Get("error", "message"))
	}
	return nil
}

func parseBlockStart(b *fastjson.Value, ev *Event) {
	typ, _ := stringOf(b.Get("type"))
	switch string(typ) {
	case "text":
		ev.Block = BlockText
		ev.Text, _ = stringOf(b.Get("text"))
	case "tool_use":
		ev.Block = BlockToolUse
		ev.ToolID, _ = stringOf(b.Get("id"))
		ev.ToolName, _ = stringOf(b.Get("name"))
	case "thinking":
		ev.Block = BlockThinking
	default:
		ev.Block = BlockOther
	}
}

func parseDelta(d *fastjson.Value, ev *Event) {
	typ, _ := stringOf(d.Get("type"))
	switch string(typ) {
	case "text_delta":
		ev.Delta = DeltaText
		ev.Text, _ = stringOf(d.Get("text"))
	case "input_json_delta":
		ev.Delta = DeltaInputJSON
		ev.PartialJSON, _ = stringOf(d.Get("partial_json"))
	case "thinking_delta":
		ev.Delta = DeltaThinking
	default:
		ev.Delta = DeltaOther
	}
}

// usageOf reads a usage object; absent or null members count as 0.
func usageOf(u *fastjson.Value) Usage {
	if u == nil || u.Type() != fastjson.TypeObject {
		return Usage{}
	}
	return Usage{
		Present:                  true,
		InputTokens:              u.GetInt64("input_tokens"),
		OutputTokens:             u.GetInt64("output_tokens"),
		CacheCreationInputTokens: u.GetInt64("cache_creation_input_tokens"),
		CacheReadInputTokens:     u.GetInt64("cache_read_input_tokens"),
	}
}

var eventParsers = sync.Pool{New: func() any { return new(EventParser) }}

// ParseStreamUsage reads the usage a native stream event reports (for
// accounting on /v1/messages pass-through). ok is true for message_start
// (input is message.usage's input tokens, cached ones included; output is
// usually 1) and for message_delta with a usage object (output is the
// cumulative output_tokens; input is 0 unless the API repeats it). Both
// counts are cumulative: keep the largest value seen of each. event is the
// event's data JSON. It does not allocate in steady state.
func ParseStreamUsage(event []byte) (input, output int64, ok bool) {
	p := eventParsers.Get().(*EventParser)
	defer eventParsers.Put(p)
	var ev Event
	if p.Parse(event, nil, &ev) != nil || !ev.Usage.Present {
		return 0, 0, false
	}
	if ev.Type != EventMessageStart && ev.Type != EventMessageDelta {
		return 0, 0, false
	}
	return ev.Usage.PromptTokens(), ev.Usage.OutputTokens, true
}

// AppendStreamText appends the text of a native stream event's text_delta
// (JSON-unescaped) to dst, so guards can read it, and reports whether the
// event was a text_delta. Other events leave dst unchanged. It does not
// allocate unless dst must grow.
//
// It takes dst rather than returning a slice of its own because the text
// lives in a pooled parser; use EventParser for a borrowed slice.
func AppendStreamText(dst, event []byte) ([]byte, bool) {
	p := eventParsers.Get().(*EventParser)
	defer eventParsers.Put(p)
	var ev Event
	if p.Parse(event, nil, &ev) != nil || ev.Type != EventContentBlockDelta || ev.Delta != DeltaText {
		return dst, false
	}
	return append(dst, ev.Text...), true
}

// ResponseUsage reads "usage" from a native non-streamed Messages API
// reply: input is every input token (cached ones included), output the
// output tokens. ok is false when the body has no usage object.
func ResponseUsage(body []byte) (input, output int64, ok bool) {
	p := eventParsers.Get().(*EventParser)
	defer eventParsers.Put(p)
	root, err := p.p.ParseBytes(body)
	if err != nil {
		return 0, 0, false
	}
	u := usageOf(root.Get("usage"))
	return u.PromptTokens(), u.OutputTokens, u.Present
}

// EventName returns the value of the "event:" field of a raw SSE event (as
// returned by sse.Reader.Next), without its optional leading space, or nil
// when there is none. The slice borrows from raw.
func EventName(raw []byte) []byte {
	for len(raw) > 0 {
		n := 0
		for n < len(raw) && raw[n] != '\n' && raw[n] != '\r' {
			n++
		}
		line := raw[:n]
		raw = raw[n:]
		if len(raw) > 0 {
			raw = raw[1:]
		}
		if len(line) >= 6 && string(line[:6]) == "event:" {
			v := line[6:]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			return v
		}
	}
	return nil
}
