package config

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// RouteUpstream is one upstream of a route and its share of the route's
// requests.
type RouteUpstream struct {
	// Name names an entry of Policy.Upstreams.
	Name string `yaml:"name"`
	// Weight is the upstream's share relative to the route's others
	// (default 1, at most MaxWeight): weights 3 and 1 send about 75% and
	// 25% of the requests.
	Weight int `yaml:"weight"`
}

// Retry bounds the attempts one request may make. Zero means default.
type Retry struct {
	// Attempts is the most attempts per request, the first included
	// (default 2; 1 turns retries off; at most MaxAttempts). Fallback
	// models' attempts count too.
	Attempts int `yaml:"attempts"`
	// Backoff is the base of the exponential wait, with jitter, before an
	// attempt goes to an upstream this request already tried (default
	// 50ms). An attempt to an upstream not yet tried goes at once.
	Backoff time.Duration `yaml:"backoff"`
	// MaxBackoff caps that wait (default 2s). It also caps the upstream's
	// Retry-After: a 429 or 503 asking for a longer pause is not retried on
	// that upstream.
	MaxBackoff time.Duration `yaml:"max_backoff"`
}

// Breaker configures an upstream's circuit breaker. Zero means default.
type Breaker struct {
	// Failures is the number of consecutive failed attempts (no reply in
	// time, no connection, or a 5xx) that opens the breaker (default 5).
	Failures int `yaml:"failures"`
	// OpenFor is how long an open breaker keeps requests away before it
	// lets one probe through (default 30s): the probe's success closes it,
	// its failure opens it for another period.
	OpenFor time.Duration `yaml:"open_for"`
}

// Routing defaults and limits.
const (
	DefaultRetryAttempts   = 2
	DefaultRetryBackoff    = 50 * time.Millisecond
	DefaultRetryMaxBackoff = 2 * time.Second
	DefaultBreakerFailures = 5
	DefaultBreakerOpenFor  = 30 * time.Second

	MaxAttempts       = 10
	MaxWeight         = 10000
	MaxRouteUpstreams = 64
)

func (p *Policy) applyRoutingDefaults() {
	for i := range p.Routes {
		r := &p.Routes[i]
		setDefault(&r.Retry.Attempts, DefaultRetryAttempts)
		setDefault(&r.Retry.Backoff, DefaultRetryBackoff)
		setDefault(&r.Retry.MaxBackoff, DefaultRetryMaxBackoff)
		for j := range r.Upstreams {
			setDefault(&r.Upstreams[j].Weight, 1)
		}
	}
	for i := range p.Upstreams {
		if b := p.Upstreams[i].Breaker; b != nil {
			setDefault(&b.Failures, DefaultBreakerFailures)
			setDefault(&b.OpenFor, DefaultBreakerOpenFor)
		}
	}
}

// validateResilience checks an upstream's max_concurrent and breaker.
func (u *Upstream) validateResilience(at string, ps *Problems) {
	if u.MaxConcurrent < 0 {
		ps.add(at+".max_concurrent", "must not be negative (0: no limit)")
	}
	if b := u.Breaker; b != nil {
		if b.Failures < 1 || b.Failures > 1000 {
			ps.add(at+".breaker.failures", "must be between 1 and 1000, got %d", b.Failures)
		}
		if b.OpenFor < 100*time.Millisecond || b.OpenFor > time.Hour {
			ps.add(at+".breaker.open_for", "must be between 100ms and 1h, got %s", b.OpenFor)
		}
	}
}

