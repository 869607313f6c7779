package provider

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/googleauth"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func TestGeminiAdapter(t *testing.T) {
	vertex := &config.Vertex{Project: "proj-1", Location: "us-central1"}
	tests := []struct {
		name   string
		up     config.Upstream
		model  string
		stream bool
		path   string
	}{
		{"gemini", config.Upstream{Name: "g", Provider: config.ProviderGemini}, "gemini-2.0-flash", false,
			"/models/gemini-2.0-flash:generateContent"},
		{"gemini stream, models/ prefix", config.Upstream{Name: "g", Provider: config.ProviderGemini}, "models/gemini-2.0-flash", true,
			"/models/gemini-2.0-flash:streamGenerateContent?alt=sse"},
		{"gemini escaped", config.Upstream{Name: "g", Provider: config.ProviderGemini}, "a b/c:d", false,
			"/models/a%20b%2Fc%3Ad:generateContent"},
		{"vertex", config.Upstream{Name: "v", Provider: config.ProviderVertex, Vertex: vertex}, "gemini-2.5-pro", true,
			"/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
	}
	body := []byte(`{"model":"x","messages":[{"role":"user","content":"hi"}]}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Bind(&tt.up)
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Options) != 1 {
				t.Fatalf("%d options, want the key header or the authorizer", len(b.Options))
			}
			g := b.Adapter.(*Gemini)
			if !g.Serves(openai.ChatCompletions) || g.Serves(openai.Embeddings) || g.Serves(openai.Completions) {
				t.Error("Serves")
			}
			var out Outbound
			if err := g.Request(&out, openai.ChatCompletions, tt.model, tt.stream, body); err != nil {
				t.Fatal(err)
			}
			if string(out.Path) != tt.path || string(out.Header) != jsonContentType || string(out.Body) != `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}` {
				t.Errorf("outbound path %q header %q body %s", out.Path, out.Header, out.Body)
			}
			out.Reset()
			err = g.Request(&out, openai.ChatCompletions, tt.model, false, []byte(`{"model":"x","n":3,"messages":[{"role":"user","content":"hi"}]}`))
			if e, ok := err.(*openai.Error); !ok || e.Status != 400 || e.Param != "n" {
				t.Errorf("refusal %v", err)
			}
			if !g.IsStream(200, []byte("text/event-stream")) || g.IsStream(200, []byte("application/json")) || g.IsStream(400, []byte("text/event-stream")) {
				t.Error("IsStream")
			}
		})
	}
}

func TestGeminiReply(t *testing.T) {
	g := &Gemini{prefix: "/models/"}
	body, status, err := g.Reply(nil, 429, replyHeader{}, []byte(`{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED"}}`), "gemini-x", 1)
	if err != nil || status != 429 || !strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Errorf("error reply %d %s %v", status, body, err)
	}
	quota := []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36.2s"}]}}`)
	if s, ok := g.RetryAfter(429, quota); s != 37 || !ok {
		t.Errorf("RetryAfter = %d, %v; want 37 (36.2s rounded up)", s, ok)
	}
	if s, ok := g.RetryAfter(429, []byte(`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`)); ok {
		t.Errorf("RetryAfter without RetryInfo = %d", s)
	}
	body, status, err = g.Reply(nil, 200, replyHeader{}, []byte(`{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP"}],`+
		`"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1},"modelVersion":"gemini-2.0-flash-001","responseId":"r1"}`), "gemini-x", 1)
	if err != nil || status != 200 || !strings.Contains(string(body), `"model":"gemini-x"`) || !strings.Contains(string(body), `"content":"Hi"`) ||
		!strings.Contains(string(body), `"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}`) {
		t.Errorf("reply %d %s %v", status, body, err)
	}
	s := g.NewStream(0)
	s.Reset(strings.NewReader(`data: {"candidates":[{"content":{"parts":[{"text":"Hi"}]},"finishReason":"STOP"}]}`+"\r\n\r\n"), "gemini-x", "id", 1, false)
	out, err := io.ReadAll(s)
	if err != nil || !strings.HasSuffix(string(out), "data: [DONE]\n\n") || !strings.Contains(string(out), `"content":"Hi"`) {
		t.Errorf("stream %s %v", out, err)
	}
}

func TestVertexCredentials(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(bad, []byte(`{"type":"nope"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Bind(&config.Upstream{Name: "v", Provider: config.ProviderVertex, Vertex: &config.Vertex{Project: "p", Location: "l", CredentialsFile: bad}})
	if err == nil || !strings.Contains(err.Error(), `upstream "v"`) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("err = %v, want one naming the upstream and the file", err)
	}
	// Application Default Credentials are detected on first use, not at
	// bind; a failure then names the source.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "missing.json"))
	if _, err := Bind(&config.Upstream{Name: "v", Provider: config.ProviderVertex, Vertex: &config.Vertex{Project: "p", Location: "l"}}); err != nil {
		t.Fatal(err)
	}
	ts, err := googleauth.New(googleauth.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := bearer{ts}.AppendAuth([]byte("keep"), &upstream.AuthRequest{Now: time.Now()})
	if err == nil || string(out) != "keep" || !strings.Contains(err.Error(), "Google Application Default Credentials") {
		t.Fatalf("AppendAuth = %q, %v", out, err)
	}
}
