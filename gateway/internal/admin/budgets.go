package admin

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/openai"
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

// BudgetStore is what GET /v1/admin/tenants/{id}/budgets needs of the
// store (pg.Store.Budgets); a Store without it answers 501.
type BudgetStore interface {
	Budgets(ctx context.Context, tenantID, keyID string) ([]tenant.BudgetRule, tenant.KeyBudget, error)
}

// scopeUsageJSON is one budget of a tenant in its current period, with
// what the budget counter holds for it.
type scopeUsageJSON struct {
	Scope       string `json:"scope"`
	ID          string `json:"id,omitempty"`
	Window      string `json:"window"`
	Period      string `json:"period"`
	LimitUSD    usd    `json:"limit_usd"`
	LimitMicros int64  `json:"limit_micros"`
	Alerts      []int  `json:"alerts,omitempty"`
	// From the budget counter (absent when it is unavailable): spent in
	// the period (seeded from the ledger if the counter had none), held
	// by requests in flight, and limit − spent − reserved.
	SpentMicros     *int64 `json:"spent_micros,omitempty"`
	ReservedMicros  *int64 `json:"reserved_micros,omitempty"`
	RemainingUSD    *usd   `json:"remaining_usd,omitempty"`
	RemainingMicros *int64 `json:"remaining_micros,omitempty"`
}

// budgets is GET /v1/admin/tenants/{id}/budgets[?key_id=K][&end_user=U]:
// the tenant's budgets of its current periods, and those of the key and
// the end user named (a plan's key or user budgets are shown only for a
// named key or end user).
func (h *handler) budgets(w http.ResponseWriter, r *http.Request) {
	bs, ok := h.store.(BudgetStore)
	if !ok {
		h.fail(w, r, &openai.Error{Status: http.StatusNotImplemented, Type: openai.TypeInvalidRequest, Code: "not_available",
			Message: "this store does not report budgets"})
		return
	}
	id, keyID, user := r.PathValue("id"), r.URL.Query().Get("key_id"), r.URL.Query().Get("end_user")
	rules, own, err := bs.Budgets(r.Context(), id, keyID)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	snap := tenant.Snapshot{Key: tenant.Key{ID: keyID, Budget: own}, Plan: tenant.Plan{Budgets: rules}}
	now := h.now()
	data := []scopeUsageJSON{}
	for _, rule := range snap.AppendBudgets(nil) {
		s, ok := scopeOf(rule, keyID, user, now)
		if !ok {
			continue
		}
		out := scopeUsageJSON{Scope: s.Kind, ID: s.ID, Window: s.Window.String(), Period: s.Period,
			LimitUSD: usd(s.Limit), LimitMicros: s.Limit, Alerts: s.Alerts}
		if h.budget != nil {
			spent, reserved, err := h.budget.Status(r.Context(), id, s)
			if err != nil {
				h.log.Warn("budgets: budget counter unavailable", "tenant", id, "err", err)
			} else {
				left := s.Limit - spent - reserved
				lu := usd(left)
				out.SpentMicros, out.ReservedMicros, out.RemainingMicros, out.RemainingUSD = &spent, &reserved, &left, &lu
			}
		}
		data = append(data, out)
	}
	h.reply(w, http.StatusOK, map[string]any{"object": "list", "tenant_id": id, "data": data})
}

// scopeOf is the budget scope of rule at now for the key and end user
// named (the gateway's hostsvc builds the same for a request); false for
// a key or user budget without a key or end user.
func scopeOf(rule tenant.BudgetRule, keyID, user string, now time.Time) (budget.Scope, bool) {
	s := budget.Scope{Kind: rule.Scope, Limit: rule.LimitMicros, Alerts: rule.Alerts}
	switch rule.Scope {
	case tenant.BudgetKey:
		s.ID = keyID
	case tenant.BudgetUser:
		s.ID = user
	}
	if s.Kind != tenant.BudgetTenant && s.ID == "" {
		return s, false
	}
	if rule.Window == tenant.WindowDay {
		s.Window = budget.Day
	}
	s.Period = s.Window.Period(now)
	return s, true
}
