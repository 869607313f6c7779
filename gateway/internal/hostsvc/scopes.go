package hostsvc

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// AlertSink receives what the budget services learn about alert
// thresholds. Calls come from the request path (a settle, a refusal), so
// they must return quickly: queue, never write to a store in place. Nil
// in Config means none.
type AlertSink interface {
	// Crossed reports thresholds a settle took spend across; the slice is
	// the sink's to keep.
	Crossed(ctx context.Context, crossings []budget.Crossing)
	// Exhausted reports a request refused because scope s of tenant could
	// not hold it (spent: the scope's spend then, USD micros): holds may
	// keep spend just under a threshold while every request is refused.
	Exhausted(ctx context.Context, tenant string, s budget.Scope, spent int64)
}

// appendScopes appends to dst the budget scopes a request of r's tenant is
// held against at now: the budgets of its snapshot (snap; nil when no
// tenant.resolve ran, e.g. a plugin test that set r.Tenant: then the
// tenant's monthly BudgetMicros alone), each named by its member (the key
// id, the end user) and its period at now. A user budget applies only to
// a request that names an end user (user, "" for none).
func appendScopes(dst []budget.Scope, snap *tenant.Snapshot, r *wasmhost.Request, user string, now time.Time) []budget.Scope {
	if snap == nil {
		if b := r.Tenant.BudgetMicros; b > 0 {
			dst = append(dst, budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(now), Limit: b})
		}
		return dst
	}
	var rules [8]tenant.BudgetRule
	for _, rule := range snap.AppendBudgets(rules[:0]) {
		s := budget.Scope{Kind: rule.Scope, Limit: rule.LimitMicros, Alerts: rule.Alerts}
		switch rule.Scope {
		case tenant.BudgetKey:
			s.ID = snap.Key.ID
		case tenant.BudgetUser:
			if user == "" {
				continue
			}
			s.ID = user
		}
		if rule.Window == tenant.WindowDay {
			s.Window = budget.Day
		}
		s.Period = s.Window.Period(now)
		dst = append(dst, s)
	}
	return dst
}

// scopeName says which budget refused, for the client: "tenant:month",
// "key:day", "user:month" (the plugin turns it into words).
func appendScopeName(dst []byte, s *budget.Scope) []byte {
	dst = append(dst, s.Kind...)
	dst = append(dst, ':')
	return append(dst, s.Window.String()...)
}
