package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The Anthropic provider: OpenAI-style chat requests translated to the
// Messages API and back, and POST /v1/messages passed through, against
// the mock model's Messages API mode, which also replays the streams and
// replies recorded in gateway/internal/anthropic/testdata.

const anthropicKey = "sk-ant-upstream"

// anthropicRecordings reads the anthropic package's recordings: name (the
// file name without extension) → bytes.
func anthropicRecordings(t *testing.T) map[string][]byte {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "gateway/internal/anthropic/testdata")
	recs := map[string][]byte{}
	for _, pat := range []string{"*.sse", "response_*.json"} {
		files, _ := filepath.Glob(filepath.Join(dir, pat))
		for _, f := range files {
			if strings.HasSuffix(f, ".golden.json") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			recs[strings.TrimSuffix(strings.TrimSuffix(filepath.Base(f), ".sse"), ".json")] = b
		}
	}
	if len(recs) < 10 {
		t.Fatalf("only %d recordings in %s", len(recs), dir)
	}
	return recs
}

func isJSONRecording(rec []byte) bool { return bytes.HasPrefix(bytes.TrimSpace(rec), []byte("{")) }

// startAnthropicMock serves the mock's Messages API, requiring the
// upstream key as x-api-key.
func startAnthropicMock(t *testing.T, cfg mockllm.Config) (*mockllm.Server, string) {
	t.Helper()
	cfg.APIKey = anthropicKey
	if cfg.Recordings == nil {
		cfg.Recordings = anthropicRecordings(t)
	}
	return startMock(t, cfg)
}

// anthropicPolicy routes claude-* to the Anthropic upstream at anthURL
// and mock-1 to the OpenAI upstream at openaiURL (both without retries);
// extra is appended (plugins, store, ...).
func anthropicPolicy(anthURL, openaiURL, upstreamExtra, extra string) string {
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 64KiB
  drain_timeout: 2s
upstreams:
  - name: claude
    provider: anthropic
    base_url: %s/v1
    api_key_env: ANTHROPIC_API_KEY
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
%s
  - name: up
    base_url: %s/v1
    forward_headers: ["x-mock-*"]
routes:
  - models: ["claude-*"]
    upstream: claude
    retry: {attempts: 1}
  - models: ["mock-1"]
    upstream: up
    retry: {attempts: 1}
%s`, anthURL, upstreamExtra, openaiURL, extra)
}

var anthropicVars = map[string]string{"ANTHROPIC_API_KEY": anthropicKey}

// seenRequest is one request as the mock received it.
type seenRequest struct {
	h    http.Header
	body []byte
}

func recordRequests(m *mockllm.Server) chan seenRequest {
	ch := make(chan seenRequest, 64)
	m.SetOnRequest(func(h http.Header, b []byte) { ch <- seenRequest{h, b} })
	return ch
}

var createdRE = regexp.MustCompile(`"created":\d+`)

// translated is what the gateway should send for a recorded Anthropic
// stream: the anthropic package's translation, "created" blanked.
func translatedStream(t *testing.T, rec []byte, includeUsage bool) []byte {
	t.Helper()
	r := anthropic.NewStreamReader(0)
	r.Reset(bytes.NewReader(rec), "claude-x", "", 1, true) // the client sees its own model name
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("translating the recording: %v", err)
	}
	if !includeUsage { // the gateway keeps the usage chunk from a client that did not ask
		var kept []byte
		for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
			if !bytes.Contains(ev, []byte(`"choices":[],"usage":{`)) {
				kept = append(kept, ev...)
			}
		}
		out = kept
	}
	return createdRE.ReplaceAll(out, []byte(`"created":0`))
}

// TestAnthropicChatStreamRecordings sends every recorded stream through
// the gateway as a chat completion and compares the client's bytes with
// the translation: message_start, text and tool_use blocks with
// input_json_delta, thinking skipped, pings, message_delta with
// stop_reason and usage, message_stop, and the error event.
func TestAnthropicChatStreamRecordings(t *testing.T) {
	recs := anthropicRecordings(t)
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Recordings: recs})
	seen := recordRequests(mock)
	_, gw := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), anthropicVars)
	n := 0
	for name, rec := range recs {
		if isJSONRecording(rec) {
			continue
		}
		n++
		for _, includeUsage := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/include_usage=%v", name, includeUsage), func(t *testing.T) {
				body := `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`
				if includeUsage {
					body = `{"model":"claude-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
				}
				status, hdr, got := post(t, gw+"/v1/chat/completions", body, mockllm.HeaderRecording, name)
				<-seen
				if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("%d %s: %s", status, hdr.Get("Content-Type"), got)
				}
				want := translatedStream(t, rec, includeUsage)
				if got = createdRE.ReplaceAll(got, []byte(`"created":0`)); !bytes.Equal(got, want) {
					t.Errorf("client got:\n%s\nwant:\n%s", got, want)
				}
			})
		}
	}
	if n < 6 {
		t.Fatalf("%d stream recordings", n)
	}
}

