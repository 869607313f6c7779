package bedrock

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

const chunkPrefix = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"claude","choices":[`

// chunk is one expected OpenAI chunk event with the given choice (or
// usage, for the final usage chunk) and, with includeUsage, "usage":null.
func chunk(choice string, usage bool) string {
	s := chunkPrefix + choice + "]"
	if usage {
		s += `,"usage":null`
	}
	return s + "}\n\n"
}

func delta(d, finish string) string {
	return `{"index":0,"delta":` + d + `,"logprobs":null,"finish_reason":` + finish + `}`
}

func readAll(tb testing.TB, src io.Reader, includeUsage bool) (string, error) {
	tb.Helper()
	r := NewStreamReader(0)
	r.Reset(src, "claude", "chatcmpl-1", 1700000000, includeUsage)
	out, err := io.ReadAll(r)
	return string(out), err
}

func TestStreamReader(t *testing.T) {
	text := stream(
		eventMessage(t, "messageStart", `{"role":"assistant","p":"abcdefgh"}`),
		eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel"},"p":"ab"}`),
		eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"lo \"x\"\n"}}`),
		eventMessage(t, "contentBlockStop", `{"contentBlockIndex":0}`),
		eventMessage(t, "messageStop", `{"stopReason":"end_turn"}`),
		eventMessage(t, "metadata", `{"usage":{"inputTokens":10,"outputTokens":3,"totalTokens":18,"cacheReadInputTokens":5},"metrics":{"latencyMs":120}}`),
	)
	tools := stream(
		eventMessage(t, "messageStart", `{"role":"assistant"}`),
		eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Let me check."}}`),
		eventMessage(t, "contentBlockStop", `{"contentBlockIndex":0}`),
		eventMessage(t, "contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"tooluse_a","name":"get_weather"}}}`),
		eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}}}`),
		eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"\"Paris\"}"}}}`),
		eventMessage(t, "contentBlockStop", `{"contentBlockIndex":1}`),
		eventMessage(t, "contentBlockStart", `{"contentBlockIndex":2,"start":{"toolUse":{"toolUseId":"tooluse_b","name":"now"}}}`),
		eventMessage(t, "contentBlockStop", `{"contentBlockIndex":2}`),
		eventMessage(t, "messageStop", `{"stopReason":"tool_use"}`),
		eventMessage(t, "metadata", `{"usage":{"inputTokens":7,"outputTokens":20,"totalTokens":27}}`),
	)
	role := chunk(delta(`{"role":"assistant","content":""}`, "null"), false)
	tests := []struct {
		name         string
		in           []byte
		includeUsage bool
		want         string
		err          error
	}{
		{"text", text, false, role +
			chunk(delta(`{"content":"Hel"}`, "null"), false) +
			chunk(delta(`{"content":"lo \"x\"\n"}`, "null"), false) +
			chunk(delta(`{}`, `"stop"`), false) +
			"data: [DONE]\n\n", nil},
		{"text with usage", text, true, chunk(delta(`{"role":"assistant","content":""}`, "null"), true) +
			chunk(delta(`{"content":"Hel"}`, "null"), true) +
			chunk(delta(`{"content":"lo \"x\"\n"}`, "null"), true) +
			chunk(delta(`{}`, `"stop"`), true) +
			chunkPrefix + `],"usage":{"prompt_tokens":15,"completion_tokens":3,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":5}}}` + "\n\n" +
			"data: [DONE]\n\n", nil},
		{"tools", tools, false, role +
			chunk(delta(`{"content":"Let me check."}`, "null"), false) +
			chunk(delta(`{"tool_calls":[{"index":0,"id":"tooluse_a","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"), false) +
			chunk(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"), false) +
			chunk(delta(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"), false) +
			chunk(delta(`{"tool_calls":[{"index":1,"id":"tooluse_b","type":"function","function":{"name":"now","arguments":""}}]}`, "null"), false) +
			chunk(delta(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, "null"), false) +
			chunk(delta(`{}`, `"tool_calls"`), false) +
			"data: [DONE]\n\n", nil},
		{"no metadata after messageStop", stream(
			eventMessage(t, "messageStart", `{"role":"assistant"}`),
			eventMessage(t, "messageStop", `{"stopReason":"max_tokens"}`),
		), true, chunk(delta(`{"role":"assistant","content":""}`, "null"), true) +
			chunk(delta(`{}`, `"length"`), true) +
			"data: [DONE]\n\n", nil},
		{"exception mid-stream", stream(
			eventMessage(t, "messageStart", `{"role":"assistant"}`),
			eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
			exceptionMessage(t, "throttlingException", `{"message":"Too many tokens, please wait before trying again."}`),
			eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"ignored"}}`),
		), false, role +
			chunk(delta(`{"content":"Hi"}`, "null"), false) +
			`data: {"error":{"message":"Too many tokens, please wait before trying again.","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}` + "\n\n", nil},
		{"ends before messageStop", stream(
			eventMessage(t, "messageStart", `{"role":"assistant"}`),
			eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`),
		), false, role + chunk(delta(`{"content":"Hi"}`, "null"), false), io.ErrUnexpectedEOF},
		{"empty body", nil, false, "", io.ErrUnexpectedEOF},
		{"payload not JSON", stream(
			eventMessage(t, "messageStart", `{"role":"assistant"}`),
			eventMessage(t, "contentBlockDelta", `nope`),
		), false, role, ErrInvalidEvent},
		{"broken framing", stream(
			eventMessage(t, "messageStart", `{"role":"assistant"}`),
			[]byte("<html>502 Bad Gateway</html>"),
		), false, role, ErrInvalidMessage},
	}
	for _, tc := range tests {
		for _, split := range []bool{false, true} {
			name := tc.name
			var src io.Reader = bytes.NewReader(tc.in)
			if split {
				name += "/one byte reads"
				src = iotest.OneByteReader(src)
			}
			t.Run(name, func(t *testing.T) {
				got, err := readAll(t, src, tc.includeUsage)
				if (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if got != tc.want {
					t.Fatalf("output:\n%s\nwant:\n%s", got, tc.want)
				}
			})
		}
	}
}

func TestStreamReaderSourceError(t *testing.T) {
	boom := errors.New("read timeout")
	src := io.MultiReader(bytes.NewReader(eventMessage(t, "messageStart", `{"role":"assistant"}`)), iotest.ErrReader(boom))
	got, err := readAll(t, src, false)
	if !errors.Is(err, boom) || !strings.Contains(got, `"role":"assistant"`) {
		t.Fatalf("got %q, %v; want the role chunk, then %v", got, err, boom)
	}
}

func TestStreamReaderDrains(t *testing.T) {
	// After [DONE] the rest of the body is read, so the connection can be
	// reused.
	body := bytes.NewReader(stream(
		eventMessage(t, "messageStop", `{"stopReason":"end_turn"}`),
		eventMessage(t, "metadata", `{"usage":{"inputTokens":1,"outputTokens":1}}`),
		eventMessage(t, "unknownTrailer", `{}`),
	))
	got, err := readAll(t, body, false)
	if err != nil || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("got %q, %v", got, err)
	}
	if body.Len() != 0 {
		t.Fatalf("%d bytes left unread", body.Len())
	}
}
