package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The security tests at the wire: what a hostile client sends over raw TCP
// (smuggling, oversized requests, SSRF attempts) and what a plugin's headers
// can do, checked against what reached a recording upstream. See
// docs/SECURITY.md.

// upstreamRequest is one request a recording upstream received.
type upstreamRequest struct {
	method, uri, host string
	header            http.Header
	body              string
	// model and maxTokens as encoding/json reads the body — matching keys
	// case-insensitively, the last occurrence winning — as an upstream
	// written in Go (Ollama, for one) would. maxTokens is -1 when absent.
	model     string
	maxTokens int64
}

// recorder is an upstream that records every request and answers a chat
// completion (or a short stream when the body asks for one).
type recorder struct {
	url, host string
	mu        sync.Mutex
	reqs      []upstreamRequest
}

func startRecorder(t *testing.T) *recorder {
	rec := &recorder{}
	rec.url = startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var v struct {
			Model     string `json:"model"`
			MaxTokens *int64 `json:"max_tokens"`
			Stream    bool   `json:"stream"`
		}
		json.Unmarshal(b, &v)
		got := upstreamRequest{method: r.Method, uri: r.RequestURI, host: r.Host, header: r.Header.Clone(), body: string(b), model: v.Model, maxTokens: -1}
		if v.MaxTokens != nil {
			got.maxTokens = *v.MaxTokens
		}
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, got)
		rec.mu.Unlock()
		if v.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\n"+
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	})
	u, _ := url.Parse(rec.url)
	rec.host = u.Host
	return rec
}

// take returns the requests recorded so far and forgets them.
func (rec *recorder) take() []upstreamRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := rec.reqs
	rec.reqs = nil
	return r
}

// rawResponse is one response read off a raw connection.
type rawResponse struct {
	status int
	header http.Header
	body   string
}

// rawExchange writes raw to a new connection to addr and reads responses
// until the gateway closes the connection or wait passes without one. It
// reports whether the gateway closed the connection.
func rawExchange(t *testing.T, addr, raw string, wait time.Duration) (resps []rawResponse, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(wait))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			timedOut := errors.As(err, &ne) && ne.Timeout()
			return resps, !timedOut
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resps = append(resps, rawResponse{resp.StatusCode, resp.Header, string(b)})
	}
}

// checkHealthy checks that the gateway still serves: /healthz and one chat
// request on a fresh connection, which must reach the upstream intact.
func checkHealthy(t *testing.T, gw string, rec *recorder) {
	t.Helper()
	if body, err := httpGet(gw + "/healthz"); err != nil || body != "ok\n" {
		t.Fatalf("healthz after the attack: %q %v", body, err)
	}
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce); status != 200 {
		t.Fatalf("a normal request after the attack: %d %s", status, b)
	}
	if got := rec.take(); len(got) != 1 || got[0].body != chatOnce {
		t.Fatalf("the upstream got %d requests for one normal request: %+v", len(got), got)
	}
}

func chatRequest(body string, extraHeaders string) string {
	return fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s",
		extraHeaders, len(body), body)
}