func TestAnthropicChatNonStreamRecordings(t *testing.T) {
	recs := anthropicRecordings(t)
	_, anthURL := startAnthropicMock(t, mockllm.Config{Recordings: recs})
	_, gw := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), anthropicVars)
	for _, name := range []string{"response_text", "response_tool_use", "response_tool_only", "response_max_tokens"} {
		t.Run(name, func(t *testing.T) {
			status, _, got := post(t, gw+"/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`,
				mockllm.HeaderRecording, name)
			want, err := anthropic.AppendResponse(nil, recs[name], "claude-x", "", 1)
			if err != nil {
				t.Fatal(err)
			}
			want = createdRE.ReplaceAll(want, []byte(`"created":0`))
			if got = createdRE.ReplaceAll(got, []byte(`"created":0`)); status != 200 || !bytes.Equal(got, want) {
				t.Errorf("%d\n%s\nwant\n%s", status, got, want)
			}
		})
	}
}

// chatReply is the part of a chat.completion the tests read.
type chatReply struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// TestAnthropicChatTranslation checks what goes upstream (headers and the
// translated body, tool calls and results included) and what comes back,
// generated by the mock: text, tool calls, usage, finish reasons.
func TestAnthropicChatTranslation(t *testing.T) {
	const text = "Hello — from the mock's Messages API."
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 6})
	seen := recordRequests(mock)
	_, gw := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), anthropicVars)

	t.Run("request", func(t *testing.T) {
		body := `{"model":"claude-x","temperature":0.5,"stop":"END","user":"u-1",
			"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"weather?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"toolu_1","content":"sunny"}],
			"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],
			"tool_choice":"required"}`
		status, _, got := post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer client-key", "Anthropic-Version", "2099-01-01")
		if status != 200 {
			t.Fatalf("%d %s", status, got)
		}
		r := <-seen
		if r.h.Get("X-Api-Key") != anthropicKey || r.h.Get("Authorization") != "" || r.h.Get("Anthropic-Version") != anthropic.DefaultVersion {
			t.Errorf("upstream headers %v", r.h)
		}
		var up struct {
			Model         string   `json:"model"`
			MaxTokens     int      `json:"max_tokens"`
			System        string   `json:"system"`
			StopSequences []string `json:"stop_sequences"`
			Temperature   float64  `json:"temperature"`
			Metadata      struct {
				UserID string `json:"user_id"`
			} `json:"metadata"`
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Type, Text, ID, Name, ToolUseID string
					Input                           map[string]string
					ToolUseID2                      string `json:"tool_use_id"`
				} `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"input_schema"`
			} `json:"tools"`
			ToolChoice struct{ Type string } `json:"tool_choice"`
		}
		if err := json.Unmarshal(r.body, &up); err != nil {
			t.Fatalf("%v: %s", err, r.body)
		}
		if up.Model != "claude-x" || up.MaxTokens != anthropic.DefaultMaxTokens || up.System != "Be brief." || len(up.StopSequences) != 1 ||
			up.StopSequences[0] != "END" || up.Temperature != 0.5 || up.Metadata.UserID != "u-1" || len(up.Tools) != 1 ||
			up.Tools[0].InputSchema["type"] != "object" || up.ToolChoice.Type != "any" || len(up.Messages) != 3 {
			t.Fatalf("upstream body %s", r.body)
		}
		m := up.Messages
		if m[1].Role != "assistant" || m[1].Content[0].Type != "tool_use" || m[1].Content[0].Input["city"] != "Paris" ||
			m[2].Role != "user" || m[2].Content[0].Type != "tool_result" || m[2].Content[0].ToolUseID2 != "toolu_1" {
			t.Errorf("tool turns %s", r.body)
		}
	})
	t.Run("configured version", func(t *testing.T) {
		_, gw2 := startGateway(t, anthropicPolicy(anthURL, anthURL, "    anthropic_version: \"2024-10-22\"", ""), anthropicVars)
		post(t, gw2+"/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`)
		if r := <-seen; r.h.Get("Anthropic-Version") != "2024-10-22" {
			t.Errorf("anthropic-version %q", r.h.Get("Anthropic-Version"))
		}
	})
	t.Run("non-streamed text and usage", func(t *testing.T) {
		status, _, got := post(t, gw+"/v1/chat/completions", `{"model":"claude-x","max_tokens":100,"messages":[{"role":"user","content":"Hello there, mock"}]}`)
		<-seen
		var c chatReply
		if err := json.Unmarshal(got, &c); err != nil || status != 200 {
			t.Fatalf("%d %s", status, got)
		}
		if c.Object != "chat.completion" || c.Model != "claude-x" || *c.Choices[0].Message.Content != text || c.Choices[0].FinishReason != "stop" ||
			c.Usage == nil || c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens != 7 || c.Usage.TotalTokens != 11 {
			t.Errorf("reply %s", got)
		}
	})
	t.Run("max_tokens reached", func(t *testing.T) {
		_, _, got := post(t, gw+"/v1/chat/completions", `{"model":"claude-x","max_completion_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
		if r := <-seen; !bytes.Contains(r.body, []byte(`"max_tokens":2`)) {
			t.Errorf("upstream body %s", r.body)
		}
		var c chatReply
		if json.Unmarshal(got, &c); len(c.Choices) != 1 || c.Choices[0].FinishReason != "length" || *c.Choices[0].Message.Content != text[:12] {
			t.Errorf("reply %s", got)
		}
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("tool call, stream=%v", stream), func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"claude-x","stream":%v,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"mock_tool"}}]}`, stream)
			status, _, got := post(t, gw+"/v1/chat/completions", body, mockllm.HeaderToolCallAt, "6", mockllm.HeaderToolCallArgs, `{"q":,1}`)
			<-seen
			if status != 200 {
				t.Fatalf("%d %s", status, got)
			}
			var content, id, name, args, finish string
			if !stream {
				var c chatReply
				if err := json.Unmarshal(got, &c); err != nil {
					t.Fatal(err)
				}
				m := c.Choices[0].Message
				content, finish = *m.Content, c.Choices[0].FinishReason
				if len(m.ToolCalls) == 1 && m.ToolCalls[0].Type == "function" {
					id, name, args = m.ToolCalls[0].ID, m.ToolCalls[0].Function.Name, m.ToolCalls[0].Function.Arguments
				}
			} else {
				for _, ev := range chunksOf(t, got) {
					content += ev.content
					for _, tc := range ev.calls {
						if tc.ID != "" {
							id, name = tc.ID, tc.Function.Name
						}
						args += tc.Function.Arguments
					}
					if ev.finish != "" {
						finish = ev.finish
					}
				}
			}
			if content != text || id != "toolu_mock" || name != "mock_tool" || args != `{"q":1}` || finish != "tool_calls" {
				t.Errorf("content %q tool %q %q %q finish %q\n%s", content, id, name, args, finish, got)
			}
		})
	}
}

