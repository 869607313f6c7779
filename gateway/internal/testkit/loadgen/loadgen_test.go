package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

const chatPath = "/v1/chat/completions"

// countingServer starts an httptest server running h and counts requests
// and new connections.
type countingServer struct {
	*httptest.Server
	requests atomic.Int64
	conns    atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	cs := &countingServer{}
	cs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.requests.Add(1)
		h(w, r)
	}))
	cs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.conns.Add(1)
		}
	}
	cs.Start()
	t.Cleanup(cs.Close)
	return cs
}

func okJSON(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
}

func run(t *testing.T, cfg Config) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

func TestNonStreamingCounts(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	var auth []string
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		bodies = append(bodies, m)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		okJSON(w, r)
	})
	res := run(t, Config{
		URL:         srv.URL + chatPath,
		Concurrency: 4,
		Requests:    200,
		Warmup:      3,
		MaxTokens:   7,
		Headers:     []Header{{Name: "Authorization", Value: "Bearer k"}},
		Label:       "direct",
	})
	if res.Count != 200 || res.Successes != 200 || res.Failures != 0 {
		t.Fatalf("count=%d successes=%d failures=%d, want 200/200/0 (errors %v)", res.Count, res.Successes, res.Failures, res.Errors)
	}
	if got := srv.requests.Load(); got != 200+4*3 {
		t.Errorf("server saw %d requests, want %d", got, 200+4*3)
	}
	if got := srv.conns.Load(); got != 4 {
		t.Errorf("server saw %d connections, want 4 (one keep-alive connection per worker)", got)
	}
	if res.Label != "direct" || res.Concurrency != 4 || res.Stream {
		t.Errorf("result echo wrong: %+v", res)
	}
	if res.Latency.Samples != 200 || res.Latency.P50 <= 0 || res.Latency.P50 > res.Latency.P99 || res.Latency.P99 > res.Latency.Max {
		t.Errorf("latency percentiles inconsistent: %+v", res.Latency)
	}
	if res.RequestsPerSec <= 0 || res.TTFT != nil || res.StreamTotal != nil {
		t.Errorf("rps=%v ttft=%v total=%v", res.RequestsPerSec, res.TTFT, res.StreamTotal)
	}
	mu.Lock()
	defer mu.Unlock()
	if bodies[0]["model"] != DefaultModel || bodies[0]["max_tokens"] != 7.0 || bodies[0]["stream"] != nil {
		t.Errorf("unexpected generated body %v", bodies[0])
	}
	if auth[0] != "Bearer k" {
		t.Errorf("Authorization = %q", auth[0])
	}
}

func TestFailuresCounted(t *testing.T) {
	var n atomic.Int64
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 == 0 {
			http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
			return
		}
		okJSON(w, r)
	})
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 2, Requests: 60})
	if res.Count != 60 || res.Failures != 20 || res.Successes != 40 {
		t.Fatalf("count=%d failures=%d successes=%d, want 60/20/40", res.Count, res.Failures, res.Successes)
	}
	if len(res.Errors) != 1 || res.Errors[0].Count != 20 || !strings.HasPrefix(res.Errors[0].Message, "HTTP 500: ") ||
		!strings.Contains(res.Errors[0].Message, "boom") {
		t.Fatalf("errors = %+v", res.Errors)
	}
	if res.Latency.Samples != 40 {
		t.Errorf("latency samples = %d, want only the 40 successes", res.Latency.Samples)
	}
}

func TestTransportErrorsCounted(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	res := run(t, Config{URL: "http://" + addr + chatPath, Concurrency: 2, Requests: 6})
	if res.Count != 6 || res.Failures != 6 || len(res.Errors) == 0 {
		t.Fatalf("count=%d failures=%d errors=%v", res.Count, res.Failures, res.Errors)
	}
}

// sseHandler streams a role-only chunk at once, then tokens content deltas
// after firstDelay and every interDelay, then optionally [DONE].
func sseHandler(firstDelay, interDelay time.Duration, tokens int, done bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fl := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n")
		fl.Flush()
		time.Sleep(firstDelay)
		for i := range tokens {
			if i > 0 {
				time.Sleep(interDelay)
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok%d \"}}]}\n\n", i)
			fl.Flush()
		}
		if done {
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		}
	}
}

