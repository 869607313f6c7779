package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var acme = &wasmhost.Tenant{ID: "acme", KeyID: "k-1", Plan: "pro", Status: "active", BudgetMicros: -1, MaxTokens: -1}

const zeroTemp = `{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}`

// load loads the plugin with config; cache.lookup answers answer and
// cache.skip "ok", as the host does.
func load(t testing.TB, config, answer string) *plugintest.Plugin {
	t.Helper()
	p := plugintest.Load(t, plugintest.Build(t, "."), config)
	p.Services.AnswerService("cache.lookup", func([]byte) plugintest.Answer { return plugintest.Answer{Body: answer} })
	p.Services.Handle("cache.skip", func([]byte) ([]byte, error) { return []byte("ok"), nil })
	return p
}

// used is what the plugin asked of the cache: the cache.lookup requests
// (dispatched, never called inline: an inline call holds the instance
// while the host waits on Redis or an identical request) and the
// cache.skip reasons.
func used(t testing.TB, p *plugintest.Plugin) (lookups, skips []string) {
	t.Helper()
	for _, c := range p.Services.Calls() {
		if c.Service != "cache.skip" {
			t.Fatalf("inline call %+v, want only cache.skip", c)
		}
		skips = append(skips, c.Request)
	}
	for _, d := range p.Services.Dispatched() {
		if d.Service != "cache.lookup" {
			t.Fatalf("dispatched %+v", d)
		}
		lookups = append(lookups, d.Request)
	}
	return lookups, skips
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	path := plugintest.Build(t, ".")
	// Each load starts an instance (seconds under the race detector): a
	// few of each kind.
	for _, cfg := range []string{
		`{"ttl":"x"}`, `{"ttl":"500us"}`, `{"ttl":"24h0m0.001s"}`,
		`{"scope":"tenants"}`, `{"scope":"shared:a b"}`, `{"scope":"shared:` + strings.Repeat("a", 65) + `"}`,
		`{"when":"sometimes"}`, `{"hit_cost":-0.1}`, `{"hit_cost":1.01}`, `{"tll":"1h"}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			t.Parallel()
			if _, err := plugintest.LoadErr(t, path, cfg); err == nil || !strings.Contains(err.Error(), "cache config") {
				t.Errorf("config %s: %v, want refused", cfg, err)
			}
		})
	}
	for _, cfg := range []string{`{"ttl":"1ms"}`, `{"ttl":"24h","scope":"shared:A-z_0.9","when":"header","coalesce":true,"hit_cost":1}`} {
		t.Run(cfg, func(t *testing.T) {
			t.Parallel()
			if _, err := plugintest.LoadErr(t, path, cfg); err != nil {
				t.Errorf("config %s refused: %v", cfg, err)
			}
		})
	}
}

func TestLookupRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, config string
		headers      map[string]string
		want         string
	}{
		{"defaults", `{}`, nil, "3600000 tenant - 0"},
		{"ttl and scope", `{"ttl":"1ms","scope":"shared:team"}`, nil, "1 shared:team - 0"},
		{"longest ttl", `{"ttl":"24h"}`, nil, "86400000 tenant - 0"},
		{"coalesce", `{"coalesce":true}`, nil, "3600000 tenant coalesce 0"},
		{"no-cache", `{}`, map[string]string{"Cache-Control": "no-cache"}, "3600000 tenant refresh 0"},
		{"coalesce and no-cache", `{"coalesce":true}`, map[string]string{"Cache-Control": "max-age=0, No-Cache"}, "3600000 tenant coalesce,refresh 0"},
		{"no-cache=field", `{}`, map[string]string{"Cache-Control": `no-cache="x"`}, "3600000 tenant refresh 0"},
		{"other directives", `{}`, map[string]string{"Cache-Control": "max-age=60, no-transform"}, "3600000 tenant - 0"},
		{"hit_cost", `{"hit_cost":0.25}`, nil, "3600000 tenant - 250000"},
		{"hit_cost 1", `{"hit_cost":1}`, nil, "3600000 tenant - 1000000"},
		{"hit_cost rounded", `{"hit_cost":0.0000005}`, nil, "3600000 tenant - 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := load(t, tt.config, "miss")
			// Twice: the request buffer is reused.
			for range 2 {
				res := p.Request(plugintest.Request{Body: zeroTemp, Headers: tt.headers, Tenant: acme})
				if res.Err != nil || res.Rejected || res.Answered {
					t.Fatalf("%+v", res)
				}
			}
			lookups, skips := used(t, p)
			if len(skips) != 0 || len(lookups) != 2 || lookups[0] != tt.want || lookups[1] != tt.want {
				t.Errorf("lookups %q skips %q, want %q twice", lookups, skips, tt.want)
			}
		})
	}
}

// cacheable runs one request and reports whether the plugin looked it up;
// a request not looked up must have been skipped, with reason.
func cacheable(t *testing.T, config string, req plugintest.Request) (bool, string) {
	t.Helper()
	p := load(t, config, "miss")
	req.Tenant = acme
	res := p.Request(req)
	if res.Err != nil || res.Rejected || res.Answered {
		t.Fatalf("%+v", res)
	}
	lookups, skips := used(t, p)
	if len(lookups)+len(skips) != 1 {
		t.Fatalf("lookups %q skips %q: want exactly one of them", lookups, skips)
	}
	if len(skips) == 1 {
		return false, skips[0]
	}
	return true, ""
}

func TestWhichRequests(t *testing.T) {
	t.Parallel()
	body := func(temp string) string {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}]` + temp + `}`
	}
	use := map[string]string{"X-Tollgate-Cache": "use"}
	tests := []struct {
		name, config string
		req          plugintest.Request
		want         bool
		reason       string
	}{
		{"temperature 0", `{}`, plugintest.Request{Body: body(`,"temperature":0`)}, true, ""},
		{"temperature 0.0", `{}`, plugintest.Request{Body: body(`,"temperature":0.0`)}, true, ""},
		{"temperature -0", `{}`, plugintest.Request{Body: body(`,"temperature":-0`)}, true, ""},
		{"temperature 0e3", `{}`, plugintest.Request{Body: body(`,"temperature":0e3`)}, true, ""},
		{"temperature 0.000", `{}`, plugintest.Request{Body: body(`,"temperature":0.000`)}, true, ""},
		{"temperature 0.1", `{}`, plugintest.Request{Body: body(`,"temperature":0.1`)}, false, "nondeterministic"},
		{"temperature 1", `{}`, plugintest.Request{Body: body(`,"temperature":1`)}, false, "nondeterministic"},
		{"temperature 1e-9", `{}`, plugintest.Request{Body: body(`,"temperature":1e-9`)}, false, "nondeterministic"},
		{"temperature 0.0001", `{}`, plugintest.Request{Body: body(`,"temperature":0.0001`)}, false, "nondeterministic"},
		{"temperature absent", `{}`, plugintest.Request{Body: body(``)}, false, "nondeterministic"},
		{"temperature a string", `{}`, plugintest.Request{Body: body(`,"temperature":"0"`)}, false, "nondeterministic"},
		{"temperature null", `{}`, plugintest.Request{Body: body(`,"temperature":null`)}, false, "nondeterministic"},
		{"completions", `{}`, plugintest.Request{Endpoint: "completions", Body: `{"model":"m","prompt":"p","temperature":0}`}, true, ""},
		{"embeddings", `{}`, plugintest.Request{Endpoint: "embeddings", Body: `{"model":"m","input":"x"}`}, true, ""},
		{"embeddings, header mode", `{"when":"header"}`, plugintest.Request{Endpoint: "embeddings", Body: `{"model":"m","input":"x"}`}, false, "not-asked"},
		{"opted in", `{}`, plugintest.Request{Body: body(`,"temperature":1`), Headers: use}, true, ""},
		{"opted in, any case", `{}`, plugintest.Request{Body: body(``), Headers: map[string]string{"X-Tollgate-Cache": " USE "}}, true, ""},
		{"other header value", `{}`, plugintest.Request{Body: body(``), Headers: map[string]string{"X-Tollgate-Cache": "yes"}}, false, "nondeterministic"},
		{"always", `{"when":"always"}`, plugintest.Request{Body: body(`,"temperature":1`)}, true, ""},
		{"header mode, asked", `{"when":"header"}`, plugintest.Request{Body: body(`,"temperature":1`), Headers: use}, true, ""},
		{"header mode, not asked", `{"when":"header"}`, plugintest.Request{Body: body(`,"temperature":0`)}, false, "not-asked"},
		{"no-store", `{}`, plugintest.Request{Body: body(`,"temperature":0`), Headers: map[string]string{"Cache-Control": "no-store"}}, false, "no-store"},
		{"no-store beats use", `{"when":"always"}`, plugintest.Request{Body: body(``),
			Headers: map[string]string{"Cache-Control": "no-cache, NO-STORE", "X-Tollgate-Cache": "use"}}, false, "no-store"},
		{"no-store embeddings", `{}`, plugintest.Request{Endpoint: "embeddings", Body: `{"model":"m","input":"x"}`,
			Headers: map[string]string{"Cache-Control": "no-store"}}, false, "no-store"},
		{"no-storex is not no-store", `{}`, plugintest.Request{Body: body(`,"temperature":0`), Headers: map[string]string{"Cache-Control": "no-storex"}}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, reason := cacheable(t, tt.config, tt.req)
			if got != tt.want || reason != tt.reason {
				t.Errorf("looked up %v (skip %q), want %v (skip %q)", got, reason, tt.want, tt.reason)
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, answer := range []string{"miss", "bypass notenant", "bypass body"} {
		p := load(t, `{}`, answer)
		res := p.Request(plugintest.Request{Body: zeroTemp, Tenant: acme})
		if res.Err != nil || res.Rejected || res.Answered {
			t.Errorf("%q: %+v, want the request to go on", answer, res)
		}
	}
	// A lookup that failed lets the request go upstream.
	p := plugintest.Load(t, plugintest.Build(t, "."), `{}`)
	p.Services.AnswerService("cache.lookup", func([]byte) plugintest.Answer { return plugintest.Answer{Status: plugintest.Unavailable} })
	if res := p.Request(plugintest.Request{Body: zeroTemp, Tenant: acme}); res.Err != nil || res.Rejected || res.Answered {
		t.Errorf("unavailable: %+v", res)
	}
	// A hit answers RESPOND with the answer the host set. The fake
	// service cannot set the request's answer, so RESPOND here is the
	// pipeline's "RESPOND without an answer" failure: the verdict is
	// RESPOND, and no other answer leads to it.
	p = load(t, `{}`, "hit 1500")
	res := p.Request(plugintest.Request{Body: zeroTemp, Tenant: acme})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "RESPOND without an answer") {
		t.Errorf("hit: %+v, want the RESPOND verdict", res)
	}
}