type chunkEvent struct {
	content, finish string
	calls           []struct {
		Index    int    `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	usage *struct{ PromptTokens, CompletionTokens int }
	err   string
}

// chunksOf parses an OpenAI SSE body (every data event but [DONE]).
func chunksOf(t *testing.T, body []byte) []chunkEvent {
	t.Helper()
	var out []chunkEvent
	for _, ev := range strings.SplitAfter(string(body), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string                     `json:"content"`
					ToolCalls []json.RawMessage          `json:"tool_calls"`
					Extra     map[string]json.RawMessage `json:"-"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct{ Message, Type string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		var e chunkEvent
		if c.Error != nil {
			e.err = c.Error.Type + ": " + c.Error.Message
		}
		if c.Usage != nil {
			e.usage = &struct{ PromptTokens, CompletionTokens int }{c.Usage.PromptTokens, c.Usage.CompletionTokens}
		}
		if len(c.Choices) > 0 {
			e.content, e.finish = c.Choices[0].Delta.Content, c.Choices[0].FinishReason
			for _, raw := range c.Choices[0].Delta.ToolCalls {
				var tc struct {
					Index    int    `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				}
				json.Unmarshal(raw, &tc)
				e.calls = append(e.calls, tc)
			}
		}
		out = append(out, e)
	}
	return out
}

// TestAnthropicChatErrors: upstream errors become OpenAI errors with the
// status an OpenAI client expects; requests the translation refuses never
// reach the upstream.
func TestAnthropicChatErrors(t *testing.T) {
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: "x"})
	seen := recordRequests(mock)
	_, gw := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), anthropicVars)
	chat := `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`
	chatStream := `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, body string
		hdr        []string
		status     int
		typ, code  string
		retryAfter bool
		noUpstream bool
	}{
		{"invalid request", chat, []string{mockllm.HeaderFailStatus, "400"}, 400, "invalid_request_error", "", false, false},
		{"rate limited", chat, []string{mockllm.HeaderFailStatus, "429"}, 429, "rate_limit_error", "rate_limit_exceeded", true, false},
		{"api error", chat, []string{mockllm.HeaderFailStatus, "500"}, 500, "server_error", "", false, false},
		{"overloaded, streamed request", chatStream, []string{mockllm.HeaderFailStatus, "529"}, 503, "server_error", "overloaded", true, false},
		{"n > 1 refused", `{"model":"claude-x","n":2,"messages":[{"role":"user","content":"hi"}]}`, nil, 400, "invalid_request_error", "", false, true},
		{"completions endpoint", `{"model":"claude-x","prompt":"hi"}`, nil, 400, "invalid_request_error", "unsupported_endpoint", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/chat/completions"
			if strings.Contains(tt.body, `"prompt"`) {
				path = "/v1/completions"
			}
			status, hdr, body := post(t, gw+path, tt.body, tt.hdr...)
			e := decodeError(t, body)
			code := ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if status != tt.status || e.Error.Type != tt.typ || code != tt.code || e.Error.Message == "" || (hdr.Get("Retry-After") != "") != tt.retryAfter {
				t.Errorf("%d %v %s", status, hdr, body)
			}
			select {
			case <-seen:
				if tt.noUpstream {
					t.Error("a refused request reached the upstream")
				}
			case <-time.After(100 * time.Millisecond):
				if !tt.noUpstream {
					t.Error("the request did not reach the upstream")
				}
			}
		})
	}
	t.Run("wrong upstream key", func(t *testing.T) {
		_, gw2 := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), map[string]string{"ANTHROPIC_API_KEY": "wrong"})
		status, _, body := post(t, gw2+"/v1/chat/completions", chat)
		<-seen
		if e := decodeError(t, body); status != 401 || e.Error.Code == nil || *e.Error.Code != "invalid_api_key" {
			t.Errorf("%d %s", status, body)
		}
	})
	t.Run("stream cut by the upstream", func(t *testing.T) {
		status, _, body := post(t, gw+"/v1/chat/completions", chatStream, mockllm.HeaderCutAfter, "3")
		<-seen
		evs := chunksOf(t, body)
		if status != 200 || len(evs) == 0 || !strings.HasPrefix(evs[len(evs)-1].err, "upstream_error") || bytes.Contains(body, []byte("[DONE]")) {
			t.Errorf("%d %s", status, body)
		}
	})
}

// anthropicEvent is one event of a Messages API stream as a client reads it.
type anthropicEvent struct {
	name    string
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message *struct {
		ID    string `json:"id"`
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	} `json:"message"`
	ContentBlock *struct {
		Type, Text, ID, Name string
	} `json:"content_block"`
	Delta *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error *struct{ Type, Message string } `json:"error"`
}

// anthropicStream is a Messages API stream read and checked as Anthropic
// defines it: message_start first; content blocks started at indexes 0,
// 1, 2, ... in order, each receiving only deltas of its own type and
// stopped before the next starts; one message_delta once every block is
// stopped; message_stop last. An error event may end it anywhere. Pings,
// comments and unknown events may come anywhere.
type anthropicStream struct {
	events     []anthropicEvent
	text       string // the text deltas of every text block
	toolInput  string // the input_json of every tool_use block
	tools      []string
	stopReason string
	output     int
	errType    string
	complete   bool // message_stop came
}

func readAnthropicStream(t *testing.T, body []byte) anthropicStream {
	t.Helper()
	var s anthropicStream
	started, open, next, ended := false, -1, 0, false
	var openType string
	bad := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("invalid Messages API stream: "+format+"\n%s", append(args, body)...)
	}
	for _, raw := range strings.SplitAfter(string(body), "\n\n") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		var name, data string
		for _, line := range strings.Split(raw, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = v
			}
		}
		if data == "" {
			continue // a comment
		}
		var ev anthropicEvent
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			bad("event %q: %v", raw, err)
		}
		ev.name = name
		if name != ev.Type {
			bad("event name %q, type %q", name, ev.Type)
		}
		if s.complete || s.errType != "" {
			bad("%s after the end", ev.Type)
		}
		s.events = append(s.events, ev)
		if ev.Type != "message_start" && ev.Type != "ping" && ev.Type != "error" && !started {
			bad("%s before message_start", ev.Type)
		}
		switch ev.Type {
		case "ping":
		case "message_start":
			if started {
				bad("second message_start")
			}
			started = true
		case "content_block_start":
			if open >= 0 || ended || ev.Index != next {
				bad("content_block_start %d (open %d, next %d, ended %v)", ev.Index, open, next, ended)
			}
			open, next, openType = ev.Index, next+1, ev.ContentBlock.Type
			if openType == "tool_use" {
				s.tools = append(s.tools, ev.ContentBlock.ID+" "+ev.ContentBlock.Name)
			}
			s.text += ev.ContentBlock.Text
		case "content_block_delta":
			if ev.Index != open {
				bad("delta for block %d, open %d", ev.Index, open)
			}
			switch ev.Delta.Type {
			case "text_delta":
				if openType != "text" {
					bad("text_delta in a %s block", openType)
				}
				s.text += ev.Delta.Text
			case "input_json_delta":
				if openType != "tool_use" {
					bad("input_json_delta in a %s block", openType)
				}
				s.toolInput += ev.Delta.PartialJSON
			}
		case "content_block_stop":
			if ev.Index != open {
				bad("stop of block %d, open %d", ev.Index, open)
			}
			open = -1
		case "message_delta":
			if open >= 0 || ended {
				bad("message_delta with block %d open or twice", open)
			}
			ended = true
			if ev.Delta.StopReason != nil {
				s.stopReason = *ev.Delta.StopReason
			}
			s.output = ev.Usage.OutputTokens
		case "message_stop":
			if !ended {
				bad("message_stop without message_delta")
			}
			s.complete = true
		case "error":
			s.errType = ev.Error.Type
		default: // events a later API version adds are ignored
		}
	}
	return s
}

