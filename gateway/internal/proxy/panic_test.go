package proxy

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/testkit/syncbuf"
)

// A panic while a request is handled fails that request alone: it is
// answered 500 internal_error with its connection closed, logged with its
// stack and counted, and the gateway serves the next request.
func TestHandlerPanic(t *testing.T) {
	var logs syncbuf.Buffer
	s := newPanicServer(t, "http://127.0.0.1:9", &logs)
	// /metrics on the public listener is a handler of its own: one that
	// panics stands for a bug anywhere in the handler.
	s.publicMetrics = func(*fasthttp.RequestCtx) { panic("handler bug") }
	ln := servePanicServer(t, s)
	t.Cleanup(func() { s.Shutdown(0, time.Second) })

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: gw\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !resp.Close || !strings.Contains(string(body), `"code":"internal_error"`) ||
		!strings.Contains(string(body), `"type":"server_error"`) {
		t.Errorf("%d close=%v %s; want 500 internal_error, the connection closed", resp.StatusCode, resp.Close, body)
	}
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the connection stayed open (read %d, %v)", n, err)
	}
	if l := logs.String(); !strings.Contains(l, "handler bug") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("log has no panic or stack: %s", l)
	}

	r, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("after the panic: /healthz %d", r.StatusCode)
	}
	rec := httptest.NewRecorder()
	s.obs.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`tollgate_panics_total{where="handler"} 1`, `tollgate_panics_total{where="stream"} 0`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A panic after the upstream answered lets go of what the request held:
// it leaves the in-flight count and the cancel registry, its upstream
// connection is closed rather than reused, and its policy state does not
// hold a shutdown. The gateway serves on.
func TestHandlerPanicMidExchange(t *testing.T) {
	var closed atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	var logs syncbuf.Buffer
	s := newPanicServer(t, up.URL, &logs)
	ln := servePanicServer(t, s)
	chat := func() (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	hook := func() { panic("bug after the first byte") }
	testHookFirstByte.Store(&hook)
	status, body := chat()
	testHookFirstByte.Store(nil)
	if status != 500 || !strings.Contains(body, `"code":"internal_error"`) {
		t.Fatalf("%d %s; want 500 internal_error", status, body)
	}
	if n := s.InFlight(); n != 0 {
		t.Errorf("%d requests still in flight after the panic", n)
	}
	if listed, err := s.cancels.List(context.Background()); err != nil || len(listed) != 0 {
		t.Errorf("the cancel registry lists %v (%v), want none", listed, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for closed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if closed.Load() != 1 {
		t.Errorf("upstream connections closed: %d, want the panicked request's", closed.Load())
	}
	if l := logs.String(); !strings.Contains(l, "bug after the first byte") || !strings.Contains(l, "panic_test.go") {
		t.Errorf("log has no panic or stack: %s", l)
	}
	if status, body := chat(); status != 200 || !strings.Contains(body, `"content":"hi"`) {
		t.Errorf("after the panic: %d %s", status, body)
	}
	if n := s.InFlight(); n != 0 {
		t.Errorf("%d requests in flight after the last reply", n)
	}
	// Nothing of the panicked request holds the shutdown: it waits for
	// every policy state a request holds.
	start := time.Now()
	if err := s.Shutdown(0, time.Second); err != nil || time.Since(start) > 5*time.Second {
		t.Errorf("shutdown took %v: %v", time.Since(start), err)
	}
}

// newPanicServer builds a gateway routing model m to the upstream at
// base, logging to logs.
func newPanicServer(t *testing.T, base string, logs *syncbuf.Buffer) *Server {
	t.Helper()
	p, err := config.Parse([]byte(`
version: 1
server: {drain_timeout: 1s}
upstreams: [{name: a, base_url: '`+base+`/v1'}]
routes: [{models: [m], upstream: a}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(p, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// servePanicServer serves s on a loopback port.
func servePanicServer(t *testing.T, s *Server) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	return ln
}
