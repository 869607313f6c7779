package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// GET /v1/admin/tenants/{id}/budgets lists the tenant's budgets of the
// current periods, and a named key's and end user's, with the counter's
// spend, holds and what is left.
func TestBudgetsOfTenant(t *testing.T) {
	e := newEnv(t, token)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.store.CreatePlan(ctx, tenant.Plan{ID: "team", MonthlyBudgetMicros: 100_000_000, Budgets: []tenant.BudgetRule{
		{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 5_000_000, Alerts: []int{50}},
		{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 1_000_000},
	}}))
	must(e.store.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "team"}))
	_, plain, err := e.store.CreateKey(ctx, "acme", pg.KeyOptions{})
	must(err)
	_, own, err := e.store.CreateKey(ctx, "acme", pg.KeyOptions{Budget: tenant.KeyBudget{LimitMicros: 2_000_000, Window: tenant.WindowMonth}})
	must(err)

	now := time.Now().UTC()
	day, month := budget.Day.Period(now), budget.Month.Period(now)
	counter := budget.NewMemory(nil, nil)
	userScope := budget.Scope{Kind: budget.ScopeUser, ID: "bob", Window: budget.Day, Period: day, Limit: 1_000_000}
	tenantScope := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 100_000_000}
	if _, err := counter.Reserve(ctx, "acme", "r1", []budget.Scope{tenantScope, userScope}, 300_000, time.Minute); err != nil {
		t.Fatal(err)
	}
	must(counter.Correct(ctx, "acme", userScope, 250_000))
	srv := httptest.NewServer(admin.NewHandler(e.store, e.evict, token, slog.New(slog.NewTextHandler(io.Discard, nil)), admin.WithBudget(counter)))
	defer srv.Close()
	e.srv = srv

	tests := []struct {
		name, query string
		status      int
		want        string
	}{
		{"the tenant's own", "", 200, `{"object":"list","tenant_id":"acme","data":[
			{"scope":"tenant","window":"month","period":"` + month + `","limit_usd":"100","limit_micros":100000000,
			 "spent_micros":0,"reserved_micros":300000,"remaining_usd":"99.7","remaining_micros":99700000}]}`},
		{"a key on the plan's budget and an end user", "?key_id=" + plain.ID + "&end_user=bob", 200, `{"object":"list","tenant_id":"acme","data":[
			{"scope":"tenant","window":"month","period":"` + month + `","limit_usd":"100","limit_micros":100000000,
			 "spent_micros":0,"reserved_micros":300000,"remaining_usd":"99.7","remaining_micros":99700000},
			{"scope":"key","id":"` + plain.ID + `","window":"day","period":"` + day + `","limit_usd":"5","limit_micros":5000000,"alerts":[50],
			 "spent_micros":0,"reserved_micros":0,"remaining_usd":"5","remaining_micros":5000000},
			{"scope":"user","id":"bob","window":"day","period":"` + day + `","limit_usd":"1","limit_micros":1000000,
			 "spent_micros":250000,"reserved_micros":300000,"remaining_usd":"0.45","remaining_micros":450000}]}`},
		{"a key with its own budget", "?key_id=" + own.ID, 200, `{"object":"list","tenant_id":"acme","data":[
			{"scope":"tenant","window":"month","period":"` + month + `","limit_usd":"100","limit_micros":100000000,
			 "spent_micros":0,"reserved_micros":300000,"remaining_usd":"99.7","remaining_micros":99700000},
			{"scope":"key","id":"` + own.ID + `","window":"month","period":"` + month + `","limit_usd":"2","limit_micros":2000000,
			 "spent_micros":0,"reserved_micros":0,"remaining_usd":"2","remaining_micros":2000000}]}`},
		{"unknown tenant", "", 404, ""},
		{"another tenant's key", "?key_id=nope", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/v1/admin/tenants/acme/budgets" + tt.query
			if tt.name == "unknown tenant" {
				path = "/v1/admin/tenants/nope/budgets"
			}
			status, body := e.do(t, "GET", path, "")
			if status != tt.status || tt.want != "" && !jsonEqual(t, body, tt.want) {
				t.Errorf("%d %s\nwant %d %s", status, body, tt.status, tt.want)
			}
		})
	}
}