// TestAnthropicMessagesPassThrough: POST /v1/messages to an Anthropic
// upstream, streamed and not: the client gets the upstream's bytes; the
// upstream gets the client's body, version and beta headers, and the
// gateway's own key.
func TestAnthropicMessagesPassThrough(t *testing.T) {
	recs := anthropicRecordings(t)
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Recordings: recs, Text: "Hi from Claude."})
	seen := recordRequests(mock)
	_, openaiURL := startMock(t, mockllm.Config{Tokens: 2})
	_, gw := startGateway(t, anthropicPolicy(anthURL, openaiURL, "", ""), anthropicVars)
	msgs := func(stream bool) string {
		return fmt.Sprintf(`{"model":"claude-x","max_tokens":50,"stream":%v,"messages":[{"role":"user","content":"Hello"}]}`, stream)
	}
	for name, rec := range recs {
		stream := !isJSONRecording(rec)
		if !stream && name == "response_error" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			status, hdr, got := post(t, gw+"/v1/messages", msgs(stream), mockllm.HeaderRecording, name, "X-Api-Key", "tg-client-key")
			r := <-seen
			if status != 200 || !bytes.Equal(got, rec) {
				t.Errorf("%d %s: the client got\n%s\nwant the upstream's bytes\n%s", status, hdr.Get("Content-Type"), got, rec)
			}
			if string(r.body) != msgs(stream) {
				t.Errorf("upstream body %s", r.body)
			}
			if stream {
				readAnthropicStream(t, got)
			}
		})
	}
	t.Run("headers", func(t *testing.T) {
		post(t, gw+"/v1/messages", msgs(false), "X-Api-Key", "tg-client-key", "Anthropic-Version", "2024-10-22", "Anthropic-Beta", "tools-2024-04-04")
		r := <-seen
		if r.h.Get("X-Api-Key") != anthropicKey || r.h.Get("Anthropic-Version") != "2024-10-22" || r.h.Get("Anthropic-Beta") != "tools-2024-04-04" ||
			r.h.Get("Authorization") != "" || len(r.h.Values("X-Api-Key")) != 1 {
			t.Errorf("upstream headers %v", r.h)
		}
		post(t, gw+"/v1/messages", msgs(true), "Authorization", "Bearer tg-client-key")
		r = <-seen
		if r.h.Get("X-Api-Key") != anthropicKey || r.h.Get("Anthropic-Version") != anthropic.DefaultVersion || r.h.Get("Anthropic-Beta") != "" || r.h.Get("Authorization") != "" {
			t.Errorf("upstream headers %v", r.h)
		}
	})
	t.Run("generated stream", func(t *testing.T) {
		status, _, got := post(t, gw+"/v1/messages", msgs(true), mockllm.HeaderToolCallAt, "3", mockllm.HeaderToolCallArgs, `{"a":,1}`)
		<-seen
		s := readAnthropicStream(t, got)
		if status != 200 || s.text != "Hi from Claude." || s.toolInput != `{"a":1}` || s.stopReason != "tool_use" || !s.complete || len(s.tools) != 1 {
			t.Errorf("%d %+v", status, s)
		}
	})
	t.Run("upstream errors pass as sent", func(t *testing.T) {
		status, hdr, got := post(t, gw+"/v1/messages", msgs(true), mockllm.HeaderFailStatus, "529")
		<-seen
		if status != 529 || hdr.Get("Retry-After") == "" || !bytes.Contains(got, []byte(`{"type":"error","error":{"type":"overloaded_error"`)) {
			t.Errorf("%d %v %s", status, hdr, got)
		}
	})
	t.Run("gateway errors in Anthropic's format", func(t *testing.T) {
		for _, tc := range []struct {
			name, body, typ string
			status          int
		}{
			{"unknown model", `{"model":"gpt-x","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "not_found_error", 404},
			{"model on an OpenAI upstream", `{"model":"mock-1","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "not_found_error", 404},
			{"invalid JSON", `{"model":`, "invalid_request_error", 400},
			{"no messages", `{"model":"claude-x","max_tokens":5}`, "invalid_request_error", 400},
		} {
			status, hdr, got := post(t, gw+"/v1/messages", tc.body)
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(got, &e); err != nil || status != tc.status || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message == "" ||
				!strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
				t.Errorf("%s: %d %s", tc.name, status, got)
			}
		}
		select {
		case r := <-seen:
			t.Errorf("a refused request reached the upstream: %s", r.body)
		default:
		}
	})
}

