package hostsvc

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// BenchmarkReserveSettle is the host's side of a request's budget on the
// in-process counter: resolve the key (cached snapshot), reserve, settle;
// with the tenant's month alone, and with a key and an end-user budget as
// well (the end user from the header).
func BenchmarkReserveSettle(b *testing.B) {
	for _, bc := range []struct {
		name  string
		rules []tenant.BudgetRule
	}{
		{"scopes=1", nil},
		{"scopes=3", []tenant.BudgetRule{
			{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 1 << 50},
			{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 1 << 50},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rules, _ := tenant.PlanBudgets(1<<50, bc.rules)
			snap := &tenant.Snapshot{
				Key:    tenant.Key{ID: "k1", TenantID: "acme", Hash: tenant.HashKey(fuzzKey), Status: tenant.StatusActive},
				Tenant: tenant.Tenant{ID: "acme", PlanID: "p", Status: tenant.StatusActive},
				Plan:   tenant.Plan{ID: "p", MonthlyBudgetMicros: 1 << 50, Budgets: rules},
			}
			n := 0
			set := NewSet(Config{
				Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
				Tenants: fixedTenants{snap}, Prices: fuzzPrices{},
				Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil).WithSettledTTL(time.Millisecond),
				NewID: func(dst []byte) []byte { n++; return strconv.AppendInt(dst, int64(n), 10) },
			})
			h := headers{"X-Tollgate-End-User": "alice"}
			var c Session
			b.ReportAllocs()
			for b.Loop() {
				c.Bind(set)
				r := wasmhost.AcquireRequest()
				r.Model, r.Body, r.ClientHeader = []byte("mock-1"), []byte(`{}`), h
				c.Call(r, "tenant.resolve", []byte(fuzzKey))
				if out, err := c.Call(r, "budget.reserve", []byte("10 100 60000")); err != nil || out[0] != 'o' {
					b.Fatalf("reserve = %q, %v", out, err)
				}
				c.Settle(r, 10, 50)
				wasmhost.ReleaseRequest(r)
				c.Reset()
			}
		})
	}
}

// fixedTenants resolves one key to one snapshot, as a warm cache does.
type fixedTenants struct{ snap *tenant.Snapshot }

func (f fixedTenants) Key(_ context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if h != f.snap.Key.Hash {
		return nil, tenant.ErrNotFound
	}
	return f.snap, nil
}
