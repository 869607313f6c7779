package bedrock

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

var responseTests = []struct {
	name, in, want string
}{
	{"text",
		`{"output":{"message":{"role":"assistant","content":[{"text":"Hello "},{"reasoningContent":{"reasoningText":{"text":"hmm"}}},{"text":"\"world\""}]}},"stopReason":"end_turn",
		  "usage":{"inputTokens":10,"outputTokens":4,"totalTokens":34,"cacheReadInputTokens":12,"cacheWriteInputTokens":8},"metrics":{"latencyMs":9}}`,
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":"Hello \"world\"","refusal":null},` +
			`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":30,"completion_tokens":4,"total_tokens":34,"prompt_tokens_details":{"cached_tokens":12,"cache_write_tokens":8}}}`},
	{"tool calls",
		`{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris","days":[1, 2]}}},{"toolUse":{"toolUseId":"tooluse_2","name":"now","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":2}}`,
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[` +
			`{"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"days\":[1,2]}"}},` +
			`{"id":"tooluse_2","type":"function","function":{"name":"now","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`},
	{"length, no usage",
		`{"output":{"message":{"role":"assistant","content":[]}},"stopReason":"max_tokens"}`,
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":"length"}]}`},
	{"guardrail",
		`{"output":{"message":{"role":"assistant","content":[{"text":"Sorry."}]}},"stopReason":"guardrail_intervened"}`,
		`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"claude","choices":[{"index":0,"message":{"role":"assistant","content":"Sorry.","refusal":null},"logprobs":null,"finish_reason":"content_filter"}]}`},
}

func TestAppendResponse(t *testing.T) {
	for _, tc := range responseTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendResponse([]byte("x"), []byte(tc.in), "claude", "chatcmpl-1", 1700000000)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "x"+tc.want {
				t.Fatalf("got  %s\nwant x%s", got, tc.want)
			}
		})
	}
}

func TestAppendResponseErrors(t *testing.T) {
	for _, in := range []string{``, `[]`, `{"message":"x"}`, `{"output":{"message":{"content":{}}}}`, `{"output":1}`} {
		got, err := AppendResponse([]byte("dst"), []byte(in), "m", "id", 1)
		var e *openai.Error
		if !errors.As(err, &e) || e.Status != 502 || e.Code != "upstream_bad_response" || string(got) != "dst" {
			t.Errorf("AppendResponse(%q) = %q, %v; want dst and a 502", in, got, err)
		}
	}
}

func TestAppendResponseNewID(t *testing.T) {
	body := []byte(`{"output":{"message":{"content":[{"text":"x"}]}},"stopReason":"end_turn"}`)
	a, _ := AppendResponse(nil, body, "m", "", 1)
	b, _ := AppendResponse(nil, body, "m", "", 1)
	if len(a) != len(b) || string(a) == string(b) || string(a[:16]) != `{"id":"chatcmpl-` {
		t.Fatalf("ids not fresh: %s / %s", a, b)
	}
}

// Every stopReason Converse documents has its finish_reason, in a whole
// reply and at a stream's end alike (both call FinishReason).
func TestFinishReason(t *testing.T) {
	for _, tc := range []struct{ stop, want string }{
		{"end_turn", "stop"},
		{"stop_sequence", "stop"},
		{"max_tokens", "length"},
		{"model_context_window_exceeded", "length"},
		{"tool_use", "tool_calls"},
		{"guardrail_intervened", "content_filter"},
		{"content_filtered", "content_filter"},
		{"malformed_model_output", "stop"},
		{"", "stop"},
	} {
		if got := FinishReason([]byte(tc.stop)); got != tc.want {
			t.Errorf("FinishReason(%q) = %q, want %q", tc.stop, got, tc.want)
		}
	}
}