// anthropicTenantPolicy adds a memory-store tenant (key "tg-anthropic")
// with preflight, ratelimit (generous TPM) and the plugins given.
func anthropicTenantPolicy(t *testing.T, base string, plugins string) string {
	return base + fmt.Sprintf(`
store:
  kind: memory
tenants:
  plans:
    - {id: metered, rpm: 1000, tpm: 1000000}
  tenants:
    - id: acme
      plan: metered
      keys:
        - {id: k-1, key_sha256: %s}
plugins:
  - name: preflight
    path: %s
  - name: ratelimit
    path: %s
%s`, sha("tg-anthropic"), pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), plugins)
}

// startLoggingGateway runs the policy with the access log on and returns
// the gateway's URL and log.
func startLoggingGateway(t *testing.T, pol string, vars map[string]string) (string, *lockedBuffer) {
	t.Helper()
	pol = strings.Replace(pol, "server:\n", "server:\n  access_log: true\n", 1)
	p, err := config.Parse([]byte(pol), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return "http://" + ln.Addr().String(), logs
}

var accessLine = regexp.MustCompile(`msg=request request_id=(\S+) tenant=(\S*) .*endpoint=(\S+) .*status=(\d+) .*prompt_tokens=(\d+) completion_tokens=(\d+)`)

// accessLog waits for the access log line of request id and returns its
// endpoint, status and token counts.
func accessLog(t *testing.T, logs *lockedBuffer, id string) (tenant, endpoint string, status, prompt, completion int) {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, m := range accessLine.FindAllStringSubmatch(logs.String(), -1) {
			if m[1] == id {
				fmt.Sscan(m[4], &status)
				fmt.Sscan(m[5], &prompt)
				fmt.Sscan(m[6], &completion)
				return m[2], m[3], status, prompt, completion
			}
		}
	}
	t.Fatalf("no access log line for %s", id)
	return
}

