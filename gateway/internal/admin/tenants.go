package admin

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// tenantOut is a tenant as read.
type tenantOut struct {
	ID      string                 `json:"id"`
	PlanID  string                 `json:"plan_id"`
	Status  string                 `json:"status"`
	Plugins tenant.PluginOverrides `json:"plugins"` // {} when none
	// CreatedAt is null for a tenant of the memory store.
	CreatedAt *time.Time `json:"created_at"`
	// KeysActive counts the keys neither revoked nor expired.
	KeysActive int64 `json:"keys_active"`
	// The ledger's spend (spend_month) in the current UTC month.
	SpendMonthUSD    usd   `json:"spend_month_usd"`
	SpendMonthMicros int64 `json:"spend_month_micros"`
}

func tenantInfoOut(t pg.TenantInfo) tenantOut {
	out := tenantOut{ID: t.ID, PlanID: t.PlanID, Status: t.Status, Plugins: t.Plugins, KeysActive: t.KeysActive,
		SpendMonthUSD: usd(t.SpendMonthMicros), SpendMonthMicros: t.SpendMonthMicros}
	if out.Plugins == nil {
		out.Plugins = tenant.PluginOverrides{}
	}
	if !t.CreatedAt.IsZero() {
		c := t.CreatedAt
		out.CreatedAt = &c
	}
	return out
}

func (h *handler) listTenants(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "plan_id", "status", "q")
	if !ok {
		return
	}
	f := pg.TenantFilter{PlanID: l.get("plan_id"), Status: l.get("status"), IDPrefix: l.get("q")}
	ts, err := h.store.ListTenants(r.Context(), f, h.now(), l.cursor, l.limit+1)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	replyPage(h, w, ts, l.limit, tenantInfoOut, func(t pg.TenantInfo) string { return t.ID })
}

func (h *handler) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := h.store.GetTenant(r.Context(), r.PathValue("id"), h.now())
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, tenantInfoOut(t))
}

// tenantPatch is the body of PATCH /v1/admin/tenants/{id}: fields left out
// stay; plugins null or {} removes the tenant's own overrides.
type tenantPatch struct {
	PlanID  *string         `json:"plan_id"`
	Status  *string         `json:"status"`
	Plugins json.RawMessage `json:"plugins"`
}

// patchTenant changes a tenant's plan, status or plugin overrides. A new
// plan or new overrides are checked as the tenant's next request would use
// them (the plan's overrides, then the tenant's own).
func (h *handler) patchTenant(w http.ResponseWriter, r *http.Request) {
	var in tenantPatch
	if !h.decode(w, r, &in, false) {
		return
	}
	id := r.PathValue("id")
	var p pg.TenantPatch
	p.PlanID, p.Status = in.PlanID, in.Status
	if in.Plugins != nil {
		var ovs tenant.PluginOverrides
		if err := json.Unmarshal(in.Plugins, &ovs); err != nil {
			h.storeError(w, r, invalidField("plugins", err))
			return
		}
		p.Plugins = &ovs
	}
	if p.PlanID != nil || p.Plugins != nil {
		cur, err := h.store.GetTenant(r.Context(), id, h.now())
		if err != nil {
			h.storeError(w, r, err)
			return
		}
		planID, own := cur.PlanID, cur.Plugins
		if p.PlanID != nil {
			planID = *p.PlanID
		}
		if p.Plugins != nil {
			own = *p.Plugins
		}
		if len(own) > 0 {
			plan, err := h.store.PlanPlugins(r.Context(), planID)
			if err != nil {
				h.storeError(w, r, err)
				return
			}
			if !h.pluginsOK(w, r, plan, own) {
				return
			}
		}
	}
	if err := h.store.UpdateTenant(r.Context(), id, p); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictTenant(id)
	h.getTenant(w, r)
}

// deleteTenant deletes a tenant and its keys (its call log stays). This
// replica evicts each key and the tenant before answering; the others on
// the triggers' NOTIFY.
func (h *handler) deleteTenant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	hashes, err := h.store.DeleteTenant(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	for _, k := range hashes {
		h.evict.EvictKey(k)
	}
	h.evict.EvictTenant(id)
	h.log.Info("deleted tenant", "tenant", id, "keys", len(hashes))
	h.reply(w, http.StatusOK, deletedJSON{ID: id, Object: "tenant", Deleted: true})
}
