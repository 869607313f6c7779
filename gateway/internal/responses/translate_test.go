package responses

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// chatStream is a chat.completion.chunk stream with text, a tool call and
// usage.
const chatStream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo \""},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":""}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":3}}}

data: [DONE]

`

// readEvents splits a Responses stream into its events' types and data.
func readEvents(t *testing.T, b []byte) (types []string, data []map[string]any) {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(b), 0)
	for {
		raw, err := rd.Next()
		if err == io.EOF {
			return types, data
		}
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		d, _ := sse.AppendData(nil, raw)
		var m map[string]any
		if err := json.Unmarshal(d, &m); err != nil {
			t.Fatalf("event %q is not JSON: %v", d, err)
		}
		if name := string(EventName(raw)); name != m["type"] {
			t.Fatalf("event: %q, type %q", name, m["type"])
		}
		types = append(types, name(m))
		data = append(data, m)
	}
}

func name(m map[string]any) string { s, _ := m["type"].(string); return s }

func TestStreamReaderTranslatesChat(t *testing.T) {
	r := NewStreamReader(0)
	r.Reset(strings.NewReader(chatStream), []byte("mock-1"), []byte("resp_abc"), 1700000000)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	types, data := readEvents(t, out)
	want := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Fatalf("events:\n got %v\nwant %v", types, want)
	}
	for i, d := range data {
		if got := d["sequence_number"].(float64); int(got) != i {
			t.Errorf("event %d: sequence_number %v", i, got)
		}
	}
	if got := data[6]["text"]; got != "Hello \"" {
		t.Errorf("output_text.done text = %q", got)
	}
	if got := data[12]["arguments"]; got != `{"a":1}` {
		t.Errorf("arguments.done = %q", got)
	}
	resp := data[14]["response"].(map[string]any)
	if resp["status"] != "completed" || resp["id"] != "resp_abc" || resp["model"] != "mock-1" {
		t.Errorf("completed response: %v", resp)
	}
	u := resp["usage"].(map[string]any)
	if u["input_tokens"].(float64) != 7 || u["output_tokens"].(float64) != 5 || u["total_tokens"].(float64) != 12 ||
		u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64) != 3 {
		t.Errorf("usage: %v", u)
	}
	items := resp["output"].([]any)
	if len(items) != 2 || items[1].(map[string]any)["call_id"] != "call_1" || items[1].(map[string]any)["name"] != "get" {
		t.Errorf("output: %v", items)
	}

	// The view reads the translation back as the chat stream's facts.
	var v View
	var c openai.Chunk
	var text, args []byte
	var finish string
	var usage openai.Usage
	rd := sse.NewReader(bytes.NewReader(out), 0)
	for {
		raw, err := rd.Next()
		if err != nil {
			break
		}
		d, _ := sse.AppendData(nil, raw)
		if _, err := v.Parse(d, &c); err != nil {
			t.Fatal(err)
		}
		text = append(text, c.Text...)
		for _, tc := range c.ToolCalls {
			if tc.Index != 0 {
				t.Errorf("tool call index %d", tc.Index)
			}
			args = append(args, tc.Arguments...)
		}
		if c.FinishReason != nil {
			finish = string(c.FinishReason)
		}
		if c.Usage.Present {
			usage = c.Usage
		}
	}
	if string(text) != "Hello \"" || string(args) != `{"a":1}` || finish != "tool_calls" || usage.PromptTokens != 7 || usage.CompletionTokens != 5 {
		t.Errorf("view: text %q args %q finish %q usage %+v", text, args, finish, usage)
	}
}

func TestStreamReaderEndsEarly(t *testing.T) {
	r := NewStreamReader(0)
	cut := chatStream[:strings.Index(chatStream, "data: [DONE]")]
	r.Reset(strings.NewReader(cut), []byte("m"), []byte("resp_1"), 1)
	if _, err := io.ReadAll(r); err != io.ErrUnexpectedEOF {
		t.Fatalf("err = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestStreamReaderLengthIsIncomplete(t *testing.T) {
	s := `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}

data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}

data: [DONE]

`
	r := NewStreamReader(0)
	r.Reset(strings.NewReader(s), []byte("m"), []byte("resp_1"), 1)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	types, data := readEvents(t, out)
	last := data[len(data)-1]
	if types[len(types)-1] != "response.incomplete" {
		t.Fatalf("last event %s", types[len(types)-1])
	}
	resp := last["response"].(map[string]any)
	if resp["status"] != "incomplete" || resp["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || resp["usage"] != nil {
		t.Errorf("response: %v", resp)
	}
}
