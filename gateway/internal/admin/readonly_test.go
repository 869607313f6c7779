package admin_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/store/mem"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

// memEnv serves the admin API over a memory store built from a policy's
// tenants section.
func memEnv(t *testing.T) *env {
	t.Helper()
	cfg := tenantspec.Config{
		Plans: []tenantspec.PlanConfig{{ID: "pro", MonthlyBudgetUSD: 50, RPM: 600}, {ID: "free"}},
		Tenants: []tenantspec.TenantConfig{
			{ID: "acme", Plan: "pro", Keys: []tenantspec.KeyConfig{
				{ID: "key_a", KeySHA256: strings.Repeat("a", 64), Prefix: "tg_a"},
				{ID: "key_b", KeySHA256: strings.Repeat("b", 64), Prefix: "tg_b", Status: "revoked"},
				{ID: "key_c", KeySHA256: strings.Repeat("c", 64), Prefix: "tg_c", ExpiresAt: time.Now().Add(-time.Hour)},
			}},
			{ID: "beta", Plan: "free", Status: "suspended"},
		},
		Prices: []tenantspec.PriceConfig{{Model: "m", InputUSDPerMTok: 1, OutputUSDPerMTok: 2.5}},
	}
	m, err := mem.New(cfg, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	e := &env{evict: &evictions{}}
	e.srv = httptest.NewServer(admin.NewHandler(admin.ReadOnlyStore(m), e.evict, token, nil, admin.WithReadOnly(true)))
	t.Cleanup(e.srv.Close)
	return e
}

// TestReadOnlyStore: with the memory store the admin API reads the
// policy's plans, tenants and keys, refuses every write with 501
// read_only_store, and says it has no call log.
func TestReadOnlyStore(t *testing.T) {
	t.Parallel()
	e := memEnv(t)
	if got := e.walk(t, "/v1/admin/plans", 1, "id"); strings.Join(got, ",") != "free,pro" {
		t.Errorf("plans %v", got)
	}
	if p := e.get(t, "GET", "/v1/admin/plans/pro", "", 200); p["tenants"] != 1.0 || p["monthly_budget_usd"] != "50" {
		t.Errorf("plan pro: %v", p)
	}
	if got := e.walk(t, "/v1/admin/tenants?status=suspended", 10, "id"); strings.Join(got, ",") != "beta" {
		t.Errorf("suspended tenants %v", got)
	}
	if a := e.get(t, "GET", "/v1/admin/tenants/acme", "", 200); a["keys_active"] != 1.0 || a["created_at"] != nil {
		t.Errorf("tenant acme: %v", a)
	}
	if got := e.walk(t, "/v1/admin/keys", 2, "id"); strings.Join(got, ",") != "key_a,key_b,key_c" {
		t.Errorf("keys %v", got)
	}
	if got := e.walk(t, "/v1/admin/keys?status=expired", 2, "id"); strings.Join(got, ",") != "key_c" {
		t.Errorf("expired keys %v", got)
	}
	if l := e.get(t, "GET", "/v1/admin/prices", "", 200); fmt.Sprint(l["data"]) != "[map[effective_from:<nil> input_usd_per_mtok:1 model:m output_usd_per_mtok:2.5 source:policy]]" {
		t.Errorf("prices %v", l)
	}
	e.get(t, "GET", "/v1/admin/keys/key_b", "", 200)
	e.get(t, "GET", "/v1/admin/keys/key_x", "", 404)
	e.get(t, "GET", "/v1/admin/tenants/acme/keys", "", 200)
	if o := e.get(t, "GET", "/v1/admin/overview", "", 200); o["read_only"] != true || o["requests"] != 0.0 {
		t.Errorf("overview %v", o)
	}
	if p := e.get(t, "GET", "/v1/admin/policy", "", 200); p["store"] != "memory" {
		t.Errorf("policy %v", p)
	}
	for _, path := range []string{"/v1/admin/usage", "/v1/admin/guard-actions"} {
		status, body := e.do(t, "GET", path, "")
		if status != 501 || !strings.Contains(body, "no_call_log") {
			t.Errorf("GET %s: %d %s, want 501 no_call_log", path, status, body)
		}
	}
	for _, w := range [][2]string{
		{"POST", "/v1/admin/plans"}, {"PUT", "/v1/admin/plans/pro"}, {"DELETE", "/v1/admin/plans/pro"},
		{"POST", "/v1/admin/tenants"}, {"PATCH", "/v1/admin/tenants/acme"}, {"DELETE", "/v1/admin/tenants/acme"},
		{"PUT", "/v1/admin/tenants/acme/status"}, {"PUT", "/v1/admin/tenants/acme/plugins"}, {"POST", "/v1/admin/tenants/acme/keys"},
		{"PATCH", "/v1/admin/keys/key_a"}, {"DELETE", "/v1/admin/keys/key_a"}, {"POST", "/v1/admin/keys/key_a/revoke"},
		{"PUT", "/v1/admin/prices"}, {"DELETE", "/v1/admin/prices/m"},
	} {
		status, body := e.do(t, w[0], w[1], `{"id":"x"}`)
		if status != 501 || !strings.Contains(body, "read_only_store") {
			t.Errorf("%s %s: %d %s, want 501 read_only_store", w[0], w[1], status, body)
		}
	}
	// A cancel writes nothing to the store: not refused as a write.
	status, body := e.do(t, "POST", "/v1/admin/requests/r1/cancel", "")
	if status == 501 && strings.Contains(body, "read_only_store") {
		t.Errorf("cancel refused as a write: %s", body)
	}
	if got := e.evict.take(); got != nil {
		t.Errorf("evictions %v", got)
	}
}
