package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// step is what a fake upstream does with one request.
type step struct {
	status     int           // 0: 200 with a chat completion
	retryAfter string        // Retry-After of an error reply
	delay      time.Duration // before the response headers
	stream     bool          // 200 text/event-stream
	events     int           // stream: events sent (default 2)
	eventGap   time.Duration // stream: pause between events
	cut        bool          // stream: close the connection after the events, no [DONE]
	hold       chan struct{} // answer once this is closed
}

// hit is one request an upstream received.
type hit struct {
	upstream, requestID, body string
}

// hits records, in arrival order, the requests every fake upstream of a
// test received.
type hits struct {
	mu   sync.Mutex
	list []hit
}

func (h *hits) add(x hit) {
	h.mu.Lock()
	h.list = append(h.list, x)
	h.mu.Unlock()
}

// of returns the upstreams that received requestID, in order.
func (h *hits) of(requestID string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, x := range h.list {
		if x.requestID == requestID {
			out = append(out, x.upstream)
		}
	}
	return out
}

func (h *hits) count(upstream string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, x := range h.list {
		if x.upstream == upstream {
			n++
		}
	}
	return n
}

func (h *hits) bodyOf(requestID, upstream string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.list {
		if x.requestID == requestID && x.upstream == upstream {
			return x.body
		}
	}
	return ""
}

// fakeUpstream is an OpenAI-style upstream that follows a script: the
// steps in order, then `then` for every later request.
type fakeUpstream struct {
	name string
	url  string
	hits *hits

	mu     sync.Mutex
	script []step
	then   step

	cur, peak atomic.Int64
}

func newFakeUpstream(t *testing.T, name string, h *hits, then step, script ...step) *fakeUpstream {
	t.Helper()
	f := &fakeUpstream{name: name, hits: h, script: script, then: then}
	ts := httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// set replaces the upstream's behaviour from the next request on.
func (f *fakeUpstream) set(then step, script ...step) {
	f.mu.Lock()
	f.script, f.then = script, then
	f.mu.Unlock()
}

func (f *fakeUpstream) next() step {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.script) > 0 {
		s := f.script[0]
		f.script = f.script[1:]
		return s
	}
	return f.then
}

func (f *fakeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.hits.add(hit{upstream: f.name, requestID: r.Header.Get("X-Request-Id"), body: string(body)})
	n := f.cur.Add(1)
	defer f.cur.Add(-1)
	for {
		p := f.peak.Load()
		if n <= p || f.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s := f.next()
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-r.Context().Done():
			return
		}
	}
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case s.status != 0:
		if s.retryAfter != "" {
			w.Header().Set("Retry-After", s.retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.status)
		fmt.Fprintf(w, `{"error":{"message":"%s says %d","type":"upstream_test","code":null,"param":null}}`, f.name, s.status)
	case s.stream:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		events := s.events
		if events == 0 {
			events = 2
		}
		fl := w.(http.Flusher)
		for i := range events {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s%d \"},\"finish_reason\":null}]}\n\n", f.name, i)
			fl.Flush()
			if s.eventGap > 0 {
				time.Sleep(s.eventGap)
			}
		}
		if s.cut {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"from %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`, f.name)
	}
}

// accessLog collects the gateway's access log lines by request id.
type accessLog struct {
	mu    sync.Mutex
	lines map[string]map[string]slog.Value
}

func (l *accessLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *accessLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *accessLog) WithGroup(string) slog.Handler            { return l }
func (l *accessLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	m := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value; return true })
	l.mu.Lock()
	l.lines[m["request_id"].String()] = m
	l.mu.Unlock()
	return nil
}

// line waits for the access log line of requestID.
func (l *accessLog) line(t *testing.T, requestID string) map[string]slog.Value {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		l.mu.Lock()
		m, ok := l.lines[requestID]
		l.mu.Unlock()
		if ok {
			return m
		}
	}
	t.Fatalf("no access log line for %s", requestID)
	return nil
}

// served returns the upstream and attempt count the access log recorded.
func (l *accessLog) served(t *testing.T, requestID string) (string, int64) {
	m := l.line(t, requestID)
	return m["upstream"].String(), m["attempts"].Int64()
}

// testGateway is a gateway running policyYAML in-process.
type testGateway struct {
	srv *Server
	url string
	log *accessLog
	seq atomic.Int64
}

func startTestGateway(t *testing.T, policyYAML string) *testGateway {
	t.Helper()
	p, err := config.Parse([]byte(policyYAML), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	al := &accessLog{lines: map[string]map[string]slog.Value{}}
	srv, err := New(p, slog.New(al))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	t.Cleanup(func() {
		srv.Shutdown(0, 2*time.Second)
		<-done
	})
	return &testGateway{srv: srv, url: "http://" + ln.Addr().String(), log: al}
}

// reply is a client's view of one request.
type reply struct {
	id     string
	status int
	header http.Header
	body   string
}

// chat sends a chat completion for model and returns the reply; each
// request gets a fresh X-Request-Id.
func (g *testGateway) chat(t *testing.T, model string, stream bool) reply {
	t.Helper()
	id := fmt.Sprintf("rt-%d", g.seq.Add(1))
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, model, stream)
	req, err := http.NewRequest("POST", g.url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading reply: %v", err)
	}
	return reply{id: id, status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// metrics returns the gateway's metric samples whose line starts with
// prefix, keyed by the sample's name and labels.
func (g *testGateway) metrics(t *testing.T, prefix string) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	g.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := map[string]string{}
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

// closedURL is a loopback URL nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// upstreamYAML renders one upstreams[] entry; extra may set timeouts.
func upstreamYAML(name, url, extra string) string {
	if !strings.Contains(extra, "timeouts:") {
		extra += "\ntimeouts: {connect: 1s, first_byte: 2s, idle: 2s, total: 20s}"
	}
	return fmt.Sprintf(`
  - name: %s
    base_url: %s/v1
%s`, name, url, indent(extra, "    "))
}

func indent(s, prefix string) string {
	if s == "" {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// routingPolicy is a policy with the access log on, the given upstreams
// entries and routes.
func routingPolicy(upstreams, routes string) string {
	return "version: 1\nserver: {access_log: true, drain_timeout: 2s}\nupstreams:" + upstreams + "routes:\n" + indent(routes, "  ")
}