func TestStreamingTTFT(t *testing.T) {
	const first, inter, tokens = 30 * time.Millisecond, 5 * time.Millisecond, 5
	var streamField atomic.Value
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		streamField.Store(fmt.Sprint(m["stream"]))
		r.Body = io.NopCloser(strings.NewReader(""))
		sseHandler(first, inter, tokens, true)(w, r)
	})
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 3, Requests: 12, Warmup: 1, Stream: true})
	if res.Count != 12 || res.Failures != 0 {
		t.Fatalf("count=%d failures=%d errors=%v", res.Count, res.Failures, res.Errors)
	}
	if got := streamField.Load(); got != "true" {
		t.Errorf(`body "stream" = %v, want true`, got)
	}
	if got := srv.conns.Load(); got != 3 {
		t.Errorf("server saw %d connections, want 3 (streams must return connections to the pool)", got)
	}
	if res.TTFT == nil || res.StreamTotal == nil {
		t.Fatal("stream result lacks TTFT or total")
	}
	firstUS := float64(first.Microseconds())
	minTotalUS := float64((first + (tokens-1)*inter).Microseconds())
	if res.TTFT.Min < firstUS {
		t.Errorf("TTFT min %.0fµs < server first-token delay %.0fµs: role-only chunk counted?", res.TTFT.Min, firstUS)
	}
	if res.TTFT.P50 >= res.StreamTotal.P50 || res.TTFT.Max >= res.StreamTotal.Max {
		t.Errorf("TTFT %+v not below total %+v", *res.TTFT, *res.StreamTotal)
	}
	if res.StreamTotal.Min < minTotalUS {
		t.Errorf("total min %.0fµs < %.0fµs the server takes", res.StreamTotal.Min, minTotalUS)
	}
	if res.Latency.Min < res.StreamTotal.Min {
		t.Errorf("latency (to EOF) min %.0fµs < total (to [DONE]) min %.0fµs", res.Latency.Min, res.StreamTotal.Min)
	}
}

// TestStreamSampleOrdering checks every single stream, not just the
// percentiles: first-token delay ≤ TTFT < [DONE] ≤ end of body, and
// [DONE] no sooner than the server's last token.
func TestStreamSampleOrdering(t *testing.T) {
	const first, inter, tokens = 20 * time.Millisecond, 5 * time.Millisecond, 4
	srv := newCountingServer(t, sseHandler(first, inter, tokens, true))
	cfg, err := normalise(Config{URL: srv.URL + chatPath, Requests: 1, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := defaultBody(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := newWorker(cfg, client, body)
	defer w.release()
	for i := range 5 {
		s, err := w.once()
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		// The server writes the last token (tokens-1)*inter after the first,
		// but a first token delivered late (a busy machine) narrows the gap
		// the client sees, so the bound on total is from the server's
		// timeline, not from the measured ttft.
		if s.ttft < first || s.total <= s.ttft || s.total < first+(tokens-1)*inter || s.latency < s.total {
			t.Errorf("stream %d: ttft %v, total %v, latency %v: want %v ≤ ttft < total, %v ≤ total ≤ latency",
				i, s.ttft, s.total, s.latency, first, first+(tokens-1)*inter)
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("%d connections for 5 sequential streams, want 1", got)
	}
}

func TestStreamWithoutDoneFails(t *testing.T) {
	srv := newCountingServer(t, sseHandler(0, 0, 2, false))
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 1, Requests: 4, Stream: true})
	if res.Count != 4 || res.Failures != 4 || len(res.Errors) != 1 || res.Errors[0].Message != errNoDone.Error() {
		t.Fatalf("count=%d failures=%d errors=%+v", res.Count, res.Failures, res.Errors)
	}
}

func TestStreamWithoutTokenFails(t *testing.T) {
	srv := newCountingServer(t, sseHandler(0, 0, 0, true))
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 1, Requests: 3, Stream: true})
	if res.Failures != 3 || len(res.Errors) != 1 || res.Errors[0].Message != errNoToken.Error() {
		t.Fatalf("failures=%d errors=%+v", res.Failures, res.Errors)
	}
}

func TestStreamErrorStatus(t *testing.T) {
	srv := newCountingServer(t, func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "rate limited", http.StatusTooManyRequests)
	})
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 2, Requests: 4, Stream: true})
	if res.Failures != 4 || len(res.Errors) != 1 || res.Errors[0].Message != "HTTP 429: rate limited" {
		t.Fatalf("failures=%d errors=%+v", res.Failures, res.Errors)
	}
	// Two workers share the client's pool: one or two connections, never
	// one per request (error bodies are drained and connections reused).
	if got := srv.conns.Load(); got < 1 || got > 2 {
		t.Errorf("%d connections for 4+warmup requests at concurrency 2, want 1 or 2", got)
	}
}

func TestDurationMode(t *testing.T) {
	srv := newCountingServer(t, okJSON)
	const d = 300 * time.Millisecond
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 2, Duration: d, Warmup: 5})
	if res.Count == 0 || res.Failures != 0 {
		t.Fatalf("count=%d failures=%d", res.Count, res.Failures)
	}
	if res.ElapsedSeconds < d.Seconds() {
		t.Errorf("elapsed %.3fs < %v", res.ElapsedSeconds, d)
	}
	if got := srv.requests.Load(); got != int64(res.Count)+2*5 {
		t.Errorf("server saw %d requests, want count %d + warmup 10", got, res.Count)
	}
}

func TestRawBodyAndLegacyCompletions(t *testing.T) {
	var got atomic.Value
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		okJSON(w, r)
	})
	run(t, Config{URL: srv.URL + chatPath, Requests: 1, Body: []byte(`{"raw":1}`)})
	if got.Load() != `{"raw":1}` {
		t.Errorf("raw body = %v", got.Load())
	}
	run(t, Config{URL: srv.URL + "/v1/completions", Requests: 1, Model: "m"})
	if s := got.Load().(string); !strings.Contains(s, `"prompt":`) || strings.Contains(s, `"messages"`) || !strings.Contains(s, `"model":"m"`) {
		t.Errorf("legacy completions body = %s", s)
	}
}

