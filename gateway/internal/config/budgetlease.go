package config

import (
	"fmt"
	"path/filepath"
	"time"
)

// budgetDefaultLease is the budget plugin's default lease
// (plugins/budget: "lease").
const budgetDefaultLease = 15 * time.Minute

// BudgetLeaseWarnings returns a warning for each budget plugin (built in,
// or a module file named budget.wasm) whose hold lease does not exceed the
// longest upstream timeouts.total: a hold whose lease ends while its
// request still runs is released, and the request can then spend past the
// budget (docs/POLICY.md, "Budgets"). Call it on a validated policy.
func (p *Policy) BudgetLeaseWarnings() []string {
	var longest time.Duration
	for _, u := range p.Upstreams {
		longest = max(longest, u.Timeouts.Total)
	}
	var out []string
	for i, pl := range p.Plugins {
		if pl.Builtin != "budget" && (pl.Builtin != "" || filepath.Base(pl.Path) != "budget.wasm") {
			continue
		}
		lease := budgetDefaultLease
		if m, ok := pl.Config.(map[string]any); ok {
			if s, ok := m["lease"].(string); ok {
				d, err := time.ParseDuration(s)
				if err != nil {
					continue // the plugin refuses it when configured
				}
				lease = d
			}
		}
		if lease <= longest {
			out = append(out, fmt.Sprintf("plugins[%d] (%s): lease %v does not exceed the longest upstream timeouts.total %v: a request still running when its hold's lease ends can spend past the budget",
				i, pl.Name, lease, longest))
		}
	}
	return out
}
