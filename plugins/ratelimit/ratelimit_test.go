package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var acme = &wasmhost.Tenant{ID: "acme", KeyID: "k-1", Plan: "pro", Status: "active",
	RPM: 60, TPM: 1000, BudgetMicros: -1, MaxTokens: -1, PlanRPM: 60, PlanTPM: 1000, KeyRPM: 5, KeyTPM: -1}

func load(t testing.TB, config string, answer string) *plugintest.Plugin {
	t.Helper()
	p := plugintest.Load(t, plugintest.Build(t, "."), config)
	p.Services.Handle("ratelimit.admit", func([]byte) ([]byte, error) { return []byte(answer), nil })
	return p
}

func TestAdmitRequestAndHeaders(t *testing.T) {
	p := load(t, `{"models":[{"match":"gpt-4*","rpm":7},{"match":"*","tpm":99}],"anonymous":{"rpm":3}}`, "allowed")
	res := p.Request(plugintest.Request{Model: "gpt-4o", MaxTokens: 100, Tenant: acme})
	if res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	calls := p.Services.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls %+v", calls)
	}
	// The estimate: no prompt estimate in this harness (0) + max_tokens;
	// the limit lines come from the config, the host fills them in.
	want := "fail_open 1 100\ntenant\nkey\nmodel gpt-4* 7 0\nmodel * 0 99\nanon 3 0\n"
	if calls[0].Request != want {
		t.Errorf("admit request %q, want %q", calls[0].Request, want)
	}
	p.Request(plugintest.Request{})
	if got := p.Services.Calls()[1].Request; got != "fail_open 1 512\ntenant\nkey\nmodel gpt-4* 7 0\nmodel * 0 99\nanon 3 0\n" {
		t.Errorf("default estimate: %q", got)
	}
}

func TestLimitedIsOpenAI429(t *testing.T) {
	tests := []struct {
		name, answer, typ, unit, _ string
	}{
		{"requests", "limited requests 5 1500", "requests", "requests per min (RPM): limit 5. Please try again in 1.5s", ""},
		{"tokens", "limited tokens 1000 200", "tokens", "tokens per min (TPM): limit 1000. Please try again in 200ms", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := load(t, `{}`, tt.answer).Request(plugintest.Request{Tenant: acme})
			if !res.Rejected || res.Status != 429 || res.Type != tt.typ || res.Code != "rate_limit_exceeded" {
				t.Fatalf("%+v", res)
			}
			if !strings.Contains(res.Message, tt.unit) {
				t.Errorf("message %q lacks %q", res.Message, tt.unit)
			}
		})
	}
}

func TestRedisDown(t *testing.T) {
	res := load(t, `{"on_redis_error":"fail_closed"}`, "unavailable").Request(plugintest.Request{Tenant: acme})
	if !res.Rejected || res.Status != 503 || res.Code != "rate_limiter_unavailable" {
		t.Fatalf("fail_closed: %+v", res)
	}
	res = load(t, `{"on_redis_error":"fail_open"}`, "unavailable").Request(plugintest.Request{Tenant: acme})
	if res.Rejected || res.Err != nil {
		t.Fatalf("fail_open: %+v", res)
	}
}

func TestUnlimited(t *testing.T) {
	if res := load(t, `{}`, "unlimited").Request(plugintest.Request{}); res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
}

func TestConfigRefused(t *testing.T) {
	for _, c := range []string{`{"on_redis_error":"maybe"}`, `{"replicas":0}`, `{"models":[{"match":"a b","rpm":1}]}`,
		`{"models":[{"match":"x"}]}`, `{"nope":1}`, `{"models":[{"match":"[","rpm":1}]}`} {
		if _, err := plugintest.LoadErr(t, plugintest.Build(t, "."), c); err == nil {
			t.Errorf("config %s accepted", c)
		}
	}
}

func BenchmarkRequest(b *testing.B) {
	p := load(b, `{}`, "allowed")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p.Request(plugintest.Request{Tenant: acme})
	}
}