// TestSecuritySmuggling sends requests whose framing a front proxy and the
// gateway could read differently, each followed by a second, smuggled
// request. The gateway must refuse the message or read it one way and then
// close the connection: the smuggled request never reaches the upstream,
// and the first reaches it whole or not at all.
func TestSecuritySmuggling(t *testing.T) {
	rec := startRecorder(t)
	pol := strings.Replace(policy(rec.url, ""), "drain_timeout: 2s", "drain_timeout: 2s\n  read_timeout: 2s", 1)
	_, gw := startGateway(t, pol, nil)
	addr := strings.TrimPrefix(gw, "http://")

	body := chatOnce
	smuggled := chatRequest(`{"model":"mock-1","messages":[{"role":"user","content":"SMUGGLED"}]}`, "")
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
	cl := func(n int) string { return fmt.Sprintf("Content-Length: %d\r\n", n) }
	tests := []struct {
		name string
		raw  string
	}{
		{"content-length and chunked", head + cl(len(chunked)) + "Transfer-Encoding: chunked\r\n\r\n" + chunked + smuggled},
		{"chunked and content-length 0", head + "Transfer-Encoding: chunked\r\n" + cl(0) + "\r\n" + chunked + smuggled},
		{"content-length covering the smuggled request, and chunked", head + cl(len(chunked)+len(smuggled)) + "Transfer-Encoding: chunked\r\n\r\n" + chunked + smuggled},
		{"two content-lengths", head + cl(len(body)) + cl(0) + "\r\n" + body + smuggled},
		{"two equal content-lengths", head + cl(len(body)) + cl(len(body)) + "\r\n" + body + smuggled},
		{"content-length list", head + fmt.Sprintf("Content-Length: %d, 0\r\n\r\n", len(body)) + body + smuggled},
		{"signed content-length", head + fmt.Sprintf("Content-Length: +%d\r\n\r\n", len(body)) + body + smuggled},
		{"negative content-length", head + "Content-Length: -1\r\n\r\n" + body + smuggled},
		{"unknown transfer-encoding", head + "Transfer-Encoding: xchunked\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"transfer-encoding list", head + "Transfer-Encoding: identity, chunked\r\n\r\n" + chunked + smuggled},
		{"space before the colon", head + "Transfer-Encoding : chunked\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"obs-fold hiding transfer-encoding", head + "X-A: 1\r\n Transfer-Encoding: chunked\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"obs-fold continuing transfer-encoding", head + "Transfer-Encoding:\r\n chunked\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"chunked on HTTP/1.0", strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Transfer-Encoding: chunked\r\n\r\n" + chunked + smuggled},
		{"chunk size overflow", head + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\n" + body + "\r\n0\r\n\r\n" + smuggled},
		{"NUL in a header", head + "X-A: a\x00b\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"CR in a header value", head + "X-A: a\rTransfer-Encoding: chunked\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"bare LF line ends", strings.ReplaceAll(chatRequest(body, ""), "\r\n", "\n") + smuggled},
		{"bare LF after one header", head + "X-A: 1\n" + cl(len(body)) + "\r\n" + body + smuggled},
		{"chunk lines with bare LF", head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\n%s\n0\n\n", len(body), body) + smuggled},
		{"chunk extension with a CRLF-like quoted string", head + "Transfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x;a=\"\n0\"\r\n%s\r\n0\r\n\r\n", len(body), body) + smuggled},
		{"two Host headers", head + "Host: other\r\n" + cl(len(body)) + "\r\n" + body + smuggled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps, closed := rawExchange(t, addr, tt.raw, 3*time.Second)
			got := rec.take()
			for _, r := range got {
				if strings.Contains(r.body, "SMUGGLED") {
					t.Fatalf("the smuggled request reached the upstream (responses %+v)", resps)
				}
				if r.body != body {
					t.Fatalf("the upstream got a body the client did not send: %q", r.body)
				}
			}
			if len(got) > 1 {
				t.Fatalf("the upstream got %d requests", len(got))
			}
			if len(resps) > 1 {
				t.Fatalf("%d responses on one connection: the gateway read a second request: %+v", len(resps), resps)
			}
			if !closed {
				t.Fatalf("the gateway kept the connection open after an ambiguous message (responses %+v)", resps)
			}
			if len(resps) == 1 && resps[0].status != 200 {
				if resps[0].status < 400 || resps[0].status >= 500 {
					t.Fatalf("status %d: %s", resps[0].status, resps[0].body)
				}
				if e := decodeError(t, []byte(resps[0].body)); e.Error.Type != "invalid_request_error" {
					t.Fatalf("error type %q", e.Error.Type)
				}
			}
			t.Logf("responses %d (status %v), upstream requests %d", len(resps), statuses(resps), len(got))
		})
	}
	// The check can see a second request: two pipelined requests are both
	// served and both reach the upstream.
	t.Run("pipelined requests are served in order", func(t *testing.T) {
		second := `{"model":"mock-1","messages":[{"role":"user","content":"second"}]}`
		resps, _ := rawExchange(t, addr, chatRequest(body, "")+chatRequest(second, ""), 500*time.Millisecond)
		got := rec.take()
		if len(resps) != 2 || resps[0].status != 200 || resps[1].status != 200 || len(got) != 2 || got[0].body != body || got[1].body != second {
			t.Fatalf("responses %v, upstream %+v", statuses(resps), got)
		}
	})
	checkHealthy(t, gw, rec)
}

func statuses(rs []rawResponse) []int {
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.status
	}
	return out
}

