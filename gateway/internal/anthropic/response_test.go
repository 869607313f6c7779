package anthropic

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestAppendResponseGolden(t *testing.T) {
	type call struct{ id, name, args string }
	tests := []struct {
		name      string // testdata/<name>.json → testdata/<name>.golden.json
		model, id string
		wantID    string
		wantModel string
		content   *string
		calls     []call
		finish    string
		usage     *oaUsage
	}{
		{
			name: "response_text", model: testModel, id: testID, wantID: testID, wantModel: testModel,
			content: ptr("Hi! My name is Claude. \"Nice\" to meet you.\n"), finish: "stop", usage: usage(2095, 503, 0, 0),
		},
		{
			name: "response_tool_use", model: testModel, id: testID, wantID: testID, wantModel: testModel,
			content: ptr("I'll check the current weather in San Francisco for you."),
			calls: []call{
				{"toolu_01A09q90qw90lq917835lq9", "get_weather", `{"location":"San Francisco, CA","unit":"celsius","days":[1,2.5e3],"ok":true,"note":null,"quote":"say \"hi\"\n"}`},
				{"toolu_01B19q90qw90lq917835lq0", "get_time", `{}`},
			},
			finish: "tool_calls", usage: usage(1520, 120, 1000, 20),
		},
		{
			// Only tool calls: content is null. Empty model and id: the upstream's.
			name: "response_tool_only", wantID: "msg_tool_only", wantModel: "claude-haiku-4-5",
			calls:  []call{{"toolu_x", "lookup", `{"q":"tollgate"}`}},
			finish: "tool_calls", usage: usage(10, 5, 0, 0),
		},
		{
			// No usage in the reply: no usage member.
			name: "response_max_tokens", model: testModel, id: testID, wantID: testID, wantModel: testModel,
			content: ptr("Once upon a"), finish: "length",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendResponse(nil, in, tc.model, tc.id, testCreated)
			if err != nil {
				t.Fatalf("AppendResponse: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", tc.name+".golden.json"), got)

			var c oaCompletion
			decodeStrict(t, got, &c)
			if c.ID != tc.wantID || c.Object != "chat.completion" || c.Created != testCreated || c.Model != tc.wantModel {
				t.Errorf("id %q object %q created %d model %q", c.ID, c.Object, c.Created, c.Model)
			}
			if len(c.Choices) != 1 {
				t.Fatalf("%d choices", len(c.Choices))
			}
			ch := c.Choices[0]
			m := ch.Message
			if ch.Index != 0 || m.Role != "assistant" || ch.FinishReason != tc.finish || string(ch.Logprobs) != "null" || m.Refusal != nil {
				t.Errorf("choice %+v", ch)
			}
			if (m.Content == nil) != (tc.content == nil) || (m.Content != nil && *m.Content != *tc.content) {
				t.Errorf("content %v, want %v", deref(m.Content), deref(tc.content))
			}
			if len(m.ToolCalls) != len(tc.calls) {
				t.Fatalf("tool calls %+v, want %+v", m.ToolCalls, tc.calls)
			}
			for i, want := range tc.calls {
				got := m.ToolCalls[i]
				if got.Index != nil || got.ID != want.id || got.Type != "function" || got.Function.Name != want.name || deref(got.Function.Arguments) != want.args {
					t.Errorf("tool call %d: %+v %q, want %+v", i, got, deref(got.Function.Arguments), want)
				}
			}
			if (c.Usage == nil) != (tc.usage == nil) || (c.Usage != nil && !sameUsage(*c.Usage, *tc.usage)) {
				t.Errorf("usage %+v, want %+v", c.Usage, tc.usage)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestAppendResponseErrors(t *testing.T) {
	overloaded, err := os.ReadFile("testdata/response_error.json")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		body   string
		status int
		typ    string
		code   string
		msg    string
	}{
		{"error body", string(overloaded), 503, "server_error", "overloaded", "Overloaded"},
		{"not JSON", `{"id":`, 502, "upstream_error", "upstream_bad_response", "not valid JSON"},
		{"lenient-only JSON", `{"content":[],"usage":{"input_tokens":nan}}`, 502, "upstream_error", "upstream_bad_response", "not valid JSON"},
		{"array", `[]`, 502, "upstream_error", "upstream_bad_response", "not a JSON object"},
		{"no content", `{"id":"msg","type":"message"}`, 502, "upstream_error", "upstream_bad_response", "no content array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendResponse([]byte("keep"), []byte(tc.body), "m", "id", 1)
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want *openai.Error", err)
			}
			if e.Status != tc.status || e.Type != tc.typ || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %+v", e)
			}
			if string(got) != "keep" {
				t.Errorf("dst changed: %q", got)
			}
		})
	}
}

func TestAppendResponseEmptyContent(t *testing.T) {
	got, err := AppendResponse(nil, []byte(`{"id":"msg","type":"message","content":[],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":0}}`), "m", "c", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"c","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
