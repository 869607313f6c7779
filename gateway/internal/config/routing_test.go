package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const twoUpstreams = `
version: 1
upstreams:
  - name: a
    base_url: http://127.0.0.1:9/v1
    max_concurrent: 8
    breaker: {}
  - name: b
    base_url: http://127.0.0.1:10/v1
    breaker: {failures: 3, open_for: 10s}
`

func TestParseRoutingDefaults(t *testing.T) {
	p, err := Parse([]byte(twoUpstreams+`
routes:
  - models: [big]
    upstreams: [{name: a, weight: 3}, {name: b}]
    fallback_models: [small]
  - models: [small, "s-*"]
    upstream: b
    retry: {attempts: 4, backoff: 10ms, max_backoff: 100ms}
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	r := p.Routes[0]
	if len(r.Upstreams) != 2 || r.Upstreams[0] != (RouteUpstream{"a", 3}) || r.Upstreams[1] != (RouteUpstream{"b", 1}) {
		t.Errorf("upstreams %+v, want a×3, b×1 (weight defaults to 1)", r.Upstreams)
	}
	if r.Retry != (Retry{Attempts: DefaultRetryAttempts, Backoff: DefaultRetryBackoff, MaxBackoff: DefaultRetryMaxBackoff}) {
		t.Errorf("retry defaults %+v", r.Retry)
	}
	if len(r.FallbackModels) != 1 || r.FallbackModels[0] != "small" {
		t.Errorf("fallbacks %v", r.FallbackModels)
	}
	r = p.Routes[1]
	if len(r.Upstreams) != 1 || r.Upstreams[0] != (RouteUpstream{"b", 1}) {
		t.Errorf("upstream: b became %+v, want [{b 1}]", r.Upstreams)
	}
	if r.Retry != (Retry{Attempts: 4, Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}) {
		t.Errorf("retry %+v", r.Retry)
	}
	a, b := p.Upstreams[0], p.Upstreams[1]
	if a.MaxConcurrent != 8 || a.Breaker == nil || *a.Breaker != (Breaker{DefaultBreakerFailures, DefaultBreakerOpenFor}) {
		t.Errorf("a: max_concurrent %d breaker %+v", a.MaxConcurrent, a.Breaker)
	}
	if b.MaxConcurrent != 0 || b.Breaker == nil || *b.Breaker != (Breaker{3, 10 * time.Second}) {
		t.Errorf("b: max_concurrent %d breaker %+v", b.MaxConcurrent, b.Breaker)
	}
	// Without a breaker section there is no breaker.
	p, err = Parse([]byte(valid), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Upstreams[0].Breaker != nil {
		t.Errorf("breaker %+v without a breaker section", p.Upstreams[0].Breaker)
	}
	for model, want := range map[string]int{"big": 0, "small": 1, "s-x": 1, "nothing": -1} {
		p, _ := Parse([]byte(twoUpstreams+"routes: [{models: [big], upstream: a}, {models: [small, \"s-*\"], upstream: b}]\n"), env(nil))
		if got := p.RouteFor(model); got != want {
			t.Errorf("RouteFor(%q) = %d, want %d", model, got, want)
		}
	}
}

func TestParseRoutingProblems(t *testing.T) {
	tests := []struct {
		name   string
		routes string
		want   []string
	}{
		{"upstream and upstreams", `
  - models: [m]
    upstream: a
    upstreams: [{name: b}]`, []string{"routes[0].upstream: and upstreams are exclusive"}},
		{"neither", `
  - models: [m]`, []string{"routes[0].upstream: is required (or upstreams"}},
		{"bad upstreams entries", `
  - models: [m]
    upstreams: [{name: a, weight: -1}, {name: nope}, {name: a, weight: 10001}, {weight: 2}]`, []string{
			"routes[0].upstreams[0].weight: must be between 1 and 10000, got -1",
			"routes[0].upstreams[1].name: names no upstream: \"nope\" (declared: \"a\", \"b\")",
			"routes[0].upstreams[2].name: \"a\" is already listed at upstreams[0]",
			"routes[0].upstreams[2].weight: must be between 1 and 10000, got 10001",
			"routes[0].upstreams[3].name: is required",
		}},
		{"retry out of range", `
  - models: [m]
    upstream: a
    retry: {attempts: 11, backoff: 500us, max_backoff: 2m}`, []string{
			"routes[0].retry.attempts: must be between 1 (no retries) and 10, got 11",
			"routes[0].retry.max_backoff: must be between 1ms and 1m, got 2m0s",
			"routes[0].retry.backoff: must be between 1ms and retry.max_backoff (2m0s), got 500µs",
		}},
		{"negative attempts", `
  - models: [m]
    upstream: a
    retry: {attempts: -1}`, []string{"routes[0].retry.attempts: must be between 1 (no retries) and 10, got -1"}},
		{"backoff above max_backoff", `
  - models: [m]
    upstream: a
    retry: {backoff: 3s}`, []string{"routes[0].retry.backoff: must be between 1ms and retry.max_backoff (2s), got 3s"}},
		{"fallbacks", `
  - models: [m]
    upstream: a
    fallback_models: ["", "x-*", n, n, ghost, m]
  - models: [n]
    upstream: b`, []string{
			"routes[0].fallback_models[0]: must not be empty",
			"routes[0].fallback_models[1]: \"x-*\" is a pattern; a fallback is one model name",
			"routes[0].fallback_models[3]: \"n\" is already listed at fallback_models[2]",
			"routes[0].fallback_models[4]: no route serves model \"ghost\"",
			"routes[0].fallback_models[5]: \"m\" is the route's own model",
		}},
		{"unknown retry field", `
  - models: [m]
    upstream: a
    retry: {tries: 3}`, []string{"routes[0].retry.tries (line 9): unknown field (known: attempts, backoff, max_backoff)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(`
version: 1
upstreams:
  - {name: a, base_url: "http://x"}
  - {name: b, base_url: "http://y"}
routes:`+tt.routes+"\n"), env(nil))
			assertProblems(t, err, tt.want)
		})
	}
}

func TestParseUpstreamResilienceProblems(t *testing.T) {
	_, err := Parse([]byte(`
version: 1
upstreams:
  - name: a
    base_url: http://x
    max_concurrent: -1
    breaker: {failures: 1001, open_for: 10ms}
  - name: b
    base_url: http://y
    breaker: {failures: -2, open_for: 2h}
routes: [{models: [m], upstream: a}]
`), env(nil))
	assertProblems(t, err, []string{
		"upstreams[0].max_concurrent: must not be negative",
		"upstreams[0].breaker.failures: must be between 1 and 1000, got 1001",
		"upstreams[0].breaker.open_for: must be between 100ms and 1h, got 10ms",
		"upstreams[1].breaker.failures: must be between 1 and 1000, got -2",
		"upstreams[1].breaker.open_for: must be between 100ms and 1h, got 2h0m0s",
	})
}

// assertProblems checks that err is Problems listing want, in order.
func assertProblems(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatal("want problems, got none")
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error %T is not Problems: %v", err, err)
	}
	msg := err.Error()
	at := 0
	for _, w := range want {
		i := strings.Index(msg[at:], w)
		if i < 0 {
			t.Fatalf("problems lack %q (in order) in:\n%s", w, msg)
		}
		at += i + len(w)
	}
}
