package mockllm

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

var anthropicHeaders = map[string]string{"X-Api-Key": "k", "Anthropic-Version": "2023-06-01"}

func messagesBody(stream bool, maxTokens int) string {
	return `{"model":"claude-mock","max_tokens":` + itoa(maxTokens) + `,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
		`,"system":"be brief","messages":[{"role":"user","content":[{"type":"text","text":"Hello there, mock"}]}]}`
}

// readAnthropicStream reads a Messages API stream as the gateway's
// translator does and returns the text, the tool calls' arguments, the
// finish reason and the usage.
func readAnthropicStream(t *testing.T, body []byte) (text, args, finish string, u openai.Usage) {
	t.Helper()
	r := anthropic.NewStreamReader(0)
	r.Reset(bytes.NewReader(body), "", "", 1, true)
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("stream: %v\n%s", err, body)
	}
	var cp openai.ChunkParser
	var c openai.Chunk
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		d, ok := sse.AppendData(nil, ev)
		if !ok {
			continue
		}
		if err := cp.Parse(d, &c); err != nil {
			t.Fatal(err)
		}
		text += string(c.Text)
		for _, tc := range c.ToolCalls {
			args += string(tc.Arguments)
		}
		if c.FinishReason != nil {
			finish = string(c.FinishReason)
		}
		if c.Usage.Present {
			u = c.Usage
		}
	}
	return text, args, finish, u
}

func TestMessagesStream(t *testing.T) {
	const text = "Hello, \"Claude\" — from the mock."
	tests := []struct {
		name               string
		cfg                Config
		maxTokens          int
		text, args, finish string
		completion         int64
	}{
		{"text", Config{Text: text, ChunkSize: 5}, 100, text, "", "stop", 7},
		{"max_tokens cuts", Config{Text: text, ChunkSize: 5}, 2, text[:10], "", "length", 2},
		{"tool call in the middle", Config{Text: text, ChunkSize: 5, ToolCallAt: 10, ToolCallArgs: []string{`{"city":`, `"Paris"}`}}, 100, text, `{"city":"Paris"}`, "tool_calls", 7},
		{"tool call at the end, no arguments", Config{Text: text, ChunkSize: 100, ToolCallAt: len(text)}, 100, text, "{}", "tool_calls", 1},
		{"generated tokens", Config{Tokens: 3}, 100, "tok0 tok1 tok2 ", "", "stop", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.APIKey = "k"
			_, ts, c := start(t, tt.cfg)
			resp, body, err := do(t, c, "POST", ts.URL+"/v1/messages", messagesBody(true, tt.maxTokens), anthropicHeaders)
			if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("%v %d %s", err, resp.StatusCode, body)
			}
			text, args, finish, u := readAnthropicStream(t, body)
			if text != tt.text || args != tt.args || finish != tt.finish {
				t.Errorf("text %q args %q finish %q, want %q %q %q", text, args, finish, tt.text, tt.args, tt.finish)
			}
			if !u.Present || u.PromptTokens != 6 || u.CompletionTokens != tt.completion {
				t.Errorf("usage %+v, want prompt 6 completion %d", u, tt.completion)
			}
		})
	}
}

func TestMessagesNonStream(t *testing.T) {
	const text = "Hello, \"Claude\" — from the mock."
	_, ts, c := start(t, Config{Text: text, ToolCallAt: 6, ToolCallArgs: []string{`{"a":`, `1}`}})
	resp, body, err := do(t, c, "POST", ts.URL+"/v1/messages", messagesBody(false, 100), anthropicHeaders)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %d %s", err, resp.StatusCode, body)
	}
	var m struct {
		Type    string `json:"type"`
		Content []struct {
			Type, Text, Name string
			Input            map[string]any
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if m.Type != "message" || len(m.Content) != 3 || m.Content[0].Text+m.Content[2].Text != text || m.Content[1].Name != mockToolName ||
		m.Content[1].Input["a"] != 1.0 || m.StopReason != "tool_use" || m.Usage.InputTokens != 6 {
		t.Errorf("message %s", body)
	}
	// The translation reads it.
	if _, err := anthropic.AppendResponse(nil, body, "", "", 1); err != nil {
		t.Errorf("AppendResponse: %v", err)
	}
}

func TestMessagesErrors(t *testing.T) {
	_, ts, c := start(t, Config{APIKey: "k", Text: "x"})
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
		typ    string
	}{
		{"bearer is not read", messagesBody(false, 5), map[string]string{"Authorization": "Bearer k", "Anthropic-Version": "2023-06-01"}, 401, "authentication_error"},
		{"wrong key", messagesBody(false, 5), map[string]string{"X-Api-Key": "no", "Anthropic-Version": "2023-06-01"}, 401, "authentication_error"},
		{"no version", messagesBody(false, 5), map[string]string{"X-Api-Key": "k"}, 400, "invalid_request_error"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, anthropicHeaders, 400, "invalid_request_error"},
		{"overloaded", messagesBody(true, 5), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "v", HeaderFailStatus: "529"}, 529, "overloaded_error"},
		{"rate limited", messagesBody(false, 5), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "v", HeaderFailStatus: "429"}, 429, "rate_limit_error"},
		{"server error", messagesBody(false, 5), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "v", HeaderFailStatus: "500"}, 500, "api_error"},
		{"unknown recording", messagesBody(false, 5), map[string]string{"X-Api-Key": "k", "Anthropic-Version": "v", HeaderRecording: "nope"}, 400, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _ := do(t, c, "POST", ts.URL+"/v1/messages", tt.body, tt.hdr)
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != tt.status || e.Type != "error" || e.Error.Type != tt.typ || e.Error.Message == "" {
				t.Errorf("%d %s, want %d %s", resp.StatusCode, body, tt.status, tt.typ)
			}
		})
	}
}

func TestMessagesRecordings(t *testing.T) {
	sseRec, err := os.ReadFile("../../anthropic/testdata/text_then_tool.sse")
	if err != nil {
		t.Fatal(err)
	}
	jsonRec, err := os.ReadFile("../../anthropic/testdata/response_text.json")
	if err != nil {
		t.Fatal(err)
	}
	_, ts, c := start(t, Config{Recordings: map[string][]byte{"tool": sseRec, "text": jsonRec}})
	hdr := map[string]string{"Anthropic-Version": "v", HeaderRecording: "tool"}
	resp, body, err := do(t, c, "POST", ts.URL+"/v1/messages", messagesBody(true, 5), hdr)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, sseRec) {
		t.Fatalf("replayed stream differs (%v %d):\n%s", err, resp.StatusCode, body)
	}
	hdr[HeaderRecording] = "text"
	resp, body, err = do(t, c, "POST", ts.URL+"/v1/messages", messagesBody(false, 5), hdr)
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, jsonRec) {
		t.Fatalf("replayed message differs (%v %d):\n%s", err, resp.StatusCode, body)
	}
	resp, _, _ = do(t, c, "POST", ts.URL+"/v1/messages", messagesBody(true, 5), hdr)
	if resp.StatusCode != 400 {
		t.Errorf("a JSON recording for a stream: %d", resp.StatusCode)
	}
}
