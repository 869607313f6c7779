package openai

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

// Realistic event data, as sse.AppendData returns it.
const (
	chunkRole     = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`
	chunkText     = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello, \"world\"\n\u00e9"},"logprobs":null,"finish_reason":null}],"usage":null}`
	chunkStop     = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`
	chunkUsage    = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}`
	chunkTool1    = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`
	chunkTool2    = `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"loc"}},{"index":1,"function":{"arguments":"x"}}]},"finish_reason":null}]}`
	chunkCompl    = `{"id":"cmpl-1","object":"text_completion","created":1700000000,"choices":[{"text":" test","index":0,"logprobs":null,"finish_reason":null}],"model":"gpt-3.5-turbo-instruct"}`
	chunkComplEnd = `{"id":"cmpl-1","object":"text_completion","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"model":"m","usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`
	chunkError    = `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`
)

func TestChunkParse(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Chunk
	}{
		{"done", "[DONE]", Chunk{Done: true}},
		{"role", chunkRole, Chunk{Choices: 1, Role: []byte("assistant"), Text: []byte{}, HasText: true}},
		{"text", chunkText, Chunk{Choices: 1, Text: []byte("Hello, \"world\"\né"), HasText: true}},
		{"stop", chunkStop, Chunk{Choices: 1, FinishReason: []byte("stop")}},
		{"usage only", chunkUsage, Chunk{Usage: Usage{Present: true, PromptTokens: 19, CompletionTokens: 10, TotalTokens: 29}}},
		{"tool call start", chunkTool1, Chunk{Choices: 1, Role: []byte("assistant"), ToolCalls: []ToolCallDelta{
			{Index: 0, ID: []byte("call_abc"), Name: []byte("get_weather"), Arguments: []byte{}},
		}}},
		{"tool call args", chunkTool2, Chunk{Choices: 1, ToolCalls: []ToolCallDelta{
			{Index: 0, Arguments: []byte(`{"loc`)}, {Index: 1, Arguments: []byte("x")},
		}}},
		{"completion", chunkCompl, Chunk{Choices: 1, Text: []byte(" test"), HasText: true}},
		{"completion end with usage", chunkComplEnd, Chunk{Choices: 1, Text: []byte{}, HasText: true, FinishReason: []byte("length"),
			Usage: Usage{Present: true, PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}}},
		{"error", chunkError, Chunk{Error: true, ErrorMessage: []byte("The server had an error while processing your request.")}},
		{"error null", `{"error":null,"choices":[]}`, Chunk{}},
		{"second choice index", `{"choices":[{"index":2,"delta":{"content":"b"}}]}`, Chunk{Choices: 1, Index: 2, Text: []byte("b"), HasText: true}},
		{"odd types ignored", `{"choices":[{"delta":{"content":5,"role":1,"tool_calls":[1,{"function":3}]},"finish_reason":7}],"usage":"x"}`,
			Chunk{Choices: 1, ToolCalls: []ToolCallDelta{{}}}},
		{"choices not array", `{"choices":{}}`, Chunk{}},
		{"empty object", `{}`, Chunk{}},
	}
	var p ChunkParser
	var c Chunk
	// Dirty c first: Parse must reset it.
	if err := p.Parse([]byte(chunkTool2), &c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Parse([]byte(tc.data), &c); err != nil {
				t.Fatal(err)
			}
			if !equalChunk(c, tc.want) {
				t.Fatalf("got  %s\nwant %s", fmtChunk(c), fmtChunk(tc.want))
			}
		})
	}
}

// equalChunk compares chunks treating nil and empty ToolCalls alike.
func equalChunk(a, b Chunk) bool {
	if len(a.ToolCalls) == 0 && len(b.ToolCalls) == 0 {
		a.ToolCalls, b.ToolCalls = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

func fmtChunk(c Chunk) string {
	s := fmt.Sprintf("Done=%v Error=%v Choices=%d Index=%d Text=%s HasText=%v Role=%s Finish=%s ErrMsg=%s",
		c.Done, c.Error, c.Choices, c.Index, q(c.Text), c.HasText, q(c.Role), q(c.FinishReason), q(c.ErrorMessage))
	for _, tc := range c.ToolCalls {
		s += fmt.Sprintf(" TC{%d %s %s %s}", tc.Index, q(tc.ID), q(tc.Name), q(tc.Arguments))
	}
	return s + fmt.Sprintf(" Usage%+v", c.Usage)
}

func q(b []byte) string {
	if b == nil {
		return "nil"
	}
	return strconv.Quote(string(b))
}

func TestChunkIsUsageOnly(t *testing.T) {
	var p ChunkParser
	var c Chunk
	for data, want := range map[string]bool{
		chunkUsage:     true,
		chunkComplEnd:  false,
		chunkText:      false,
		"[DONE]":       false,
		`{"usage":{}}`: true,
	} {
		if err := p.Parse([]byte(data), &c); err != nil {
			t.Fatal(err)
		}
		if c.IsUsageOnly() != want {
			t.Errorf("%s: IsUsageOnly = %v", data, !want)
		}
	}
}

func TestChunkParseInvalid(t *testing.T) {
	var p ChunkParser
	var c Chunk
	for _, data := range []string{"", "{", "[1]", `"x"`, "null", "[DONE] ", "data: {}", `{"a":1}x`} {
		err := p.Parse([]byte(data), &c)
		if !errors.Is(err, ErrInvalidChunk) {
			t.Errorf("%q: err = %v", data, err)
		}
		if c.Done || c.Choices != 0 {
			t.Errorf("%q: chunk not reset: %+v", data, c)
		}
	}
}

func TestChunkSlicesDoNotAliasInput(t *testing.T) {
	var p ChunkParser
	var c Chunk
	data := []byte(`{"choices":[{"delta":{"content":"abc"}}]}`)
	if err := p.Parse(data, &c); err != nil {
		t.Fatal(err)
	}
	copy(data[33:], "xyz")
	if string(c.Text) != "abc" {
		t.Fatalf("Text = %q after changing the input", c.Text)
	}
}
