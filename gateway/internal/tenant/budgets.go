package tenant

import (
	"fmt"
	"slices"
)

// Scopes of a BudgetRule: whose spend it limits.
const (
	BudgetTenant = "tenant" // every request of the tenant
	BudgetKey    = "key"    // each API key on its own
	BudgetUser   = "user"   // each end user (as the client names them) on its own
)

// Windows of a BudgetRule: the UTC calendar period it renews over.
const (
	WindowMonth = "month"
	WindowDay   = "day"
)

// BudgetRule is one budget of a plan, or a key's own: at most LimitMicros
// USD micros per Window for each member of Scope (the tenant, each of its
// keys, each of its end users).
type BudgetRule struct {
	Scope       string
	Window      string
	LimitMicros int64
	// Alerts are thresholds in percent of the limit (1..100, ascending)
	// whose crossing is reported; empty: none.
	Alerts []int
}

// Check reports the first thing wrong with r, naming the field.
func (r *BudgetRule) Check() error {
	switch r.Scope {
	case BudgetTenant, BudgetKey, BudgetUser:
	default:
		return fmt.Errorf("scope must be %s, %s or %s, got %q", BudgetTenant, BudgetKey, BudgetUser, r.Scope)
	}
	if r.Window != WindowMonth && r.Window != WindowDay {
		return fmt.Errorf("window must be %s or %s, got %q", WindowMonth, WindowDay, r.Window)
	}
	if r.LimitMicros <= 0 {
		return fmt.Errorf("the limit must be positive, got %d micros", r.LimitMicros)
	}
	for i, a := range r.Alerts {
		if a < 1 || a > 100 {
			return fmt.Errorf("alerts[%d] must be a percentage from 1 to 100, got %d", i, a)
		}
		if i > 0 && a <= r.Alerts[i-1] {
			return fmt.Errorf("alerts must be ascending without repeats, got %d after %d", a, r.Alerts[i-1])
		}
	}
	return nil
}

// PlanBudgets merges a plan's monthly budget (the tenant's budget per
// month, the field that predates rules; 0: none) with its rules and checks
// them: each scope and window at most once, so a tenant/month rule and a
// monthly budget cannot both be set. The result holds the tenant/month
// budget first, then rules in the order given; it shares nothing with
// rules.
func PlanBudgets(monthly int64, rules []BudgetRule) ([]BudgetRule, error) {
	out := make([]BudgetRule, 0, len(rules)+1)
	if monthly < 0 {
		return nil, fmt.Errorf("monthly budget must not be negative, got %d", monthly)
	}
	if monthly > 0 {
		out = append(out, BudgetRule{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: monthly})
	}
	for i := range rules {
		r := rules[i]
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("budgets[%d]: %w", i, err)
		}
		for _, prev := range out {
			if prev.Scope == r.Scope && prev.Window == r.Window {
				if monthly > 0 && r.Scope == BudgetTenant && r.Window == WindowMonth {
					return nil, fmt.Errorf("budgets[%d]: the tenant's monthly budget is set twice (monthly budget and a tenant/month rule); set one", i)
				}
				return nil, fmt.Errorf("budgets[%d]: a second %s budget per %s", i, r.Scope, r.Window)
			}
		}
		r.Alerts = slices.Clone(r.Alerts)
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// MonthlyBudget returns the limit of the tenant/month rule of rules, 0 if
// there is none.
func MonthlyBudget(rules []BudgetRule) int64 {
	for _, r := range rules {
		if r.Scope == BudgetTenant && r.Window == WindowMonth {
			return r.LimitMicros
		}
	}
	return 0
}

// KeyBudget is a key's own budget: it replaces the plan's key budgets for
// that key. The zero value (LimitMicros 0) inherits the plan's.
type KeyBudget struct {
	LimitMicros int64
	Window      string // WindowMonth or WindowDay
}

// Check reports what is wrong with a set key budget; the zero value is
// valid.
func (k KeyBudget) Check() error {
	if k.LimitMicros == 0 && k.Window == "" {
		return nil
	}
	r := BudgetRule{Scope: BudgetKey, Window: k.Window, LimitMicros: k.LimitMicros}
	return r.Check()
}

// AppendBudgets appends to dst the budgets a request with this key is held
// against: the plan's, with its key budgets replaced by the key's own
// budget when the key has one (keeping the alerts of the plan's key budget
// of the same window). A plan with a MonthlyBudgetMicros but no
// tenant/month rule (built by hand, not by a store) counts as having one.
// It allocates nothing when dst has room.
func (s *Snapshot) AppendBudgets(dst []BudgetRule) []BudgetRule {
	own := s.Key.Budget
	if m := s.Plan.MonthlyBudgetMicros; m > 0 && MonthlyBudget(s.Plan.Budgets) == 0 {
		dst = append(dst, BudgetRule{Scope: BudgetTenant, Window: WindowMonth, LimitMicros: m})
	}
	for _, r := range s.Plan.Budgets {
		if r.Scope == BudgetKey && own.LimitMicros > 0 {
			continue
		}
		dst = append(dst, r)
	}
	if own.LimitMicros > 0 {
		r := BudgetRule{Scope: BudgetKey, Window: own.Window, LimitMicros: own.LimitMicros}
		for _, p := range s.Plan.Budgets {
			if p.Scope == BudgetKey && p.Window == own.Window {
				r.Alerts = p.Alerts
			}
		}
		dst = append(dst, r)
	}
	return dst
}