// TestAnthropicUsageSettled: the usage the upstream reports, streamed or
// not, translated or native, is what the call log records and what the
// rate limiter settles; the client's gateway key (Bearer or x-api-key)
// is resolved by preflight and never forwarded.
func TestAnthropicUsageSettled(t *testing.T) {
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: "Twelve bytes of text, more or less.", ChunkSize: 5})
	seen := recordRequests(mock)
	gw, logs := startLoggingGateway(t, anthropicTenantPolicy(t, anthropicPolicy(anthURL, anthURL, "", ""), ""), anthropicVars)
	for i, tc := range []struct {
		path, body string
		hdr        []string
	}{
		{"/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"Hello there, mock"}]}`, []string{"Authorization", "Bearer tg-anthropic"}},
		{"/v1/chat/completions", `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"Hello there, mock"}]}`, []string{"Authorization", "Bearer tg-anthropic"}},
		{"/v1/messages", `{"model":"claude-x","max_tokens":99,"messages":[{"role":"user","content":"Hello there, mock"}]}`, []string{"X-Api-Key", "tg-anthropic"}},
		{"/v1/messages", `{"model":"claude-x","max_tokens":99,"stream":true,"messages":[{"role":"user","content":"Hello there, mock"}]}`, []string{"X-Api-Key", "tg-anthropic"}},
		{"/v1/messages", `{"model":"claude-x","max_tokens":99,"stream":true,"messages":[{"role":"user","content":"Hello there, mock"}]}`, []string{"Authorization", "Bearer tg-anthropic"}},
	} {
		id := fmt.Sprintf("anth-usage-%d", i)
		status, hdr, body := post(t, gw+tc.path, tc.body, append(tc.hdr, "X-Request-Id", id)...)
		if status != 200 {
			t.Fatalf("%s: %d %s", id, status, body)
		}
		r := <-seen
		if r.h.Get("X-Api-Key") != anthropicKey || r.h.Get("Authorization") != "" || bytes.Contains(r.body, []byte("tg-anthropic")) {
			t.Errorf("%s: upstream headers %v", id, r.h)
		}
		tenant, endpoint, st, prompt, completion := accessLog(t, logs, id)
		// The mock reports 4 input tokens ("Hello there, mock") and 7
		// output tokens (its 35-byte text in 5-byte events).
		if tenant != "acme" || endpoint != tc.path || st != 200 || prompt != 4 || completion != 7 {
			t.Errorf("%s: access log tenant %s endpoint %s status %d tokens %d+%d, want acme %s 200 4+7", id, tenant, endpoint, st, prompt, completion, tc.path)
		}
		_ = hdr
	}
	t.Run("a wrong key is refused in Anthropic's format", func(t *testing.T) {
		status, _, body := post(t, gw+"/v1/messages", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "X-Api-Key", "nope")
		if status != 401 || !bytes.HasPrefix(body, []byte(`{"type":"error","error":{"type":"authentication_error"`)) {
			t.Errorf("%d %s", status, body)
		}
	})
}

