package callout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// classifier is a test service: /ok answers its request's body and the
// X-Key header it got, /slow waits, /huge answers 1MiB, /redirect
// redirects to /ok, /status/500 answers 500, /hold blocks until released.
func classifier(t *testing.T) (*httptest.Server, *sync.WaitGroup, chan struct{}) {
	t.Helper()
	var hits sync.WaitGroup
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Got-Key", r.Header.Get("X-Key"))
		w.Header().Set("X-Got-Plugin", r.Header.Get("X-Plugin"))
		buf := make([]byte, 1024)
		n, _ := r.Body.Read(buf)
		fmt.Fprintf(w, "%s %s", r.Method, buf[:n])
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("length") == "1" {
			w.Header().Set("Content-Length", "1048576")
		}
		w.Write(make([]byte, 1<<20))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/status/500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 500) })
	mux.HandleFunc("/hold", func(w http.ResponseWriter, r *http.Request) {
		hits.Done()
		<-release
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &hits, release
}

func newService(t *testing.T, m *Metrics, grants map[string]GrantSpec) *Service {
	t.Helper()
	env := map[string]string{"CLASSIFIER_KEY": "Bearer s3cret"}
	gs := map[string]*Grant{}
	for name, spec := range grants {
		g, err := NewGrant(spec, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		gs[name] = g
	}
	s, err := New(Config{Grants: gs, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func count(m *Metrics, plugin string, o Outcome) int {
	return int(testutil.ToFloat64(m.calls.WithLabelValues(plugin, o.String())))
}

func TestDo(t *testing.T) {
	srv, _, _ := classifier(t)
	closed := closedPort(t)
	m := NewMetrics()
	s := newService(t, m, map[string]GrantSpec{
		"mod": {Allow: []string{srv.URL + "/", closed + "/"}, Timeout: time.Second, MaxResponseBytes: 64 << 10,
			HeadersEnv: map[string]string{"X-Key": "CLASSIFIER_KEY"}},
	})
	tests := []struct {
		name, req  string
		wantStatus int
		wantBody   string
		outcome    Outcome
	}{
		{"ok", "POST " + srv.URL + "/ok\nX-Plugin: p\n\nhello", 200, "POST hello", OutcomeOK},
		{"error status", "GET " + srv.URL + "/status/500\n\n", 500, "down\n", OutcomeErrorStatus},
		{"redirect not followed", "GET " + srv.URL + "/redirect\n\n", 302, "", OutcomeErrorStatus},
		{"slow", "GET " + srv.URL + "/slow\n\n", StatusTimeout, "", OutcomeTimeout},
		{"huge chunked", "GET " + srv.URL + "/huge\n\n", StatusTooLarge, "", OutcomeTooLarge},
		{"huge with length", "GET " + srv.URL + "/huge?length=1\n\n", StatusTooLarge, "", OutcomeTooLarge},
		{"down", "GET " + closed + "/x\n\n", StatusUnavailable, "", OutcomeUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := count(m, "mod", tt.outcome)
			if err := s.Check("mod", []byte(tt.req)); err != nil {
				t.Fatalf("Check: %v", err)
			}
			res := s.Do(context.Background(), "mod", []byte(tt.req))
			if res.Status != tt.wantStatus {
				t.Fatalf("status %d, want %d", res.Status, tt.wantStatus)
			}
			if tt.wantBody != "" && string(res.Body) != tt.wantBody {
				t.Errorf("body %q, want %q", res.Body, tt.wantBody)
			}
			if got := count(m, "mod", tt.outcome) - before; got != 1 {
				t.Errorf("%s counted %d times, want 1", tt.outcome, got)
			}
		})
	}
	res := s.Do(context.Background(), "mod", []byte("POST "+srv.URL+"/ok\nX-Key: mine\nX-Plugin: p\n\n"))
	if h := header(res, "X-Got-Key"); h != "Bearer s3cret" {
		t.Errorf("the service got X-Key %q, want the grant's", h)
	}
	if h := header(res, "X-Got-Plugin"); h != "p" {
		t.Errorf("the service got X-Plugin %q, want the plugin's", h)
	}
	if got := testutil.ToFloat64(m.inFlight.WithLabelValues("mod")); got != 0 {
		t.Errorf("in flight %v after the calls", got)
	}
	if got := testutil.CollectAndCount(m.seconds); got != 1 {
		t.Errorf("%d seconds series, want 1", got)
	}
}

func TestDoAbandoned(t *testing.T) {
	srv, _, _ := classifier(t)
	s := newService(t, nil, map[string]GrantSpec{"mod": {Allow: []string{srv.URL}, Timeout: 5 * time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	// The host's own deadline (the request ended) is not the grant's
	// timeout, but it ends the call all the same.
	res := s.Do(ctx, "mod", []byte("GET "+srv.URL+"/slow\n\n"))
	if res.Status != StatusTimeout && res.Status != StatusUnavailable {
		t.Errorf("status %d", res.Status)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("an abandoned call took %v", d)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if res := s.Do(ctx, "mod", []byte("GET "+srv.URL+"/ok\n\n")); res.Status != StatusUnavailable {
		t.Errorf("cancelled call: status %d, want %d", res.Status, StatusUnavailable)
	}
}

func TestCheckDenied(t *testing.T) {
	m := NewMetrics()
	s := newService(t, m, map[string]GrantSpec{"mod": {Allow: []string{"http://127.0.0.1:9/v1/moderations"}}})
	tests := []struct {
		name, plugin, req string
		want              error
	}{
		{"other path", "mod", "GET http://127.0.0.1:9/v1/chat\n\n", ErrNotAllowed},
		{"path sibling", "mod", "GET http://127.0.0.1:9/v1/moderationsX\n\n", ErrNotAllowed},
		{"dot segments", "mod", "GET http://127.0.0.1:9/v1/moderations/../chat\n\n", ErrNotAllowed},
		{"other port", "mod", "GET http://127.0.0.1:10/v1/moderations\n\n", ErrNotAllowed},
		{"userinfo", "mod", "GET http://u:p@127.0.0.1:9/v1/moderations\n\n", ErrNotAllowed},
		{"scheme", "mod", "GET https://127.0.0.1:9/v1/moderations\n\n", ErrNotAllowed},
		{"no grant", "other", "GET http://127.0.0.1:9/v1/moderations\n\n", ErrNotAllowed},
		{"malformed", "mod", "GET http://127.0.0.1:9/v1/moderations\n", ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Check(tt.plugin, []byte(tt.req)); !errors.Is(err, tt.want) {
				t.Errorf("Check = %v, want %v", err, tt.want)
			}
			if res := s.Do(context.Background(), tt.plugin, []byte(tt.req)); res.Status != StatusUnavailable {
				t.Errorf("Do of a refused call: status %d", res.Status)
			}
		})
	}
	if got := count(m, "mod", OutcomeDenied); got != 2*6 {
		t.Errorf("denied %d, want 12", got)
	}
	if got := count(m, "other", OutcomeDenied); got != 2 {
		t.Errorf("denied without a grant %d, want 2", got)
	}
	if err := s.Check("mod", []byte("GET http://127.0.0.1:9/v1/moderations?key=x\n\n")); err != nil {
		t.Errorf("a query string under the prefix: %v", err)
	}
}

func TestCache(t *testing.T) {
	srv, _, _ := classifier(t)
	m := NewMetrics()
	s := newService(t, m, map[string]GrantSpec{"a": {Allow: []string{srv.URL}}, "b": {Allow: []string{srv.URL}}})
	call := func(plugin, body, cache string) Result {
		return s.Do(context.Background(), plugin, []byte("POST "+srv.URL+"/ok\n"+cache+"\n"+body))
	}
	first := call("a", "one", ":cache 150 k1\n")
	if first.Cached || string(first.Body) != "POST one" {
		t.Fatalf("first call %+v", first)
	}
	// The key, not the body, names the entry: a hit answers "one".
	if hit := call("a", "two", ":cache 150 k1\n"); !hit.Cached || string(hit.Body) != "POST one" {
		t.Errorf("second call not from the cache: %+v", hit)
	}
	if other := call("b", "three", ":cache 150 k1\n"); other.Cached || string(other.Body) != "POST three" {
		t.Errorf("plugin b read plugin a's entry: %+v", other)
	}
	if nokey := call("a", "four", ""); nokey.Cached {
		t.Errorf("a call without :cache answered from the cache")
	}
	time.Sleep(1200 * time.Millisecond) // ristretto expires entries by the second
	if late := call("a", "five", ":cache 150 k1\n"); late.Cached || string(late.Body) != "POST five" {
		t.Errorf("entry not expired: %+v", late)
	}
	// Only 2xx answers are kept.
	s.Do(context.Background(), "a", []byte("GET "+srv.URL+"/status/500\n:cache 60000 k5\n\n"))
	if res := s.Do(context.Background(), "a", []byte("GET "+srv.URL+"/status/500\n:cache 60000 k5\n\n")); res.Cached {
		t.Errorf("a 500 was cached")
	}
	if got := count(m, "a", OutcomeCached); got != 1 {
		t.Errorf("cached counted %d, want 1", got)
	}
}

func TestInFlightCap(t *testing.T) {
	srv, hits, release := classifier(t)
	m := NewMetrics()
	s := newService(t, m, map[string]GrantSpec{"mod": {Allow: []string{srv.URL}, MaxInFlight: 2, Timeout: 5 * time.Second}})
	req := []byte("GET " + srv.URL + "/hold\n\n")
	hits.Add(2)
	results := make(chan Result, 2)
	for range 2 {
		go func() { results <- s.Do(context.Background(), "mod", req) }()
	}
	hits.Wait() // both in flight
	if got := testutil.ToFloat64(m.inFlight.WithLabelValues("mod")); got != 2 {
		t.Errorf("in-flight gauge %v, want 2", got)
	}
	start := time.Now()
	if res := s.Do(context.Background(), "mod", req); res.Status != StatusBusy {
		t.Errorf("third call: status %d, want BUSY", res.Status)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("BUSY took %v: queued, not refused at once", d)
	}
	close(release)
	for range 2 {
		if res := <-results; res.Status != 200 {
			t.Errorf("held call: status %d", res.Status)
		}
	}
	if got := count(m, "mod", OutcomeBusy); got != 1 {
		t.Errorf("busy counted %d", got)
	}
	if res := s.Do(context.Background(), "mod", []byte("GET "+srv.URL+"/ok\n\n")); res.Status != 200 {
		t.Errorf("after the held calls: status %d", res.Status)
	}
}

func TestNewGrant(t *testing.T) {
	env := func(k string) (string, bool) {
		switch k {
		case "KEY":
			return "v", true
		case "BAD":
			return "a\nb", true
		}
		return "", false
	}
	tests := []struct {
		name string
		spec GrantSpec
		want string // "" for no error
	}{
		{"defaults", GrantSpec{Allow: []string{"https://x/"}}, ""},
		{"no allow", GrantSpec{}, "at least one URL prefix"},
		{"bad prefix", GrantSpec{Allow: []string{"ftp://x/"}}, "callout.allow[0]"},
		{"missing env", GrantSpec{Allow: []string{"https://x/"}, HeadersEnv: map[string]string{"Authorization": "NOPE"}}, "environment variable NOPE is not set"},
		{"bad value", GrantSpec{Allow: []string{"https://x/"}, HeadersEnv: map[string]string{"Authorization": "BAD"}}, "CR, LF or NUL"},
		{"framing header", GrantSpec{Allow: []string{"https://x/"}, HeadersEnv: map[string]string{"Host": "KEY"}}, "invalid header name"},
		{"negative", GrantSpec{Allow: []string{"https://x/"}, Timeout: -1}, "must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := NewGrant(tt.spec, env)
			if tt.want == "" {
				if err != nil || g.Timeout() != DefaultTimeout || g.maxInFlight != DefaultMaxInFlight || g.maxResponseBytes != DefaultMaxResponseBytes {
					t.Fatalf("NewGrant = %+v, %v", g, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewGrant error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "a\nb") {
				t.Errorf("the error shows the secret")
			}
		})
	}
}

func header(r Result, name string) string {
	for _, h := range r.Header {
		if strings.EqualFold(string(h.Name), name) {
			return string(h.Value)
		}
	}
	return ""
}

// closedPort is the base URL of a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// A policy without any grant refuses, and counts, every call.
func TestNoGrants(t *testing.T) {
	m := NewMetrics()
	s := newService(t, m, nil)
	req := []byte("GET http://127.0.0.1:9/x\n\n")
	if err := s.Check("p", req); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Check = %v", err)
	}
	if res := s.Do(context.Background(), "p", req); res.Status != StatusUnavailable {
		t.Errorf("Do: status %d", res.Status)
	}
	if got := count(m, "p", OutcomeDenied); got != 2 {
		t.Errorf("denied %d, want 2", got)
	}
}
