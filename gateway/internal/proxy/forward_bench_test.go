package proxy

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// benchUpstream is an OpenAI-compatible upstream answering every request
// at once: a chat.completion, or a short stream when the body asks for one.
func benchUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	whole := []byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, how can I help?"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`)
	var events []byte
	for i := range 8 {
		events = fmt.Appendf(events, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"word%d \"},\"finish_reason\":null}]}\n\n", i)
	}
	events = append(events, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":8,\"total_tokens\":17}}\n\ndata: [DONE]\n\n"...)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if bytes.Contains(ctx.PostBody(), []byte(`"stream":true`)) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBody(events)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBody(whole)
	}}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

// startBenchGateway runs policyYAML in-process and returns its address.
func startBenchGateway(b *testing.B, policyYAML string) string {
	b.Helper()
	p, err := config.Parse([]byte(policyYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(p, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	b.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
	})
	return ln.Addr().String()
}

// BenchmarkForward measures a request through the gateway to an
// OpenAI-compatible upstream on loopback, client and upstream in-process:
// what the proxy adds per request shows in allocs/op; ns/op includes both
// loopback round trips.
func BenchmarkForward(b *testing.B) {
	up := benchUpstream(b)
	policy := fmt.Sprintf(`version: 1
server: {drain_timeout: 2s}
upstreams:
  - name: up
    base_url: %s/v1
routes:
  - models: ["m"]
    upstream: up
`, up)
	for _, tc := range []struct {
		name string
		body string
	}{
		{"whole", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"stream", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			g := startBenchGateway(b, policy)
			c := &fasthttp.HostClient{Addr: g}
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.SetRequestURI("http://" + g + "/v1/chat/completions")
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.SetBodyString(tc.body)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.Do(req, resp); err != nil {
					b.Fatal(err)
				}
				if resp.StatusCode() != 200 || len(resp.Body()) == 0 {
					b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
				}
			}
		})
	}
}