// validateRouteTargets checks route i's upstreams and retry policy, and
// sets Upstreams from the upstream shorthand. names maps upstream names to
// their index.
func (p *Policy) validateRouteTargets(i int, names map[string]int, ps *Problems) {
	r := &p.Routes[i]
	at := fmt.Sprintf("routes[%d]", i)
	switch {
	case r.Upstream != "" && len(r.Upstreams) > 0:
		ps.add(at+".upstream", "and upstreams are exclusive: name one upstream, or list several under upstreams")
	case r.Upstream != "":
		if _, ok := names[r.Upstream]; !ok {
			ps.add(at+".upstream", "names no upstream: %q (declared: %s)", r.Upstream, declared(p.Upstreams))
		}
		r.Upstreams = []RouteUpstream{{Name: r.Upstream, Weight: 1}}
	case len(r.Upstreams) == 0:
		ps.add(at+".upstream", "is required (or upstreams: a list of {name, weight})")
	case len(r.Upstreams) > MaxRouteUpstreams:
		ps.add(at+".upstreams", "lists %d upstreams, at most %d are supported", len(r.Upstreams), MaxRouteUpstreams)
	default:
		seen := make(map[string]int, len(r.Upstreams))
		for j, u := range r.Upstreams {
			up := fmt.Sprintf("%s.upstreams[%d]", at, j)
			switch _, ok := names[u.Name]; {
			case u.Name == "":
				ps.add(up+".name", "is required")
			case !ok:
				ps.add(up+".name", "names no upstream: %q (declared: %s)", u.Name, declared(p.Upstreams))
			default:
				if k, dup := seen[u.Name]; dup {
					ps.add(up+".name", "%q is already listed at upstreams[%d]", u.Name, k)
				}
				seen[u.Name] = j
			}
			if u.Weight < 1 || u.Weight > MaxWeight {
				ps.add(up+".weight", "must be between 1 and %d, got %d", MaxWeight, u.Weight)
			}
		}
	}
	rt := r.Retry
	if rt.Attempts < 1 || rt.Attempts > MaxAttempts {
		ps.add(at+".retry.attempts", "must be between 1 (no retries) and %d, got %d", MaxAttempts, rt.Attempts)
	}
	if rt.MaxBackoff < time.Millisecond || rt.MaxBackoff > time.Minute {
		ps.add(at+".retry.max_backoff", "must be between 1ms and 1m, got %s", rt.MaxBackoff)
	}
	if rt.Backoff < time.Millisecond || rt.Backoff > rt.MaxBackoff {
		ps.add(at+".retry.backoff", "must be between 1ms and retry.max_backoff (%s), got %s", rt.MaxBackoff, rt.Backoff)
	}
}

// validateFallbacks checks every route's fallback_models once all routes
// are known: each must be a model name some route serves.
func (p *Policy) validateFallbacks(ps *Problems) {
	for i, r := range p.Routes {
		seen := make(map[string]int, len(r.FallbackModels))
		for j, m := range r.FallbackModels {
			fp := fmt.Sprintf("routes[%d].fallback_models[%d]", i, j)
			if m == "" {
				ps.add(fp, "must not be empty")
				continue
			}
			if strings.ContainsAny(m, `*?[\`) {
				ps.add(fp, "%q is a pattern; a fallback is one model name", m)
				continue
			}
			if k, dup := seen[m]; dup {
				ps.add(fp, "%q is already listed at fallback_models[%d]", m, k)
				continue
			}
			seen[m] = j
			k := p.RouteFor(m)
			switch {
			case k < 0:
				ps.add(fp, "no route serves model %q", m)
			case k == i && len(r.Models) == 1 && r.Models[0] == m:
				ps.add(fp, "%q is the route's own model: a fallback to itself never runs", m)
			}
		}
	}
}

// RouteFor returns the index of the route that serves model — the route
// listing it by name, else the first whose pattern matches — or -1.
func (p *Policy) RouteFor(model string) int {
	for i, r := range p.Routes {
		for _, m := range r.Models {
			if m == model {
				return i
			}
		}
	}
	for i, r := range p.Routes {
		for _, m := range r.Models {
			if strings.ContainsAny(m, `*?[\`) {
				if ok, _ := path.Match(m, model); ok {
					return i
				}
			}
		}
	}
	return -1
}
