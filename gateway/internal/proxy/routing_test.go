package proxy

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	okA = "from a"
	okB = "from b"
)

func TestRetryPrefersAnotherUpstream(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{status: 503})
	b := newFakeUpstream(t, "b", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "")+upstreamYAML("b", b.url, ""),
		`- {models: [m], upstreams: [{name: a}, {name: b}]}`))
	const n = 40
	retried := 0
	for range n {
		r := g.chat(t, "m", false)
		if r.status != 200 || !strings.Contains(r.body, okB) {
			t.Fatalf("%s: %d %s, want b's reply", r.id, r.status, r.body)
		}
		seq := h.of(r.id)
		up, attempts := g.log.served(t, r.id)
		switch {
		case slices.Equal(seq, []string{"b"}):
		case slices.Equal(seq, []string{"a", "b"}):
			retried++
		default:
			t.Fatalf("%s went to %v; want [b] or [a b] (a retry goes to the other upstream)", r.id, seq)
		}
		if up != "b" || attempts != int64(len(seq)) {
			t.Errorf("%s: access log says upstream %q after %d attempts; the upstreams saw %v", r.id, up, attempts, seq)
		}
	}
	if retried == 0 || retried == n {
		t.Fatalf("%d of %d requests went to a first: the weights were ignored", retried, n)
	}
	m := g.metrics(t, "tollgate_upstream_")
	want := map[string]string{
		`tollgate_upstream_attempts_total{outcome="server_error",upstream="a"}`: fmt.Sprint(retried),
		`tollgate_upstream_attempts_total{outcome="success",upstream="a"}`:      "0",
		`tollgate_upstream_attempts_total{outcome="success",upstream="b"}`:      fmt.Sprint(n),
		`tollgate_upstream_retries_total{upstream="b"}`:                         fmt.Sprint(retried),
		`tollgate_upstream_retries_total{upstream="a"}`:                         "0",
		`tollgate_upstream_inflight_requests{upstream="a"}`:                     "0",
		`tollgate_upstream_inflight_requests{upstream="b"}`:                     "0",
	}
	checkMetrics(t, m, want)
	r := g.metrics(t, "tollgate_requests_total")
	checkMetrics(t, r, map[string]string{
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="m",status="200",upstream="b"}`: fmt.Sprint(n),
	})
}

func checkMetrics(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s", k, got[k], v)
		}
	}
}

func TestRetryExactAttempts(t *testing.T) {
	tests := []struct {
		name     string
		retry    string
		script   []step
		status   int
		contains string
		attempts int
		minTime  time.Duration
		header   [2]string
	}{
		{"two 500s then success", "{attempts: 3, backoff: 20ms, max_backoff: 1s}", []step{{status: 500}, {status: 500}},
			200, okA, 3, 30 * time.Millisecond, [2]string{}},
		{"every attempt fails: the last upstream error passes", "{attempts: 2}", []step{{status: 500}, {status: 502}, {status: 503}},
			502, `"a says 502"`, 2, 0, [2]string{}},
		{"a 400 is not retried", "{attempts: 3}", []step{{status: 400}},
			400, `"a says 400"`, 1, 0, [2]string{}},
		{"a 404 is not retried", "{attempts: 3}", []step{{status: 404}},
			404, `"a says 404"`, 1, 0, [2]string{}},
		{"attempts 1: no retry", "{attempts: 1}", []step{{status: 503}},
			503, `"a says 503"`, 1, 0, [2]string{}},
		{"429 with Retry-After within max_backoff", "{attempts: 2, max_backoff: 2s}", []step{{status: 429, retryAfter: "1"}},
			200, okA, 2, time.Second, [2]string{}},
		{"429 with Retry-After over max_backoff: passed through", "{attempts: 3, max_backoff: 1s}", []step{{status: 429, retryAfter: "5"}},
			429, `"a says 429"`, 1, 0, [2]string{"Retry-After", "5"}},
		{"503 then stream", "{}", []step{{status: 503}, {stream: true}},
			200, "a1 ", 2, 25 * time.Millisecond, [2]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &hits{}
			a := newFakeUpstream(t, "a", h, step{}, tt.script...)
			g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, ""), "- {models: [m], upstream: a, retry: "+tt.retry+"}"))
			start := time.Now()
			r := g.chat(t, "m", tt.name == "503 then stream")
			took := time.Since(start)
			if r.status != tt.status || !strings.Contains(r.body, tt.contains) {
				t.Fatalf("%d %q, want %d with %q", r.status, r.body, tt.status, tt.contains)
			}
			if got := h.count("a"); got != tt.attempts {
				t.Errorf("upstream received %d requests, want %d", got, tt.attempts)
			}
			if up, n := g.log.served(t, r.id); up != "a" || n != int64(tt.attempts) {
				t.Errorf("access log: upstream %q, %d attempts; want a, %d", up, n, tt.attempts)
			}
			if took < tt.minTime {
				t.Errorf("took %v, want at least %v (backoff / Retry-After)", took, tt.minTime)
			}
			if tt.header[0] != "" && r.header.Get(tt.header[0]) != tt.header[1] {
				t.Errorf("%s: %q, want %q", tt.header[0], r.header.Get(tt.header[0]), tt.header[1])
			}
		})
	}
}

func TestRetryOnConnectionFailureAndTimeout(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		h := &hits{}
		b := newFakeUpstream(t, "b", h, step{})
		g := startTestGateway(t, routingPolicy(upstreamYAML("dead", closedURL(t), "")+upstreamYAML("b", b.url, ""),
			`- {models: [m], upstreams: [{name: dead}, {name: b}]}`))
		second := 0
		for range 20 {
			r := g.chat(t, "m", false)
			if r.status != 200 || !strings.Contains(r.body, okB) {
				t.Fatalf("%d %s", r.status, r.body)
			}
			up, n := g.log.served(t, r.id)
			if up != "b" || (n != 1 && n != 2) {
				t.Fatalf("served by %q after %d attempts", up, n)
			}
			if n == 2 {
				second++
			}
		}
		if second == 0 {
			t.Fatal("no request picked the dead upstream first: the test proves nothing")
		}
		checkMetrics(t, g.metrics(t, "tollgate_upstream_attempts_total"), map[string]string{
			`tollgate_upstream_attempts_total{outcome="unreachable",upstream="dead"}`: fmt.Sprint(second),
			`tollgate_upstream_attempts_total{outcome="success",upstream="b"}`:        "20",
		})
	})
	t.Run("slow first byte", func(t *testing.T) {
		h := &hits{}
		slow := newFakeUpstream(t, "slow", h, step{delay: 2 * time.Second})
		b := newFakeUpstream(t, "b", h, step{stream: true})
		g := startTestGateway(t, routingPolicy(
			upstreamYAML("slow", slow.url, "timeouts: {connect: 1s, first_byte: 150ms, idle: 2s, total: 20s}")+upstreamYAML("b", b.url, ""),
			`- {models: [m], upstreams: [{name: slow}, {name: b}]}`))
		timeouts := 0
		// The set picks at random by weight: 8 requests all to b is 1 in
		// 256, so the run goes on (up to 40) until one went to slow.
		for i := 0; i < 40 && (i < 8 || timeouts == 0); i++ {
			start := time.Now()
			r := g.chat(t, "m", true)
			if r.status != 200 || !strings.Contains(r.body, "b1 ") || !strings.Contains(r.body, "[DONE]") {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if seq := h.of(r.id); slices.Equal(seq, []string{"slow", "b"}) {
				timeouts++
				if took := time.Since(start); took < 150*time.Millisecond {
					t.Errorf("retried after %v, before the first-byte timeout", took)
				}
			} else if !slices.Equal(seq, []string{"b"}) {
				t.Fatalf("went to %v", seq)
			}
		}
		if timeouts == 0 {
			t.Fatal("no request went to the slow upstream first")
		}
		checkMetrics(t, g.metrics(t, "tollgate_upstream_attempts_total"), map[string]string{
			`tollgate_upstream_attempts_total{outcome="timeout",upstream="slow"}`: fmt.Sprint(timeouts),
		})
	})
	t.Run("a timeout is not retried on the same upstream", func(t *testing.T) {
		h := &hits{}
		slow := newFakeUpstream(t, "slow", h, step{delay: 2 * time.Second})
		g := startTestGateway(t, routingPolicy(upstreamYAML("slow", slow.url, "timeouts: {connect: 1s, first_byte: 150ms, idle: 2s, total: 20s}"),
			`- {models: [m], upstream: slow, retry: {attempts: 3}}`))
		start := time.Now()
		r := g.chat(t, "m", false)
		if r.status != 504 || !strings.Contains(r.body, `"code":"upstream_timeout"`) {
			t.Fatalf("%d %s, want 504 upstream_timeout", r.status, r.body)
		}
		if took := time.Since(start); took > 600*time.Millisecond {
			t.Errorf("took %v: the timed-out request was sent again", took)
		}
		if n := h.count("slow"); n != 1 {
			t.Errorf("upstream received %d requests, want 1", n)
		}
		if _, n := g.log.served(t, r.id); n != 1 {
			t.Errorf("%d attempts, want 1", n)
		}
	})
	t.Run("every attempt unreachable", func(t *testing.T) {
		g := startTestGateway(t, routingPolicy(upstreamYAML("dead", closedURL(t), ""), `- {models: [m], upstream: dead, retry: {attempts: 3, backoff: 1ms}}`))
		r := g.chat(t, "m", false)
		if r.status != 502 || !strings.Contains(r.body, `"code":"upstream_unreachable"`) {
			t.Fatalf("%d %s, want 502 upstream_unreachable", r.status, r.body)
		}
		if _, n := g.log.served(t, r.id); n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		checkMetrics(t, g.metrics(t, "tollgate_upstream_"), map[string]string{
			`tollgate_upstream_attempts_total{outcome="unreachable",upstream="dead"}`: "3",
			`tollgate_upstream_retries_total{upstream="dead"}`:                        "2",
		})
	})
}

func TestNoRetryOnceTheReplyStarted(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{stream: true, events: 1, cut: true})
	b := newFakeUpstream(t, "b", h, step{})
	// b would serve a retry (the fallback): it must see nothing.
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "")+upstreamYAML("b", b.url, ""), `
- {models: [m], upstream: a, fallback_models: [n], retry: {attempts: 5}}
- {models: [n], upstream: b}`))
	for range 3 {
		r := g.chat(t, "m", true)
		if r.status != 200 || !strings.Contains(r.body, "a0 ") || !strings.Contains(r.body, `"code":"upstream_stream_error"`) {
			t.Fatalf("%d %s, want a's event then the gateway's error event", r.status, r.body)
		}
		if strings.Contains(r.body, "[DONE]") {
			t.Fatal("a cut stream claimed [DONE]")
		}
		if seq := h.of(r.id); !slices.Equal(seq, []string{"a"}) {
			t.Fatalf("went to %v, want only a: a started reply is never retried", seq)
		}
		if up, n := g.log.served(t, r.id); up != "a" || n != 1 {
			t.Errorf("access log: %q after %d attempts", up, n)
		}
	}
	if n := h.count("b"); n != 0 {
		t.Errorf("b received %d requests", n)
	}
}

func TestBreakerFastFailsThenProbes(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{status: 500})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "breaker: {failures: 2, open_for: 300ms}"),
		`- {models: [m], upstream: a, retry: {attempts: 1}}`))
	expect := func(status int, contains string, aHits int) reply {
		t.Helper()
		r := g.chat(t, "m", false)
		if r.status != status || !strings.Contains(r.body, contains) {
			t.Fatalf("%d %s, want %d with %q", r.status, r.body, status, contains)
		}
		if n := h.count("a"); n != aHits {
			t.Fatalf("a received %d requests, want %d", n, aHits)
		}
		return r
	}
	expect(500, "a says 500", 1)
	expect(500, "a says 500", 2) // the second consecutive failure opens it
	start := time.Now()
	r := expect(503, `"code":"upstream_unavailable"`, 2)
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("fast fail took %v", took)
	}
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1 (300ms rounded up)", ra)
	}
	if up, n := g.log.served(t, r.id); up != "a" || n != 0 {
		t.Errorf("access log: %q after %d attempts, want no attempt", up, n)
	}
	// After open_for one probe goes; it fails: open again.
	time.Sleep(320 * time.Millisecond)
	expect(500, "a says 500", 3)
	expect(503, "upstream_unavailable", 3)
	// The next probe succeeds. While it runs, every other request fails fast.
	time.Sleep(320 * time.Millisecond)
	gate := make(chan struct{})
	a.set(step{}, step{hold: gate})
	probeDone := make(chan reply)
	go func() { probeDone <- g.chat(t, "m", false) }()
	for h.count("a") != 4 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := g.chat(t, "m", false); r.status != 503 {
				t.Errorf("during the probe: %d %s, want 503", r.status, r.body)
			}
		}()
	}
	wg.Wait()
	if n := h.count("a"); n != 4 {
		t.Fatalf("a received %d requests during the half-open probe, want exactly the probe", n)
	}
	checkMetrics(t, g.metrics(t, "tollgate_upstream_breaker_state"), map[string]string{
		`tollgate_upstream_breaker_state{state="half_open",upstream="a"}`: "1",
		`tollgate_upstream_breaker_state{state="open",upstream="a"}`:      "0",
	})
	close(gate)
	if r := <-probeDone; r.status != 200 || !strings.Contains(r.body, okA) {
		t.Fatalf("probe: %d %s", r.status, r.body)
	}
	expect(200, okA, 5) // closed again
	expect(200, okA, 6)
	checkMetrics(t, g.metrics(t, "tollgate_upstream_"), map[string]string{
		`tollgate_upstream_breaker_state{state="closed",upstream="a"}`:                "1",
		`tollgate_upstream_breaker_transitions_total{state="open",upstream="a"}`:      "2",
		`tollgate_upstream_breaker_transitions_total{state="half_open",upstream="a"}`: "2",
		`tollgate_upstream_breaker_transitions_total{state="closed",upstream="a"}`:    "1",
		`tollgate_upstream_breaker_skips_total{upstream="a"}`:                         "7",
		`tollgate_upstream_attempts_total{outcome="server_error",upstream="a"}`:       "3",
		`tollgate_upstream_attempts_total{outcome="success",upstream="a"}`:            "3",
	})
}

func TestBreakerOpenUpstreamIsSkipped(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{status: 503})
	b := newFakeUpstream(t, "b", h, step{})
	g := startTestGateway(t, routingPolicy(
		upstreamYAML("a", a.url, "breaker: {failures: 2, open_for: 1h}")+upstreamYAML("b", b.url, ""),
		`- {models: [m], upstreams: [{name: a, weight: 5}, {name: b}]}`))
	for h.count("a") < 2 {
		if r := g.chat(t, "m", false); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	for range 30 {
		r := g.chat(t, "m", false)
		if r.status != 200 || !strings.Contains(r.body, okB) {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if up, n := g.log.served(t, r.id); up != "b" || n != 1 {
			t.Fatalf("with a's breaker open: %q after %d attempts, want b at once", up, n)
		}
	}
	if n := h.count("a"); n != 2 {
		t.Errorf("a received %d requests, want the 2 that opened its breaker", n)
	}
}

func TestWeightedDistributionThroughTheGateway(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{})
	b := newFakeUpstream(t, "b", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "")+upstreamYAML("b", b.url, ""),
		`- {models: [m], upstreams: [{name: a, weight: 3}, {name: b, weight: 1}]}`))
	const n = 800
	for range n {
		if r := g.chat(t, "m", false); r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	share := float64(h.count("a")) / n
	if share < 0.69 || share > 0.81 {
		t.Errorf("a served %.3f of the requests, want 0.75 ± 0.06", share)
	}
	if h.count("a")+h.count("b") != n {
		t.Errorf("%d + %d requests, want %d", h.count("a"), h.count("b"), n)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Run("requests wait for a slot", func(t *testing.T) {
		h := &hits{}
		a := newFakeUpstream(t, "a", h, step{delay: 40 * time.Millisecond})
		g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "max_concurrent: 2"), `- {models: [m], upstream: a}`))
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := g.chat(t, "m", false); r.status != 200 {
					t.Errorf("%d %s", r.status, r.body)
				}
			}()
		}
		wg.Wait()
		if p := a.peak.Load(); p != 2 {
			t.Errorf("upstream saw %d requests at once, want 2 (max_concurrent)", p)
		}
		if n := h.count("a"); n != 12 {
			t.Errorf("upstream received %d requests, want 12 (none dropped, none retried)", n)
		}
		m := g.metrics(t, "tollgate_upstream_")
		if m[`tollgate_upstream_concurrency_waits_total{upstream="a"}`] == "0" || m[`tollgate_upstream_max_concurrent{upstream="a"}`] != "2" {
			t.Errorf("metrics %v", m)
		}
		checkMetrics(t, m, map[string]string{`tollgate_upstream_inflight_requests{upstream="a"}`: "0"})
	})
	t.Run("a stream holds its slot; the wait is bounded", func(t *testing.T) {
		h := &hits{}
		a := newFakeUpstream(t, "a", h, step{})
		// A wait for a slot is bounded by the first_byte timeout.
		g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "max_concurrent: 1\ntimeouts: {connect: 1s, first_byte: 200ms, idle: 2s, total: 20s}"),
			`- {models: [m], upstream: a}`))
		a.set(step{}, step{stream: true, events: 4, eventGap: 200 * time.Millisecond})
		streamDone := make(chan reply)
		go func() { streamDone <- g.chat(t, "m", true) }()
		for h.count("a") == 0 {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		r := g.chat(t, "m", false)
		if r.status != 503 || !strings.Contains(r.body, `"code":"upstream_saturated"`) || r.header.Get("Retry-After") != "1" {
			t.Fatalf("while the stream runs: %d %s (Retry-After %q), want 503 upstream_saturated", r.status, r.body, r.header.Get("Retry-After"))
		}
		if took := time.Since(start); took < 190*time.Millisecond || took > 700*time.Millisecond {
			t.Errorf("the saturated request waited %v, want about 200ms", took)
		}
		if s := <-streamDone; s.status != 200 || !strings.Contains(s.body, "[DONE]") {
			t.Fatalf("stream: %d %s", s.status, s.body)
		}
		if r := g.chat(t, "m", false); r.status != 200 {
			t.Fatalf("after the stream: %d %s", r.status, r.body)
		}
		if n := h.count("a"); n != 2 {
			t.Errorf("upstream received %d requests, want 2", n)
		}
		checkMetrics(t, g.metrics(t, "tollgate_upstream_concurrency"), map[string]string{
			`tollgate_upstream_concurrency_waits_total{upstream="a"}`:         "1",
			`tollgate_upstream_concurrency_wait_timeouts_total{upstream="a"}`: "1",
		})
	})
}

func TestFallbackModel(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{status: 503})
	b := newFakeUpstream(t, "b", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url, "")+upstreamYAML("b", b.url, ""), `
- {models: [big], upstream: a, fallback_models: [small]}
- {models: [small], upstream: b}
- {models: [solo], upstream: a, fallback_models: [small], retry: {attempts: 1}}`))
	r := g.chat(t, "big", false)
	if r.status != 200 || !strings.Contains(r.body, okB) {
		t.Fatalf("%d %s, want the fallback's reply", r.status, r.body)
	}
	if seq := h.of(r.id); !slices.Equal(seq, []string{"a", "b"}) {
		t.Fatalf("went to %v, want [a b]", seq)
	}
	if body := h.bodyOf(r.id, "a"); !strings.Contains(body, `"model":"big"`) {
		t.Errorf("a got %s", body)
	}
	if body := h.bodyOf(r.id, "b"); !strings.Contains(body, `"model":"small"`) || strings.Contains(body, "big") {
		t.Errorf("the fallback got %s, want the model replaced by small", body)
	}
	line := g.log.line(t, r.id)
	if line["upstream"].String() != "b" || line["attempts"].Int64() != 2 || line["fallback_model"].String() != "small" || line["model"].String() != "big" {
		t.Errorf("access log %v", line)
	}
	// attempts: 1 leaves no attempt for the fallback.
	r = g.chat(t, "solo", false)
	if r.status != 503 || !strings.Contains(r.body, "a says 503") {
		t.Fatalf("%d %s, want a's 503", r.status, r.body)
	}
	if seq := h.of(r.id); !slices.Equal(seq, []string{"a"}) {
		t.Fatalf("went to %v, want [a]", seq)
	}
}

// A full connection pool (max_connections) is the gateway's own limit: the
// request waits, then gets 503 upstream_saturated, and the upstream's
// breaker does not count it as a failure.
func TestPoolFullIsNotAnUpstreamFailure(t *testing.T) {
	h := &hits{}
	a := newFakeUpstream(t, "a", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("a", a.url,
		"max_connections: 1\nbreaker: {failures: 1, open_for: 30s}\ntimeouts: {connect: 1s, first_byte: 300ms, idle: 2s, total: 20s}"),
		`- {models: [m], upstream: a}`))
	// A stream keeps the only connection (its events 600 ms apart are
	// within the idle timeout) while the next request waits.
	a.set(step{}, step{stream: true, events: 4, eventGap: 600 * time.Millisecond})
	held := make(chan reply)
	go func() { held <- g.chat(t, "m", true) }()
	for h.count("a") != 1 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	r := g.chat(t, "m", false)
	if r.status != 503 || !strings.Contains(r.body, "upstream_saturated") || r.header.Get("Retry-After") != "1" {
		t.Fatalf("with the only connection busy: %d %q Retry-After %q, want 503 upstream_saturated", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := <-held; r.status != 200 {
		t.Fatalf("held request: %d %s", r.status, r.body)
	}
	// failures: 1 would have opened the breaker on a failure.
	if r := g.chat(t, "m", false); r.status != 200 {
		t.Fatalf("after the pool freed: %d %s (breaker opened by the gateway's own limit?)", r.status, r.body)
	}
	checkMetrics(t, g.metrics(t, "tollgate_upstream_"), map[string]string{
		`tollgate_upstream_attempts_total{outcome="pool_full",upstream="a"}`: "1",
		`tollgate_upstream_attempts_total{outcome="timeout",upstream="a"}`:   "0",
		`tollgate_upstream_attempts_total{outcome="success",upstream="a"}`:   "2",
		`tollgate_upstream_breaker_state{state="closed",upstream="a"}`:       "1",
	})
}
