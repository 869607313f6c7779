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

// started are the budget service calls the plugin made: dispatched, never
// called inline (an inline call holds the instance while the host waits
// on Redis).
func started(t testing.TB, p *plugintest.Plugin) []plugintest.Call {
	t.Helper()
	if inline := p.Services.Calls(); len(inline) != 0 {
		t.Fatalf("inline calls %+v, want every call dispatched", inline)
	}
	var cs []plugintest.Call
	for _, d := range p.Services.Dispatched() {
		cs = append(cs, plugintest.Call{Service: d.Service, Request: d.Request})
	}
	return cs
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
		{"insufficient", `{}`, "insufficient 1234 567", nil, 429, "insufficient_quota", "the monthly budget (0.000567 USD left)"},
		{"insufficient, the key's day", `{}`, "insufficient 1234 -5 key:day", nil, 429, "insufficient_quota", "left of the API key's daily budget (0.000000 USD left)."},
		{"insufficient, the end user's day", `{}`, "insufficient 1234 1000000 user:day", nil, 429, "insufficient_quota", "the end user's daily budget (1.000000 USD left)"},
		{"insufficient, the tenant's month", `{}`, "insufficient 1234 0 tenant:month", nil, 429, "insufficient_quota", "the tenant's monthly budget"},
		{"insufficient, the tenant's day", `{}`, "insufficient 1234 0 tenant:day", nil, 429, "insufficient_quota", "the tenant's daily budget"},
		{"unlimited", `{}`, "unlimited", nil, 0, "", ""},
		{"no tenant at the service", `{}`, "notenant", nil, 0, "", ""},
		{"no price, allowed", `{}`, "noprice", nil, 0, "", ""},
		{"no price, refused", `{"unpriced":"reject"}`, "noprice", nil, 400, "model_not_priced", "`m-1` has no price"},
		{"no price, the policy refuses", `{}`, "noprice refuse", nil, 400, "model_not_priced", "`m-1` has no price"},
		{"no price, the policy refuses over allow", `{"unpriced":"allow"}`, "noprice refuse", nil, 400, "model_not_priced", ""},
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
			calls := started(t, p)
			// No body: the prompt bound is the reply's template tokens
			// (wasmhost.MessageTokens); max_tokens 100; the default lease,
			// 15 minutes.
			if len(calls) != 1 || calls[0].Service != "budget.reserve" || calls[0].Request != "8 100 900000" {
				t.Errorf("calls %+v", calls)
			}
		})
	}
}

// A request without a model (files, batches) is not refused as unpriced,
// nor an MCP message.
func TestNoModelNotRefusedAsUnpriced(t *testing.T) {
	p := load(t, `{"unpriced":"reject"}`, "noprice", nil)
	if res := p.Request(plugintest.Request{Explicit: plugintest.FieldModel, Tenant: acme}); res.Rejected || res.Err != nil {
		t.Fatalf("%+v", res)
	}
	// Nor is an MCP message: tool calls are not priced.
	if res := p.Request(plugintest.Request{Model: "mcp:docs/search", Endpoint: "mcp", Tenant: acme}); res.Rejected || res.Err != nil {
		t.Fatalf("an MCP tool call: %+v", res)
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
	if calls := started(t, p); len(calls) != 0 {
		t.Fatalf("calls %+v", calls)
	}
	// Without max_tokens, default_max_tokens is reserved.
	p = load(t, `{"default_max_tokens":64,"lease":"1m"}`, "ok 1 1", nil)
	p.Request(plugintest.Request{Model: "m-1", Tenant: acme})
	if calls := started(t, p); len(calls) != 1 || calls[0].Request != "8 64 60000" {
		t.Fatalf("calls %+v", calls)
	}
}

// A stream cut when budget.extend is refused ends with a text naming the
// budget that ran out, or with cut_message when it is set. (The harness
// runs the chunk phase without the request phase, so the text is checked
// here and the cut itself end to end, in gateway/e2e.)
func TestCutMessage(t *testing.T) {
	tests := []struct {
		name, configured, extend, want string
	}{
		{"the key's day", "", "insufficient 10 0 key:day", "\n\n[The reply was cut: the API key's daily budget is exhausted.]"},
		{"the end user's month", "", "insufficient 10 -3 user:month", "\n\n[The reply was cut: the end user's monthly budget is exhausted.]"},
		{"the tenant's month", "", "insufficient 10 0 tenant:month", "\n\n[The reply was cut: the tenant's monthly budget is exhausted.]"},
		{"a host that names none", "", "insufficient 10 0", "\n\n[The reply was cut: the monthly budget is exhausted.]"},
		{"configured", "[stop]", "insufficient 10 0 user:day", "[stop]"},
	}
	defer func(c config) { cfg = c }(cfg)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg.CutMessage = tt.configured
			if got := cutMessage(tt.extend); got != tt.want {
				t.Errorf("cutMessage(%q) = %q, want %q", tt.extend, got, tt.want)
			}
		})
	}
}
