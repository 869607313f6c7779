package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// Chunk plugins see an Anthropic upstream's replies as OpenAI chunks,
// translated (chat completions) or read beside the pass-through
// (POST /v1/messages); what they change keeps each endpoint's format.

// anthropicPluginGateway runs the test plugin with chunkConfig (and the
// usage probe) in front of the Anthropic mock.
func anthropicPluginGateway(t *testing.T, anthURL, plugins string) (string, *lockedBuffer) {
	t.Helper()
	probe, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback/testdata/usageprobe")
	if err != nil {
		t.Fatal(err)
	}
	pol := anthropicPolicy(anthURL, anthURL, "", "") + "plugins:\n" + plugins + fmt.Sprintf("  - name: probe\n    path: %s\n", probe)
	return startLoggingGateway(t, pol, anthropicVars)
}

func testPlugin(t *testing.T, onError, config string) string {
	return fmt.Sprintf("  - name: t0\n    path: %s\n    on_error: %s\n    limits: {deadline: 200ms}\n    config: %s\n", testPluginPath(t), onError, config)
}

// sentBytes is what the gateway counted as text sent for request id.
func sentBytes(t *testing.T, logs *lockedBuffer, id string) int {
	g := &hbGateway{logs: logs}
	sent, _, _ := g.probe(t, id)
	return sent
}

func chatText(t *testing.T, body []byte) (text, finish string, done bool) {
	for _, ev := range chunksOf(t, body) {
		text += ev.content
		if ev.finish != "" {
			finish = ev.finish
		}
	}
	return text, finish, strings.Contains(string(body), "data: [DONE]")
}

// TestAnthropicPluginsSeeSameChunks: a plugin that writes out what it sees
// (the text upper-cased; the tool-call deltas as "INDEX|NAME|ARGUMENTS;")
// produces the same text through both endpoints for the same recording.
func TestAnthropicPluginsSeeSameChunks(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	for _, tc := range []struct {
		config, recording, want string
	}{
		{`{"chunk":"replace_upper"}`, "text_then_tool", "OKAY, LET ME CHECK THE WEATHER FOR SAN FRANCISCO."},
		{`{"chunk":"replace_upper"}`, "thinking_then_text", ""},
		{`{"chunk":"replace_tool_calls"}`, "tool_use", "0|get_weather|;0||{\"location\":;0|| \"San Fra;0||ncisc;0||o, CA\";0||, \"unit\": \"fah;0||renheit\"};" +
			"1|get_time|;1||{\"timezone\": \"America/Los_Angeles\"};2|list_cities|;2||{};"},
	} {
		t.Run(tc.recording+" "+tc.config, func(t *testing.T) {
			gw, logs := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", tc.config))
			_, _, chat := post(t, gw+"/v1/chat/completions", `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				mockllm.HeaderRecording, tc.recording, "X-Request-Id", "chat")
			chatGot, _, done := chatText(t, chat)
			_, _, native := post(t, gw+"/v1/messages", `{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
				mockllm.HeaderRecording, tc.recording, "X-Request-Id", "native")
			s := readAnthropicStream(t, native)
			if tc.want != "" && chatGot != tc.want {
				t.Errorf("chat text %q, want %q", chatGot, tc.want)
			}
			if s.text != chatGot || !done || !s.complete {
				t.Errorf("native text %q, chat text %q (done %v, complete %v)\n%s", s.text, chatGot, done, s.complete, native)
			}
			if a, b := sentBytes(t, logs, "chat"), sentBytes(t, logs, "native"); a != len(chatGot) || b != len(s.text) {
				t.Errorf("counted %d and %d text bytes sent, clients got %d and %d", a, b, len(chatGot), len(s.text))
			}
		})
	}
	t.Run("the recording's text when plugins continue", func(t *testing.T) {
		gw, _ := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"continue"}`))
		_, _, native := post(t, gw+"/v1/messages", `{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			mockllm.HeaderRecording, "text_then_tool")
		recs := anthropicRecordings(t)
		if string(native) != string(recs["text_then_tool"]) {
			t.Errorf("a native stream plugins let pass changed:\n%s", native)
		}
	})
}