// TestSecurityOversizedRequests: headers and bodies past the limits get a
// clear OpenAI-style 431 or 413, nothing reaches the upstream, and the
// gateway keeps serving.
func TestSecurityOversizedRequests(t *testing.T) {
	rec := startRecorder(t)
	_, gw := startGateway(t, policy(rec.url, ""), nil)
	addr := strings.TrimPrefix(gw, "http://")
	big := `{"model":"mock-1","messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`
	tests := []struct {
		name   string
		raw    string
		status int
		code   string
	}{
		{"one large header", chatRequest(chatOnce, "X-Big: "+strings.Repeat("a", 20<<10)+"\r\n"), 431, "request_headers_too_large"},
		{"many headers", chatRequest(chatOnce, strings.Repeat("X-Many: b\r\n", 2000)), 431, "request_headers_too_large"},
		{"long request target", strings.Replace(chatRequest(chatOnce, ""), "/v1/chat/completions", "/v1/chat/completions?"+strings.Repeat("q", 20<<10), 1), 431, "request_headers_too_large"},
		{"body over the limit", chatRequest(big, ""), 413, "request_too_large"},
		{"chunked body over the limit", "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big), 413, "request_too_large"},
		{"huge declared length, nothing sent", "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: 10000000000\r\n\r\n", 413, "request_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resps, _ := rawExchange(t, addr, tt.raw, 3*time.Second)
			if len(resps) != 1 || resps[0].status != tt.status {
				t.Fatalf("got %v, want one %d: %+v", statuses(resps), tt.status, resps)
			}
			e := decodeError(t, []byte(resps[0].body))
			if e.Error.Code == nil || *e.Error.Code != tt.code || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "limit") {
				t.Fatalf("error %s", resps[0].body)
			}
			if got := rec.take(); len(got) != 0 {
				t.Fatalf("the upstream got %d requests", len(got))
			}
		})
	}
	checkHealthy(t, gw, rec)
}