// TestAnthropicBudgetLedger: the budget settles, and the Postgres call log
// records, the tokens the Anthropic upstream reported, for translated and
// native requests, streamed and not.
func TestAnthropicBudgetLedger(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 1_000_000)
	if err := w.store.SetPrice(context.Background(), tenant.Price{Model: "claude-x", InputMicrosPerMTok: inputMicrosPerMTok,
		OutputMicrosPerMTok: outputMicrosPerMTok, EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{Text: "Twelve bytes of text, more or less.", ChunkSize: 5})
	pol := anthropicPolicy(anthURL, anthURL, "", "") + fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%q], timeout: 500ms}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - name: preflight
    path: %s
  - name: budget
    path: %s
`, w.redis.Addr(), pluginPath(t, "preflight"), pluginPath(t, "budget"))
	_, gw := startGateway(t, pol, map[string]string{"ANTHROPIC_API_KEY": anthropicKey, "TOLLGATE_DATABASE_URL": w.dsn, "TG_TEST_SPOOL": t.TempDir()})
	reqs := []struct{ id, path, body, keyHeader string }{
		{"led-chat", "/v1/chat/completions", `{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":"Hello there, mock"}]}`, "Authorization"},
		{"led-chat-stream", "/v1/chat/completions", `{"model":"claude-x","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Hello there, mock"}]}`, "Authorization"},
		{"led-native", "/v1/messages", `{"model":"claude-x","max_tokens":50,"messages":[{"role":"user","content":"Hello there, mock"}]}`, "X-Api-Key"},
		{"led-native-stream", "/v1/messages", `{"model":"claude-x","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"Hello there, mock"}]}`, "X-Api-Key"},
	}
	for _, r := range reqs {
		key := w.key
		if r.keyHeader == "Authorization" {
			key = "Bearer " + key
		}
		if status, _, body := post(t, gw+r.path, r.body, r.keyHeader, key, "X-Request-Id", r.id); status != 200 {
			t.Fatalf("%s: %d %s", r.id, status, body)
		}
	}
	w.waitRows(t, int64(len(reqs)))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// 4 prompt tokens at 1 µ$, 7 completion tokens at 10 µ$.
	const cost = 4*inputMicrosPerMTok/1_000_000 + 7*outputMicrosPerMTok/1_000_000
	for _, r := range reqs {
		var prompt, completion, micros int64
		var upstream string
		if err := conn.QueryRow(ctx, `SELECT prompt_tokens, completion_tokens, cost_micros, upstream FROM call_log WHERE request_id = $1`, r.id).
			Scan(&prompt, &completion, &micros, &upstream); err != nil {
			t.Fatalf("%s: %v", r.id, err)
		}
		if prompt != 4 || completion != 7 || micros != cost || upstream != "claude" {
			t.Errorf("%s: call_log %d+%d tokens, %d µ$, upstream %q; want 4+7, %d µ$, claude", r.id, prompt, completion, micros, upstream, cost)
		}
	}
	spent, holds := w.counter(t)
	if spent != fmt.Sprint(len(reqs)*cost) || (holds != "0" && holds != "") {
		t.Errorf("budget counter spent %s, held %s; want %d spent, nothing held", spent, holds, len(reqs)*cost)
	}
}
