package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A translated body is JSON the gateway wrote (or, on the native Messages
// endpoint, read as JSON), so a translating upstream is told so whatever
// Content-Type the client sent (curl's default form type, none, or JSON),
// exactly once: AWS's JSON protocols, Google's and Anthropic's APIs refuse
// a body they are told is something else.
func TestTranslatedContentType(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, upstream, path, body, reply string
	}{
		{"bedrock", "provider: bedrock\n    bedrock: {region: eu-west-3}", "/v1/chat/completions", chat,
			`{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`},
		{"gemini", "provider: gemini", "/v1/chat/completions", chat,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1,"totalTokenCount":2}}`},
		{"anthropic chat", "provider: anthropic", "/v1/chat/completions", chat, anthropicReply},
		{"anthropic native", "provider: anthropic", "/v1/messages",
			`{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, anthropicReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan []string, 1)
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got <- r.Header.Values("Content-Type")
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, tc.reply)
			}))
			t.Cleanup(up.Close)
			g := startTestGateway(t, routingPolicy(`
  - name: u
    `+tc.upstream+`
    base_url: `+up.URL+`
    forward_headers: ["content-*"]
`, `- {models: [m], upstream: u}`))
			for _, ct := range []string{"application/x-www-form-urlencoded", "", "text/plain", "application/json"} {
				req, err := http.NewRequest("POST", g.url+tc.path, strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				if ct != "" {
					req.Header.Set("Content-Type", ct)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("client Content-Type %q: status %d: %s", ct, resp.StatusCode, b)
				}
				if h := <-got; len(h) != 1 || h[0] != "application/json" {
					t.Errorf("client Content-Type %q: upstream got Content-Type %q, want [application/json]", ct, h)
				}
			}
		})
	}
}

const anthropicReply = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