// TestSecurityNoSSRF: nothing a client sends changes where the gateway
// connects or the path it asks for there — not the Host header, an
// absolute-form target, forwarding headers, nor model names that look like
// URLs or paths.
func TestSecurityNoSSRF(t *testing.T) {
	rec := startRecorder(t)
	evil, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer evil.Close()
	var evilConns atomic.Int64
	go func() {
		for {
			c, err := evil.Accept()
			if err != nil {
				return
			}
			evilConns.Add(1)
			c.Close()
		}
	}()
	ev := evil.Addr().String()
	_, gw := startGateway(t, policy(rec.url, "", "mock-*", "meta-llama/Llama-3"), nil)
	addr := strings.TrimPrefix(gw, "http://")

	withModel := func(m string) string {
		b, _ := json.Marshal(map[string]any{"model": m, "messages": []map[string]string{{"role": "user", "content": "x"}}})
		return string(b)
	}
	tests := []struct {
		name, raw string
		served    bool // the request is valid and reaches the upstream
	}{
		{"Host header", strings.Replace(chatRequest(chatOnce, ""), "Host: gw", "Host: "+ev, 1), true},
		{"absolute-form target", strings.Replace(chatRequest(chatOnce, ""), "POST /v1/", "POST http://"+ev+"/v1/", 1), true},
		{"absolute-form target with userinfo", strings.Replace(chatRequest(chatOnce, ""), "POST /v1/", "POST http://gw@"+ev+"/v1/", 1), true},
		{"absolute-form target elsewhere", strings.Replace(chatRequest(chatOnce, ""), "POST /v1/chat/completions", "POST http://"+ev+"/admin", 1), false},
		{"forwarding headers", chatRequest(chatOnce, "X-Forwarded-Host: "+ev+"\r\nX-Forwarded-Proto: https\r\nForwarded: host="+ev+"\r\nX-Original-URL: /evil\r\nX-Rewrite-URL: /evil\r\nX-Forwarded-Prefix: /evil\r\nX-Host: "+ev+"\r\n"), true},
		{"query string", strings.Replace(chatRequest(chatOnce, ""), "/v1/chat/completions", "/v1/chat/completions?url=http://"+ev+"/&path=../../x", 1), true},
		{"dot segments out of the route", strings.Replace(chatRequest(chatOnce, ""), "/v1/chat/completions", "/v1/chat/completions/../../../"+ev, 1), false},
		{"model with a URL", chatRequest(withModel("mock-http://"+ev+"/v1"), ""), false},
		{"model with userinfo", chatRequest(withModel("mock-x@"+ev), ""), true},
		{"model with dot segments", chatRequest(withModel("mock-../../"+ev), ""), false},
		{"model with encoded dot segments", chatRequest(withModel("mock-%2e%2e%2f%2e%2e%2fadmin"), ""), true},
		{"model with a query", chatRequest(withModel("mock-1?target="+ev+"#x"), ""), true},
		{"model with a scheme", chatRequest(withModel("mock-1?target=http://"+ev), ""), false},
		{"model with CRLF", chatRequest(withModel("mock-1\r\nHost: "+ev), ""), true},
		{"model with a slash, routed", chatRequest(withModel("meta-llama/Llama-3"), ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := strings.Replace(tt.raw, "\r\n", "\r\nConnection: close\r\n", 1)
			resps, _ := rawExchange(t, addr, raw, 3*time.Second)
			got := rec.take()
			if tt.served != (len(got) == 1) || len(resps) == 0 || tt.served != (resps[0].status == 200) {
				t.Fatalf("responses %v, %d upstream requests; want served=%v: %+v", statuses(resps), len(got), tt.served, resps)
			}
			for _, r := range got {
				if r.host != rec.host || r.uri != "/v1/chat/completions" || r.method != "POST" {
					t.Fatalf("the upstream got %s %s with Host %q, want POST /v1/chat/completions with Host %q", r.method, r.uri, r.host, rec.host)
				}
				for _, h := range []string{"X-Forwarded-Host", "Forwarded", "X-Original-Url", "X-Rewrite-Url", "X-Host", "X-Forwarded-Prefix"} {
					if v := r.header.Get(h); v != "" {
						t.Fatalf("the client's %s: %q reached the upstream", h, v)
					}
				}
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	if n := evilConns.Load(); n != 0 {
		t.Fatalf("the gateway connected %d times to an address only the client named", n)
	}
	checkHealthy(t, gw, rec)
}

// TestSecurityPluginHeaderInjection: a plugin setting headers with CR, LF or
// NUL in the name or value, or naming framing headers, is refused by the
// host (INVALID) and the request goes on unchanged: neither the upstream
// nor the client sees an injected header or a changed frame.
func TestSecurityPluginHeaderInjection(t *testing.T) {
	rec := startRecorder(t)
	bad := []string{
		"X-Evil=a\r\nX-Injected: 1",
		"X-Evil=a\nX-Injected: 1",
		"X-Evil=a\rX-Injected: 1",
		"X-Evil=a\x00X-Injected: 1",
		"X-Evil\r\nX-Injected: 1=v",
		"X-Evil: x\r\nX-Injected=1",
		"X Evil=1",
		"=empty name",
		"Content-Length=0",
		"Transfer-Encoding=chunked",
		"Host=evil.example",
		"Connection=close",
		"X-Evil=" + strings.Repeat("v", 9<<10),
	}
	var acts []string
	for _, b := range bad {
		acts = append(acts, "set_header:"+b, "set_response_header:"+b)
	}
	acts = append(acts, "set_header:X-Good=up", "set_response_header:X-Good=down")
	cfg, _ := json.Marshal(map[string]any{"request": acts, "phases": []string{"request"}})
	_, gw := startGateway(t, withPlugins(t, policy(rec.url, ""), "fail_closed", string(cfg)), nil)
	addr := strings.TrimPrefix(gw, "http://")

	for _, stream := range []bool{false, true} {
		body := chatOnce
		if stream {
			body = chatStream
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, chatRequest(body, "Connection: close\r\n"))
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		raw, _ := io.ReadAll(c)
		c.Close()
		head, _, _ := strings.Cut(string(raw), "\r\n\r\n")
		if !strings.HasPrefix(head, "HTTP/1.1 200") || !strings.Contains(head, "\r\nX-Good: down") {
			t.Fatalf("stream=%v: response head:\n%s", stream, head)
		}
		lower := strings.ToLower(head)
		for _, s := range []string{"x-injected", "x-evil", "evil.example", "transfer-encoding: chunked\r\ncontent-length", "\r\ncontent-length: 0\r\n"} {
			if strings.Contains(lower, s) {
				t.Fatalf("stream=%v: %q in the response head:\n%s", stream, s, head)
			}
		}
		got := rec.take()
		if len(got) != 1 {
			t.Fatalf("stream=%v: %d upstream requests", stream, len(got))
		}
		r := got[0]
		if r.header.Get("X-Good") != "up" || r.host != rec.host || r.header.Get("Connection") != "" || len(r.header.Values("Content-Length")) > 1 {
			t.Fatalf("stream=%v: upstream headers %v, host %q", stream, r.header, r.host)
		}
		if r.header.Get("X-Injected") != "" || r.header.Get("X-Evil") != "" || !strings.Contains(r.body, `"model":"mock-1"`) {
			t.Fatalf("stream=%v: upstream got %v %q", stream, r.header, r.body)
		}
	}
}
