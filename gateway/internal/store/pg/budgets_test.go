package pg_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// A plan's budgets round-trip through plans.budgets; the tenant/month
// limit is monthly_budget_micros, so a plain UPDATE of that column (psql,
// an older gateway) changes it and keeps the alerts; bad budgets are
// ErrInvalid and write nothing.
func TestPlanBudgetsStored(t *testing.T) {
	s, dsn := open(t)
	ctx := t.Context()
	rules := []tenant.BudgetRule{
		{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: 9_000_000, Alerts: []int{80, 100}},
		{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 1_000},
	}
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "team", Budgets: rules}))
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "team"}))
	key, _, err := s.CreateKey(ctx, "acme", pg.KeyOptions{Budget: tenant.KeyBudget{LimitMicros: 42, Window: tenant.WindowDay}})
	must(t, err)
	snapshot := func() *tenant.Snapshot {
		t.Helper()
		snap, err := s.KeyByHash(ctx, tenant.HashKey(key))
		must(t, err)
		return snap
	}
	same := func(a, b []tenant.BudgetRule) bool {
		return slices.EqualFunc(a, b, func(x, y tenant.BudgetRule) bool {
			return x.Scope == y.Scope && x.Window == y.Window && x.LimitMicros == y.LimitMicros && slices.Equal(x.Alerts, y.Alerts)
		})
	}
	snap := snapshot()
	if !same(snap.Plan.Budgets, rules) || snap.Plan.MonthlyBudgetMicros != 9_000_000 ||
		snap.Key.Budget != (tenant.KeyBudget{LimitMicros: 42, Window: tenant.WindowDay}) {
		t.Fatalf("read %+v, monthly %d, key %+v", snap.Plan.Budgets, snap.Plan.MonthlyBudgetMicros, snap.Key.Budget)
	}

	conn := connect(t, dsn)
	if _, err := conn.Exec(ctx, `UPDATE plans SET monthly_budget_micros = 3 WHERE id = 'team'`); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(rules)
	want[0].LimitMicros = 3
	if got := snapshot().Plan.Budgets; !same(got, want) {
		t.Errorf("after the column changed: %+v, want %+v", got, want)
	}
	if _, err := conn.Exec(ctx, `UPDATE plans SET monthly_budget_micros = 0 WHERE id = 'team'`); err != nil {
		t.Fatal(err)
	}
	if got := snapshot().Plan.Budgets; !same(got, rules[1:]) {
		t.Errorf("without a monthly budget: %+v, want %+v", got, rules[1:])
	}

	for _, bad := range []tenant.Plan{
		{ID: "team", MonthlyBudgetMicros: 5, Budgets: rules}, // two monthly budgets
		{ID: "team", Budgets: []tenant.BudgetRule{{Scope: "team", Window: tenant.WindowDay, LimitMicros: 1}}},
		{ID: "team", Budgets: []tenant.BudgetRule{rules[1], rules[1]}},
	} {
		if err := s.UpdatePlan(ctx, bad); !errors.Is(err, pg.ErrInvalid) {
			t.Errorf("UpdatePlan(%+v) = %v, want ErrInvalid", bad.Budgets, err)
		}
	}
	if got := snapshot().Plan.Budgets; !same(got, rules[1:]) {
		t.Errorf("a refused update changed the plan: %+v", got)
	}
	if _, _, err := s.CreateKey(ctx, "acme", pg.KeyOptions{Budget: tenant.KeyBudget{LimitMicros: 1, Window: "week"}}); !errors.Is(err, pg.ErrInvalid) {
		t.Errorf("a key budget per week: %v, want ErrInvalid", err)
	}
}
