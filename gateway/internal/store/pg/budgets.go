package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// budgetJSON is one element of plans.budgets (migration 00009).
type budgetJSON struct {
	Scope       string `json:"scope"`
	Window      string `json:"window"`
	LimitMicros int64  `json:"limit_micros"`
	Alerts      []int  `json:"alerts,omitempty"`
}

// encodeBudgets checks p's budgets and returns the plans.budgets value and
// the monthly_budget_micros column: the tenant/month budget's limit, taken
// from its rule when p has one (then p.MonthlyBudgetMicros must be 0 or
// the same), else p.MonthlyBudgetMicros.
func encodeBudgets(p tenant.Plan) (raw []byte, monthly int64, err error) {
	rules := p.Budgets
	monthly = p.MonthlyBudgetMicros
	if m := tenant.MonthlyBudget(rules); m > 0 {
		if monthly != 0 && monthly != m {
			return nil, 0, fmt.Errorf("monthly budget %d and a tenant/month budget of %d: %w", monthly, m, ErrInvalid)
		}
		monthly = 0 // the rule says it; PlanBudgets would see it twice
	}
	merged, err := tenant.PlanBudgets(monthly, rules)
	if err != nil {
		return nil, 0, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	out := make([]budgetJSON, 0, len(merged))
	for _, r := range merged {
		out = append(out, budgetJSON{Scope: r.Scope, Window: r.Window, LimitMicros: r.LimitMicros, Alerts: r.Alerts})
	}
	raw, err = json.Marshal(out)
	return raw, tenant.MonthlyBudget(merged), err
}

// decodeBudgets builds a plan's Budgets from its columns. The limit of the
// tenant/month budget is monthly_budget_micros (0: none), whatever the
// JSON says, so a plain UPDATE of the column keeps its meaning; the JSON
// entry adds its alerts.
func decodeBudgets(raw []byte, monthly int64) ([]tenant.BudgetRule, error) {
	var in []budgetJSON
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("plans.budgets: %w", err)
		}
	}
	rules := make([]tenant.BudgetRule, 0, len(in))
	var alerts []int
	for _, b := range in {
		if b.Scope == tenant.BudgetTenant && b.Window == tenant.WindowMonth {
			alerts = b.Alerts
			continue
		}
		rules = append(rules, tenant.BudgetRule{Scope: b.Scope, Window: b.Window, LimitMicros: b.LimitMicros, Alerts: b.Alerts})
	}
	merged, err := tenant.PlanBudgets(monthly, rules)
	if err != nil {
		return nil, fmt.Errorf("plans.budgets: %w", err)
	}
	if monthly > 0 && len(alerts) > 0 {
		merged[0].Alerts = alerts // PlanBudgets puts the monthly budget first
	}
	return merged, nil
}

// keyBudgetColumns maps a key's own budget to its columns (NULL: none).
func keyBudgetColumns(b tenant.KeyBudget) (*int64, *string) {
	if b.LimitMicros == 0 {
		return nil, nil
	}
	return &b.LimitMicros, &b.Window
}

// Budgets returns the budgets of tenant tenantID's plan (see
// tenant.Plan.Budgets) and, when keyID is not empty, that key's own
// budget. An unknown tenant, or a key that is not the tenant's, is an
// error wrapping tenant.ErrNotFound.
func (s *Store) Budgets(ctx context.Context, tenantID, keyID string) ([]tenant.BudgetRule, tenant.KeyBudget, error) {
	var (
		monthly int64
		raw     []byte
		own     tenant.KeyBudget
	)
	err := s.pool.QueryRow(ctx, `
SELECT p.monthly_budget_micros, p.budgets FROM tenants t JOIN plans p ON p.id = t.plan_id WHERE t.id = $1`,
		tenantID).Scan(&monthly, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, own, fmt.Errorf("tenant %q: %w", tenantID, tenant.ErrNotFound)
	}
	if err != nil {
		return nil, own, fmt.Errorf("reading the budgets of tenant %q: %w", tenantID, err)
	}
	rules, err := decodeBudgets(raw, monthly)
	if err != nil {
		return nil, own, fmt.Errorf("reading the budgets of tenant %q: %w", tenantID, err)
	}
	if keyID == "" {
		return rules, own, nil
	}
	err = s.pool.QueryRow(ctx, `
SELECT coalesce(budget_micros, 0), coalesce(budget_window, '') FROM api_keys WHERE id = $1 AND tenant_id = $2`,
		keyID, tenantID).Scan(&own.LimitMicros, &own.Window)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, own, fmt.Errorf("key %q of tenant %q: %w", keyID, tenantID, tenant.ErrNotFound)
	}
	if err != nil {
		return nil, own, fmt.Errorf("reading the budget of key %q: %w", keyID, err)
	}
	return rules, own, nil
}
