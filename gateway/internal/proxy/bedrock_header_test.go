package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The Converse body is JSON the gateway wrote, so a Bedrock upstream is
// told so whatever Content-Type the client sent (curl's default form
// type, none, or JSON), exactly once: AWS's JSON protocols refuse a body
// they are told is something else.
func TestBedrockContentType(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	got := make(chan []string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Values("Content-Type")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":1,"totalTokens":2}}`)
	}))
	t.Cleanup(up.Close)
	g := startTestGateway(t, routingPolicy(`
  - name: b
    provider: bedrock
    bedrock: {region: eu-west-3}
    base_url: `+up.URL+`
    forward_headers: ["content-*"]
`, `- {models: [m], upstream: b}`))
	for _, ct := range []string{"application/x-www-form-urlencoded", "", "text/plain", "application/json"} {
		req, err := http.NewRequest("POST", g.url+"/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
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
}
