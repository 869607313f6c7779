package main

import (
	"path"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

// FuzzAPIKey runs the built plugin on requests with fuzzed Authorization
// and X-Api-Key headers (empty: absent). The key passed to the tenant
// service is exactly what the rule says — "Bearer KEY" (scheme in any
// case, KEY trimmed) when Authorization is present, else X-Api-Key
// trimmed — a request without one is a 401 missing_api_key that calls no
// service, only the known key gets through, and no key reaches the log.
func FuzzAPIKey(f *testing.F) {
	f.Add("Bearer tg_good", "")
	f.Add("bearer  tg_good\t", "tg_bad")
	f.Add("Basic tg_good", "tg_good")
	f.Add("", " tg_good ")
	f.Add("Bearer", "tg_good")
	f.Add("Bearer tg_good tg_good", "")
	f.Add("BEARER \u00a0tg_good\u2003", "")
	f.Add("", "")
	p := load(f, "")
	f.Fuzz(func(t *testing.T, auth, apiKey string) {
		h := map[string]string{}
		if auth != "" {
			h["Authorization"] = auth
		}
		if apiKey != "" {
			h["X-Api-Key"] = apiKey
		}
		before := len(p.Services.Calls())
		res := p.Request(plugintest.Request{Model: "mock-1", Body: chat, Headers: h, Messages: 1})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		// The rule, applied to what the headers hold once fasthttp has
		// stored them (it turns CR and LF into spaces).
		var fh fasthttp.RequestHeader
		for k, v := range h {
			fh.Set(k, v)
		}
		a, k := string(fh.Peek("Authorization")), string(fh.Peek("X-Api-Key"))
		want := strings.TrimSpace(k)
		if auth != "" {
			want = ""
			if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
				want = strings.TrimSpace(a[7:])
			}
		}
		calls := p.Services.Calls()[before:]
		switch {
		case want == "":
			if !res.Rejected || res.Status != 401 || res.Code != "missing_api_key" || len(calls) != 0 {
				t.Fatalf("Authorization %q, X-Api-Key %q: %+v, %d service calls", auth, apiKey, res, len(calls))
			}
		case len(calls) != 1 || calls[0].Service != "tenant.resolve" || calls[0].Request != want:
			t.Fatalf("Authorization %q, X-Api-Key %q: resolved %+v, want key %q", auth, apiKey, calls, want)
		case (want == "tg_good") == res.Rejected, res.Rejected && res.Code != "invalid_api_key":
			t.Fatalf("Authorization %q, X-Api-Key %q: %+v", auth, apiKey, res)
		}
		if want != "" && len(want) > 3 && strings.Contains(p.Logs(), want) {
			t.Fatalf("the key %q is in the log", want)
		}
	})
}

// FuzzModelAllowed checks modelAllowed, which matches the common pattern
// shapes itself, against path.Match on every pattern.
func FuzzModelAllowed(f *testing.F) {
	for _, c := range [][2]string{
		{"mock-*", "mock-1"}, {"mock-*", "mock-"}, {"mock-*", "moc"}, {"mock-*", "mock-a/b"},
		{"gpt-4o\nmock-*", "gpt-4o"}, {"gpt-4o", "gpt-4o-mini"}, {"*", "a/b"}, {"*", ""},
		{"m?ck", "mock"}, {"[a-z]*", "x"}, {"a\\*", "a*"}, {"", "x"}, {"\n", ""}, {"org/*", "org/m"},
		{"[", "["}, {"mock-*\n", "mock-1"},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, allowed, model string) {
		// One pattern per line; a final newline ends the last one.
		want := allowed == ""
		for _, p := range strings.Split(strings.TrimSuffix(allowed, "\n"), "\n") {
			if ok, _ := path.Match(p, model); ok && allowed != "" {
				want = true
			}
		}
		if got := modelAllowed(model, []byte(allowed)); got != want {
			t.Fatalf("modelAllowed(%q, %q) = %v, path.Match says %v", model, allowed, got, want)
		}
	})
}
