package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// fuzzKey is the one API key the fuzzed tenant store knows.
const fuzzKey = "tg_fuzzkey"

type fuzzTenants struct{}

func (fuzzTenants) Key(_ context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if h != tenant.HashKey(fuzzKey) {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Snapshot{
		Key:    tenant.Key{ID: "k1", TenantID: "acme", Hash: h, Status: tenant.StatusActive},
		Tenant: tenant.Tenant{ID: "acme", PlanID: "p", Status: tenant.StatusActive},
		Plan:   tenant.Plan{ID: "p", MonthlyBudgetMicros: 1_000_000, AllowedModels: []string{"mock-*"}, Limits: tenant.Limits{RPM: 60, TPM: 10_000}},
	}, nil
}

// FuzzCallerTenant parses the API key of the cancel API's caller from
// Authorization and X-Api-Key as a client sends them. Exactly the known
// key, presented as "Bearer KEY" (any case, surrounding spaces trimmed) or
// as X-Api-Key, resolves to its tenant; everything else is a 401.
func FuzzCallerTenant(f *testing.F) {
	f.Add("Bearer "+fuzzKey, "")
	f.Add("bearer  "+fuzzKey+" ", "")
	f.Add("Basic "+fuzzKey, fuzzKey)
	f.Add("", " "+fuzzKey)
	f.Add("Bearer", fuzzKey)
	f.Add("Bearer "+fuzzKey+"x", "")
	f.Add("BEARER \t"+fuzzKey, "other")
	f.Fuzz(func(t *testing.T, auth, apiKey string) {
		var h fasthttp.RequestHeader
		if auth != "" {
			h.Set("Authorization", auth)
		}
		if apiKey != "" {
			h.Set("X-Api-Key", apiKey)
		}
		id, e := callerTenant(fuzzTenants{}, time.Now(), &h)
		// What the header holds after fasthttp stored it.
		a, k := string(h.Peek("Authorization")), string(h.Peek("X-Api-Key"))
		var want string
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			want = strings.TrimSpace(a[7:])
		} else {
			want = strings.TrimSpace(k)
		}
		switch {
		case want == fuzzKey:
			if e != nil || id != "acme" {
				t.Fatalf("Authorization %q, X-Api-Key %q: %v %v", a, k, id, e)
			}
		case e == nil || id != "" || e.Status != 401:
			t.Fatalf("Authorization %q, X-Api-Key %q resolved %q (%v)", a, k, id, e)
		}
	})
}