// TestAnthropicPluginsNative: holding, stopping, failing and replacing a
// whole reply on POST /v1/messages.
func TestAnthropicPluginsNative(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	const text = "The quick brown fox jumps over the lazy dog."
	_, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 5})
	msgs := func(stream bool) string {
		return fmt.Sprintf(`{"model":"claude-x","max_tokens":99,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
	}
	t.Run("hold everything, released at the end", func(t *testing.T) {
		gw, logs := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"hold"}`))
		_, _, body := post(t, gw+"/v1/messages", msgs(true), "X-Request-Id", "hold", mockllm.HeaderToolCallAt, "10")
		s := readAnthropicStream(t, body)
		if s.text != text || !s.complete || s.stopReason != "tool_use" || len(s.tools) != 1 || sentBytes(t, logs, "hold") != len(text) {
			t.Errorf("%+v", s)
		}
	})
	t.Run("stop mid-stream", func(t *testing.T) {
		gw, logs := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"stop:[withheld]","finish_reason":"content_filter"}`))
		_, _, body := post(t, gw+"/v1/messages", msgs(true), "X-Request-Id", "stop", mockllm.HeaderInterToken, "5ms")
		s := readAnthropicStream(t, body)
		// The plugin stops at the first event it sees: message_start.
		if s.text != "[withheld]" || !s.complete || s.stopReason != "refusal" || sentBytes(t, logs, "stop") != len("[withheld]") {
			t.Errorf("%+v\n%s", s, body)
		}
	})
	t.Run("a trap mid-stream ends it with an error event", func(t *testing.T) {
		gw, _ := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"trap"}`))
		_, _, body := post(t, gw+"/v1/messages", msgs(true))
		if s := readAnthropicStream(t, body); s.errType != "api_error" || s.complete {
			t.Errorf("%+v\n%s", s, body)
		}
	})
	t.Run("whole reply replaced", func(t *testing.T) {
		gw, _ := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"replace_upper"}`))
		status, _, body := post(t, gw+"/v1/messages", msgs(false), mockllm.HeaderToolCallAt, "10")
		var m struct {
			Type    string `json:"type"`
			Content []struct {
				Type, Text, Name string
			} `json:"content"`
			StopReason string `json:"stop_reason"`
			Usage      struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &m); err != nil || status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		if m.Type != "message" || len(m.Content) != 2 || m.Content[0].Text != strings.ToUpper(text) || m.Content[1].Name != "mock_tool" ||
			m.StopReason != "tool_use" || m.Usage.OutputTokens == 0 {
			t.Errorf("reply %s", body)
		}
	})
	t.Run("whole reply stopped", func(t *testing.T) {
		gw, _ := anthropicPluginGateway(t, anthURL, testPlugin(t, "fail_closed", `{"chunk":"stop:[withheld]","finish_reason":"content_filter"}`))
		_, _, body := post(t, gw+"/v1/messages", msgs(false))
		if !strings.Contains(string(body), `"content":[{"type":"text","text":"[withheld]"}]`) || !strings.Contains(string(body), `"stop_reason":"refusal"`) {
			t.Errorf("reply %s", body)
		}
	})
}

// TestAnthropicHoldback runs the holdback guard on both endpoints: a
// marker split across text deltas stops the reply with the correction; a
// URL without the marker passes whole, the tail the guard held until the
// end of the text block included.
func TestAnthropicHoldback(t *testing.T) {
	root := repoRoot(t)
	guard, err := wasmbuild.Cached(root + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	gw, logs := anthropicPluginGateway(t, anthURL, fmt.Sprintf("  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n", guard, hbConfig))
	markerAt := strings.Index(hbText, hbMarker)
	clean := strings.ReplaceAll(hbText, hbMarker, "example.com")
	for _, tc := range []struct {
		name, text, want, finish string
		cuts                     []int
		toolAt                   int
	}{
		{"marker split", hbText, hbText[:markerAt] + hbCorrection, "refusal", []int{markerAt + 3, markerAt + 9}, 0},
		{"clean URL", clean, clean, "end_turn", []int{10, 30, len(clean) - 3}, 0},
		{"clean URL then a tool call", clean, clean, "tool_use", []int{10, len(clean) - 2}, len(clean)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{mockllm.HeaderText, url.QueryEscape(tc.text), mockllm.HeaderSplit, hbSplit(tc.cuts...)}
			if tc.toolAt > 0 {
				hdr = append(hdr, mockllm.HeaderToolCallAt, fmt.Sprint(tc.toolAt))
			}
			id := "hb-native-" + strings.ReplaceAll(tc.name, " ", "-")
			_, _, body := post(t, gw+"/v1/messages", `{"model":"claude-x","max_tokens":99,"stream":true,"messages":[{"role":"user","content":"draw"}]}`,
				append(hdr, "X-Request-Id", id)...)
			s := readAnthropicStream(t, body)
			if s.text != tc.want || s.stopReason != tc.finish || !s.complete {
				t.Errorf("text %q stop %q complete %v, want %q %q\n%s", s.text, s.stopReason, s.complete, tc.want, tc.finish, body)
			}
			if sent := sentBytes(t, logs, id); sent != len(tc.want) {
				t.Errorf("counted %d text bytes sent, the client got %d", sent, len(tc.want))
			}
			_, _, chat := post(t, gw+"/v1/chat/completions", `{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"draw"}]}`, hdr...)
			chatGot, finish, done := chatText(t, chat)
			wantFinish := map[string]string{"refusal": "content_filter", "end_turn": "stop", "tool_use": "tool_calls"}[tc.finish]
			if chatGot != tc.want || finish != wantFinish || !done {
				t.Errorf("chat: text %q finish %q done %v", chatGot, finish, done)
			}
		})
	}
}
