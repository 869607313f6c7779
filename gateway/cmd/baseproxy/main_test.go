package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// startMock serves a mock model on a loopback port and counts the
// connections it accepts.
func startMock(t *testing.T, cfg mockllm.Config) (addr string, mock *mockllm.Server, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mock = mockllm.New(cfg)
	conns = new(atomic.Int64)
	srv := &http.Server{Handler: mock, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), mock, conns
}

// startProxy serves a baseproxy in front of upstream on a loopback port.
func startProxy(t *testing.T, upstream string) string {
	t.Helper()
	p, err := newProxy(upstream, 16)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := p.server()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, url string, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestProxyForwardsRepliesAndReusesConnections(t *testing.T) {
	addr, mock, conns := startMock(t, mockllm.Config{APIKey: "sk-up"})
	var mu sync.Mutex
	var seen []http.Header
	mock.SetOnRequest(func(h http.Header, _ []byte) {
		mu.Lock()
		seen = append(seen, h)
		mu.Unlock()
	})
	url := startProxy(t, "http://"+addr)

	const n = 20
	for i := range n {
		resp := post(t, url, `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`,
			map[string]string{"Authorization": "Bearer sk-up", "X-Mock-Text": "hello%20there", "Proxy-Authorization": "x"})
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: HTTP %d: %s", i, resp.StatusCode, b)
		}
		if !strings.Contains(string(b), `"content":"hello there"`) {
			t.Fatalf("request %d: body %s lacks the mock's text", i, b)
		}
		if resp.ContentLength != int64(len(b)) {
			t.Errorf("request %d: Content-Length %d, body %d bytes", i, resp.ContentLength, len(b))
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("the mock accepted %d connections for %d sequential requests; want 1 (keep-alive)", got, n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != n {
		t.Fatalf("the mock saw %d requests, want %d", len(seen), n)
	}
	if h := seen[0]; h.Get("Proxy-Authorization") != "" || h.Get("Authorization") != "Bearer sk-up" {
		t.Errorf("forwarded headers: Proxy-Authorization %q (want none), Authorization %q (want the client's)",
			h.Get("Proxy-Authorization"), h.Get("Authorization"))
	}
}

// A stream reaches the client event by event, not after the upstream ends.
func TestProxyStreamsEventsAsTheyArrive(t *testing.T) {
	const tokens, gap = 6, 40 * time.Millisecond
	addr, _, _ := startMock(t, mockllm.Config{Tokens: tokens, InterToken: gap})
	url := startProxy(t, "http://"+addr)

	start := time.Now()
	resp := post(t, url, `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`, nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("HTTP %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var first, done time.Duration
	events := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		events++
		if first == 0 && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			first = time.Since(start)
		}
		if line == "data: [DONE]" {
			done = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if first == 0 || done == 0 {
		t.Fatalf("stream of %d events without a content delta or [DONE]", events)
	}
	// The last token leaves the mock (tokens-1)×gap after the first.
	if want := time.Duration(tokens-2) * gap; done-first < want {
		t.Errorf("first content at %v, [DONE] at %v: %v apart, want at least %v (events were buffered)", first, done, done-first, want)
	}
}

func TestProxyAnswers502WhenTheUpstreamIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	url := startProxy(t, "http://"+dead)
	resp := post(t, url, `{}`, nil)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), `"code":"bad_gateway"`) {
		t.Errorf("HTTP %d %s; want 502 with an OpenAI-style error", resp.StatusCode, b)
	}
}

func TestNewProxyRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name     string
		upstream string
		conns    int
	}{
		{"https", "https://127.0.0.1:1", 1},
		{"no host", "http://", 1},
		{"not a URL", "://x", 1},
		{"no conns", "http://127.0.0.1:1", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := newProxy(tt.upstream, tt.conns); err == nil {
				t.Errorf("newProxy(%q, %d) accepted", tt.upstream, tt.conns)
			}
		})
	}
}
