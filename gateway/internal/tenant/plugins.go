package tenant

import (
	"encoding/json"
	"sync/atomic"
)

// PluginOverride is a plan's or tenant's setting for one plugin of the
// policy (docs/POLICY.md, "Chains: guards per route, plan and tenant").
type PluginOverride struct {
	// Enabled switches the plugin on or off; nil leaves it as the plan
	// (for a tenant's) or the policy says.
	Enabled *bool `json:"enabled,omitempty"`
	// Config is a JSON merge patch (RFC 7386) over the plugin's config in
	// the policy; nil: none.
	Config json.RawMessage `json:"config,omitempty"`
}

// PluginOverrides are a plan's or tenant's overrides by plugin name; nil:
// none.
type PluginOverrides map[string]PluginOverride

// PluginSet is what a snapshot's plan and tenant say about the policy's
// plugins, and what the gateway compiled from it for its current plugin
// pipeline, kept with the snapshot so that a warm request compiles
// nothing. Plan and Tenant are immutable; Compiled is a memo.
type PluginSet struct {
	PlanID, TenantID string
	Plan, Tenant     PluginOverrides

	compiled atomic.Pointer[compiledPlugins]
}

type compiledPlugins struct {
	owner, value any
}

// NewPluginSet returns the plugin overrides of a tenant on its plan; nil
// when neither has any.
func NewPluginSet(planID string, plan PluginOverrides, tenantID string, tn PluginOverrides) *PluginSet {
	if len(plan) == 0 && len(tn) == 0 {
		return nil
	}
	return &PluginSet{PlanID: planID, TenantID: tenantID, Plan: plan, Tenant: tn}
}

// Compiled returns what SetCompiled stored for owner (the gateway's
// plugin pipeline), or nil when nothing was, or something for another
// owner (the pipeline before a reload).
func (s *PluginSet) Compiled(owner any) any {
	if c := s.compiled.Load(); c != nil && c.owner == owner {
		return c.value
	}
	return nil
}

// SetCompiled stores v, compiled from s for owner, replacing what was
// stored for any owner.
func (s *PluginSet) SetCompiled(owner, v any) {
	s.compiled.Store(&compiledPlugins{owner: owner, value: v})
}
