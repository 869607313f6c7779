package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var acme = &wasmhost.Tenant{ID: "acme", KeyID: "k-1", Plan: "pro", Status: "active",
	RPM: -1, TPM: -1, BudgetMicros: 5_000_000, MaxTokens: -1, PlanRPM: -1, PlanTPM: -1, KeyRPM: -1, KeyTPM: -1}

func load(t testing.TB, config, answer string, err error) *plugintest.Plugin {
	t.Helper()
	p := plugintest.Load(t, plugintest.Build(t, "."), config)
	p.Services.Handle("budget.reserve", func([]byte) ([]byte, error) { return []byte(answer), err })
	return p
}

// The request phase: what it reserves, and each answer of budget.reserve.
func TestReserve(t *testing.T) {
	tests := []struct {
		name, config, answer string
		err                  error
		status               int // 0: admitted
		code, message        string
	}{
		{"held", `{}`, "ok 1234 4998766", nil, 0, "", ""},
		{"insufficient", `{}`, "insufficient 1234 567", nil, 429, "insufficient_quota", "(0.000567 USD left)"},
		{"unlimited", `{}`, "unlimited", nil, 0, "", ""},
		{"no tenant at the service", `{}`, "notenant", nil, 0, "", ""},
		{"no price, allowed", `{}`, "noprice", nil, 0, "", ""},
		{"no price, refused", `{"unpriced":"reject"}`, "noprice", nil, 400, "model_not_priced", "`m-1` has no price"},
		{"counter down, fail_closed", `{}`, "unavailable", nil, 503, "budget_unavailable", ""},
		{"counter down, fail_open", `{"on_redis_error":"fail_open"}`, "unavailable", nil, 0, "", ""},
		{"service missing, fail_closed", `{}`, "", errors.New("down"), 503, "budget_unavailable", ""},
		{"an unknown answer", `{}`, "maybe 1 2", nil, 503, "budget_unavailable", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := load(t, tt.config, tt.answer, tt.err)
			res := p.Request(plugintest.Request{Model: "m-1", MaxTokens: 100, Tenant: acme})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if tt.status == 0 && res.Rejected || tt.status != 0 && (res.Status != tt.status || res.Code != tt.code) {
				t.Fatalf("got %+v, want %d %s", res, tt.status, tt.code)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q lacks %q", res.Message, tt.message)
			}
			calls := p.Services.Calls()
			// No body: the prompt bound is the reply's template tokens
			// (wasmhost.MessageTokens); max_tokens 100; the default lease,
			// 15 minutes.
			if len(calls) != 1 || calls[0].Service != "budget.reserve" || calls[0].Request != "8 100 900000" {
				t.Errorf("calls %+v", calls)
			}
		})
	}
}

// A request without a model (files, batches) is not refused as unpriced.
func TestNoModelNotRefusedAsUnpriced(t *testing.T) {
	p := load(t, `{"unpriced":"reject"}`, "noprice", nil)
	if res := p.Request(plugintest.Request{Explicit: plugintest.FieldModel, Tenant: acme}); res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	if res := p.Request(plugintest.Request{Model: "m-1", Tenant: acme}); res.Status != 400 || res.Code != "model_not_priced" {
		t.Fatalf("a model without a price: %+v", res)
	}
}

// Without a tenant there is no budget to hold: no call, admitted.
func TestNoTenantNoReservation(t *testing.T) {
	p := load(t, `{}`, "ok 1 1", nil)
	if res := p.Request(plugintest.Request{Model: "m-1"}); res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	if calls := p.Services.Calls(); len(calls) != 0 {
		t.Fatalf("calls %+v", calls)
	}
	// Without max_tokens, default_max_tokens is reserved.
	p = load(t, `{"default_max_tokens":64,"lease":"1m"}`, "ok 1 1", nil)
	p.Request(plugintest.Request{Model: "m-1", Tenant: acme})
	if calls := p.Services.Calls(); len(calls) != 1 || calls[0].Request != "8 64 60000" {
		t.Fatalf("calls %+v", calls)
	}
}
