package admin

import (
	"cmp"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// budgetJSON is one of a plan's budgets: at most USD per window (month,
// the default, or day) for the scope (tenant, key or user), with alert
// thresholds in percent.
type budgetJSON struct {
	Scope  string `json:"scope"`
	Window string `json:"window"`
	USD    usd    `json:"usd"`
	Alerts []int  `json:"alerts,omitempty"`
}

// budgetRules converts a plan's wire budgets; the store checks them.
func budgetRules(in []budgetJSON) []tenant.BudgetRule {
	if len(in) == 0 {
		return nil
	}
	out := make([]tenant.BudgetRule, len(in))
	for i, b := range in {
		out[i] = tenant.BudgetRule{Scope: b.Scope, Window: cmp.Or(b.Window, tenant.WindowMonth), LimitMicros: int64(b.USD), Alerts: b.Alerts}
	}
	return out
}

// budgetsOut is budgetRules' inverse, with defaults filled in.
func budgetsOut(rules []tenant.BudgetRule) []budgetJSON {
	if len(rules) == 0 {
		return nil
	}
	out := make([]budgetJSON, len(rules))
	for i, r := range rules {
		out[i] = budgetJSON{Scope: r.Scope, Window: r.Window, USD: usd(r.LimitMicros), Alerts: r.Alerts}
	}
	return out
}

// keyBudget converts a key's own budget (0 USD: the plan's).
func keyBudget(amount usd, window string) tenant.KeyBudget {
	if amount == 0 && window == "" {
		return tenant.KeyBudget{}
	}
	return tenant.KeyBudget{LimitMicros: int64(amount), Window: cmp.Or(window, tenant.WindowMonth)}
}
