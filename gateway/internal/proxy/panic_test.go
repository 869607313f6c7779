package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
	p, err := config.Parse([]byte(`
version: 1
server: {drain_timeout: 1s}
upstreams: [{name: a, base_url: 'http://127.0.0.1:9/v1'}]
routes: [{models: [m], upstream: a}]
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	s, err := New(p, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// /metrics on the public listener is a handler of its own: one that
	// panics stands for a bug anywhere in the handler.
	s.publicMetrics = func(*fasthttp.RequestCtx) { panic("handler bug") }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
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
