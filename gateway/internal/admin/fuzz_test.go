package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math/big"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// FuzzUSD checks the dollar amounts of admin bodies: what parseUSD accepts
// is a non-negative decimal with at most six fractional digits, converted
// exactly (checked with math/big); formatUSD writes it back to a string
// that parses to the same micros; the JSON forms (string and number) agree.
func FuzzUSD(f *testing.F) {
	for _, s := range []string{"0", "12", "12.5", "0.1", "0.000001", "007.250000", "9223372036853", "9223372036854",
		"0.0000001", "", ".5", "5.", "-1", "+1", "1e3", "1,5", " 1", "1.2.3", "٣", "0x10", "1_000"} {
		f.Add(s)
	}
	million := big.NewRat(microsPerUSD, 1)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseUSD(s)
		var u, uq usd
		errNum := u.UnmarshalJSON([]byte(s))
		errStr := uq.UnmarshalJSON(strconv.AppendQuote(nil, s))
		if err != nil {
			if errStr == nil {
				t.Fatalf("%q refused, but accepted as a JSON string", s)
			}
			return
		}
		if errNum != nil || errStr != nil || int64(u) != m || int64(uq) != m {
			t.Fatalf("%q = %d, but JSON number %d (%v), JSON string %d (%v)", s, m, u, errNum, uq, errStr)
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok || m < 0 || new(big.Rat).Mul(r, million).Cmp(new(big.Rat).SetInt64(m)) != 0 {
			t.Fatalf("%q parsed as %d micros", s, m)
		}
		back, err := parseUSD(formatUSD(m))
		if err != nil || back != m {
			t.Fatalf("formatUSD(%d) = %q parses as %d, %v", m, formatUSD(m), back, err)
		}
		j, _ := usd(m).MarshalJSON()
		var again usd
		if err := json.Unmarshal(j, &again); err != nil || int64(again) != m {
			t.Fatalf("%s does not round-trip: %d %v", j, again, err)
		}
	})
}

// okStore accepts every write and answers reads with one tenant.
type okStore struct{ nopResources }

func (okStore) CreatePlan(context.Context, tenant.Plan) error                { return nil }
func (okStore) UpdatePlan(context.Context, tenant.Plan) error                { return nil }
func (okStore) CreateTenant(context.Context, tenant.Tenant) error            { return nil }
func (okStore) SetTenantStatus(context.Context, string, string) error        { return nil }
func (okStore) SetPrice(context.Context, tenant.Price) error                 { return nil }
func (okStore) MonthUsage(context.Context, string, time.Time) (int64, error) { return 1_500_000, nil }
func (okStore) TenantBudget(context.Context, string) (int64, error)          { return 10_000_000, nil }
func (okStore) PlanPlugins(context.Context, string) (tenant.PluginOverrides, error) {
	return nil, nil
}
func (okStore) TenantPlanPlugins(context.Context, string) (tenant.PluginOverrides, error) {
	return nil, nil
}
func (okStore) SetTenantPlugins(context.Context, string, tenant.PluginOverrides) error { return nil }
func (okStore) RevokeKeyHash(context.Context, string) (tenant.KeyHash, error) {
	return tenant.HashKey(fuzzPlaintext), nil
}
func (okStore) ListKeys(_ context.Context, id string) ([]tenant.Key, error) {
	return []tenant.Key{{ID: "key_1", TenantID: id, Prefix: fuzzPlaintext[:11], Status: tenant.StatusActive}}, nil
}
func (okStore) CreateKey(_ context.Context, id string, opts pg.KeyOptions) (string, *tenant.Key, error) {
	return fuzzPlaintext, &tenant.Key{ID: "key_1", TenantID: id, Hash: tenant.HashKey(fuzzPlaintext), Prefix: fuzzPlaintext[:11],
		Status: tenant.StatusActive, ExpiresAt: opts.ExpiresAt, Limits: opts.Limits}, nil
}

const fuzzPlaintext = "tg_0123456789abcdefghijklmnopqrstuvwxyz"