func TestCancelReturnsPartialResult(t *testing.T) {
	srv := newCountingServer(t, okJSON)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, Config{URL: srv.URL + chatPath, Concurrency: 2, Duration: time.Hour})
	if err == nil {
		t.Fatal("want context error")
	}
	if res.Count == 0 {
		t.Error("want a partial result")
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{URL: "http://127.0.0.1:1/x"},
		{URL: "http://127.0.0.1:1/x", Requests: 1, Duration: time.Second},
		{URL: "ftp://127.0.0.1:1/x", Requests: 1},
		{URL: "http://127.0.0.1:1/x", Requests: 1, Concurrency: -1},
	} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v) succeeded, want error", cfg)
		}
	}
}

func TestParseHeader(t *testing.T) {
	h, err := ParseHeader("Authorization:  Bearer a:b ")
	if err != nil || h.Name != "Authorization" || h.Value != "Bearer a:b" {
		t.Fatalf("got %+v, %v", h, err)
	}
	if _, err := ParseHeader("nocolon"); err == nil {
		t.Error("want error")
	}
}

func TestClassifyLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		want sseLine
	}{
		{"data: [DONE]\n", lineDone},
		{"data:[DONE]\r\n", lineDone},
		{`data: {"choices":[{"delta":{"role":"assistant","content":""}}]}` + "\n", lineOther},
		{`data: {"choices":[{"delta":{"content":null}}]}`, lineOther},
		{`data: {"choices":[{"delta":{"content":"Hi"}}]}` + "\n", lineToken},
		{`data: {"choices":[{"delta":{"content": "Hi"}}]}`, lineToken},
		{`data: {"choices":[{"text":"Hi","index":0}]}`, lineToken},
		{`data: {"a":{"content":""},"b":{"content":"x"}}`, lineToken},
		{`event: message`, lineOther},
		{`: keep-alive`, lineOther},
		{``, lineOther},
	} {
		if got := classifyLine([]byte(tc.line)); got != tc.want {
			t.Errorf("classifyLine(%q) = %d, want %d", tc.line, got, tc.want)
		}
	}
}

func TestSummarise(t *testing.T) {
	d := make([]time.Duration, 100)
	for i := range d {
		d[len(d)-1-i] = time.Duration(i+1) * time.Millisecond
	}
	p := summarise(d)
	want := Percentiles{Samples: 100, Min: 1000, Mean: 50500, P50: 50000, P90: 90000, P95: 95000, P99: 99000, Max: 100000}
	if p != want {
		t.Errorf("summarise = %+v, want %+v", p, want)
	}
	if (summarise(nil) != Percentiles{}) {
		t.Error("empty input should give zero Percentiles")
	}
	one := summarise([]time.Duration{1500 * time.Nanosecond})
	if one.P50 != 1.5 || one.P99 != 1.5 || one.Max != 1.5 {
		t.Errorf("single sample = %+v", one)
	}
}

// TestSteadyStateAllocations keeps the generator's own overhead small: a
// non-streaming request allocates nothing once warm, a stream only what
// fasthttp needs for its body reader. The server is fasthttp too, so its
// own allocations do not blur the count.
func TestSteadyStateAllocations(t *testing.T) {
	for _, tc := range []struct {
		stream    bool
		payload   string
		maxAllocs float64
	}{
		{false, `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`, 1},
		{true, "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", 8},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		payload := []byte(tc.payload)
		srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(payload) }}
		go func() { _ = srv.Serve(ln) }()
		cfg, err := normalise(Config{URL: "http://" + ln.Addr().String() + chatPath, Requests: 1, Stream: tc.stream})
		if err != nil {
			t.Fatal(err)
		}
		client, err := newClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		body, err := defaultBody(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := newWorker(cfg, client, body)
		allocs := testing.AllocsPerRun(300, func() {
			if _, err := w.once(); err != nil {
				t.Fatal(err)
			}
		})
		w.release()
		_ = srv.Shutdown()
		if allocs > tc.maxAllocs {
			t.Errorf("stream=%v: %.0f allocations per request, want ≤ %.0f", tc.stream, allocs, tc.maxAllocs)
		}
	}
}

// TestUniqueBodies: with Unique every request, warmup included, sends a
// body no other request of the run sent.
func TestUniqueBodies(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	srv := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen[string(b)]++
		mu.Unlock()
		okJSON(w, r)
	})
	res := run(t, Config{URL: srv.URL + chatPath, Concurrency: 4, Requests: 100, Warmup: 2, Unique: true})
	if res.Successes != 100 {
		t.Fatalf("%+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 108 {
		t.Fatalf("%d distinct bodies for 108 requests", len(seen))
	}
	for b, n := range seen {
		if n != 1 || strings.Contains(b, UniqueMark) || !json.Valid([]byte(b)) {
			t.Fatalf("body sent %d times: %s", n, b)
		}
	}
}
