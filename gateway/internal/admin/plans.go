package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// planOut is a plan as read: planJSON, how many tenants are on it, and its
// times.
type planOut struct {
	planJSON
	Tenants   int64     `json:"tenants"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func planInfoOut(p pg.PlanInfo) planOut {
	return planOut{planJSON: planJSON{ID: p.ID, MonthlyBudgetUSD: usd(p.MonthlyBudgetMicros), RPM: p.RPM, TPM: p.TPM,
		MaxTokens: p.MaxTokens, AllowedModels: nonNilStrings(p.AllowedModels), Budgets: budgetsOut(p.Budgets), Plugins: p.Plugins},
		Tenants: p.Tenants, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}

func (h *handler) listPlans(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r)
	if !ok {
		return
	}
	ps, err := h.store.ListPlans(r.Context(), l.cursor, l.limit+1)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	replyPage(h, w, ps, l.limit, planInfoOut, func(p pg.PlanInfo) string { return p.ID })
}

func (h *handler) getPlan(w http.ResponseWriter, r *http.Request) {
	p, err := h.store.GetPlan(r.Context(), r.PathValue("id"))
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, planInfoOut(p))
}

// deletePlan deletes a plan no tenant is on; with tenants, 409 plan_in_use.
func (h *handler) deletePlan(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := h.store.DeletePlan(r.Context(), id); err != nil {
		if errors.Is(err, pg.ErrInUse) {
			h.fail(w, r, &openai.Error{Status: http.StatusConflict, Type: openai.TypeInvalidRequest, Code: "plan_in_use",
				Message: fmt.Sprintf("plan %q has tenants; move or delete them first (%v)", id, err)})
			return
		}
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictPlan(id)
	h.reply(w, http.StatusOK, deletedJSON{ID: id, Object: "plan", Deleted: true})
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
