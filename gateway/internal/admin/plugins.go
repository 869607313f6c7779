package admin

import (
	"context"
	"net/http"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// PluginChecker checks a plan's plugin overrides and, over them, a
// tenant's (either may be nil) against the gateway's current plugins, by
// configuring each plugin with its merged config: nil, or the error to
// answer 400 with (naming the plugin, with its own message).
type PluginChecker func(ctx context.Context, plan, tn tenant.PluginOverrides) error

// WithPluginCheck makes plan and tenant writes check their plugins field
// with check before storing it (nil: not checked).
func WithPluginCheck(check PluginChecker) Option {
	return func(h *handler) { h.checkPlugins = check }
}

// PluginStore is what the tenant plugins endpoints need of the store.
type PluginStore interface {
	// PlanPlugins returns plan id's plugin overrides.
	PlanPlugins(ctx context.Context, planID string) (tenant.PluginOverrides, error)
	// TenantPlanPlugins returns the plugin overrides of tenant id's plan.
	TenantPlanPlugins(ctx context.Context, tenantID string) (tenant.PluginOverrides, error)
	// SetTenantPlugins replaces tenant id's plugin overrides.
	SetTenantPlugins(ctx context.Context, tenantID string, ovs tenant.PluginOverrides) error
}

// pluginsJSON is the body of PUT /v1/admin/tenants/{id}/plugins: the
// tenant's overrides, replacing its previous ones ({} or null: none).
type pluginsJSON struct {
	Plugins tenant.PluginOverrides `json:"plugins"`
}

// pluginsOK checks a write's plugin overrides, answering 400 and false
// when the plugins refuse them.
func (h *handler) pluginsOK(w http.ResponseWriter, r *http.Request, plan, tn tenant.PluginOverrides) bool {
	if h.checkPlugins == nil || len(plan)+len(tn) == 0 {
		return true
	}
	if err := h.checkPlugins(r.Context(), plan, tn); err != nil {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "plugins",
			Code: "invalid_plugins", Message: err.Error()})
		return false
	}
	return true
}

func (h *handler) setTenantPlugins(w http.ResponseWriter, r *http.Request) {
	var in pluginsJSON
	if !h.decode(w, r, &in, false) {
		return
	}
	id := r.PathValue("id")
	plan, err := h.store.TenantPlanPlugins(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	if !h.pluginsOK(w, r, plan, in.Plugins) {
		return
	}
	if err := h.store.SetTenantPlugins(r.Context(), id, in.Plugins); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictTenant(id)
	if in.Plugins == nil {
		in.Plugins = tenant.PluginOverrides{}
	}
	h.reply(w, http.StatusOK, map[string]any{"id": id, "plugins": in.Plugins})
}