var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/admin/plans"},
	{"PUT", "/v1/admin/plans/pro"},
	{"POST", "/v1/admin/tenants"},
	{"PUT", "/v1/admin/tenants/acme/status"},
	{"POST", "/v1/admin/tenants/acme/keys"},
	{"POST", "/v1/admin/keys/key_1/revoke"},
	{"PUT", "/v1/admin/prices"},
	{"GET", "/v1/admin/tenants/acme/usage"},
	{"PUT", "/v1/admin/tenants/acme/plugins"},
	{"PATCH", "/v1/admin/tenants/acme"},
	{"PATCH", "/v1/admin/keys/key_1"},
}

// FuzzAdminBodies sends fuzzed JSON bodies to every admin write route, with
// the right token, over a store that accepts everything. Nothing panics;
// every answer is JSON; a refusal is a 4xx OpenAI-style error (never a
// 5xx: the store did not fail); an accepted plan or price carries the
// exact micros of its dollar amounts; the key appears only in the answer
// that creates it, never in the log.
func FuzzAdminBodies(f *testing.F) {
	seeds := []string{
		`{"id":"pro","monthly_budget_usd":"50.25","rpm":600,"tpm":100000,"max_tokens":4096,"allowed_models":["gpt-4o*"]}`,
		`{"monthly_budget_usd":12.5,"rpm":0,"tpm":0,"max_tokens":0,"allowed_models":null}`,
		`{"id":"acme","plan_id":"pro","status":"suspended"}`,
		`{"status":"active"}`,
		`{"expires_at":"2030-12-31T00:00:00Z","rpm":60,"tpm":0,"max_tokens":100}`,
		`{"tenant_id":"acme"}`,
		`{"plan_id":"free","status":"suspended","plugins":null}`,
		`{"expires_at":null,"rpm":5,"budget_usd":"2.5","budget_window":"day"}`,
		`{"plugins":{"guard":{"enabled":true,"config":{"deny":["x"]}},"hold":{"enabled":false}}}`,
		`{"model":"gpt-4o","input_usd_per_mtok":"2.5","output_usd_per_mtok":"10","effective_from":"2026-01-01T00:00:00Z"}`,
		``, `{}`, `{"id":1}`, `{"x":1}`, `{} {}`, `[`, `{"monthly_budget_usd":"-1"}`, `{"monthly_budget_usd":"1e3"}`,
	}
	for i := range fuzzRoutes {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	var logs bytes.Buffer
	h := NewHandler(okStore{}, nil, "token", slog.New(slog.NewTextHandler(&logs, nil)))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		logs.Reset()
		req := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		out := w.Body.Bytes()
		if !json.Valid(out) || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s %q: %d %q", rt.method, rt.path, body, w.Code, out)
		}
		switch {
		case w.Code >= 500:
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, w.Code, out)
		case w.Code >= 400:
			var e struct {
				Error struct{ Message, Type string }
			}
			if json.Unmarshal(out, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%s %s %q: error body %s", rt.method, rt.path, body, out)
			}
		case rt.path == "/v1/admin/plans":
			var in, got planJSON
			if json.Unmarshal(body, &in) != nil || json.Unmarshal(out, &got) != nil || got.MonthlyBudgetUSD != in.MonthlyBudgetUSD {
				t.Fatalf("plan %q answered %s", body, out)
			}
		case rt.path == "/v1/admin/prices":
			var in, got priceJSON
			if json.Unmarshal(body, &in) != nil || json.Unmarshal(out, &got) != nil ||
				got.InputUSDPerMTok != in.InputUSDPerMTok || got.OutputUSDPerMTok != in.OutputUSDPerMTok {
				t.Fatalf("price %q answered %s", body, out)
			}
		}
		if strings.Contains(logs.String(), fuzzPlaintext[11:]) || (rt.path != "/v1/admin/tenants/acme/keys" && bytes.Contains(out, []byte(fuzzPlaintext))) {
			t.Fatalf("the key leaked: log %q, answer %s", logs.String(), out)
		}
	})
}
