package proxy

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/gateway/internal/chains"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// openChains builds st's compiler of plugin overrides for its pipeline,
// hands it to tenant.resolve, and compiles the overrides the policy's
// tenants section declares, so that a plan's or tenant's config a plugin
// refuses fails the load (naming plan, tenant and plugin) and their
// variants are loaded before the first request.
func (st *state) openChains(p *config.Policy, specs []wasmhost.Spec) error {
	c, err := chains.New(st.pipeline, specs)
	if err != nil {
		return err
	}
	st.plugins = c
	st.services.SetPlugins(c)
	ctx, cancel := context.WithTimeout(context.Background(), chains.LoadTimeout)
	defer cancel()
	plans := make(map[string]tenant.PluginOverrides, len(p.Tenants.Plans))
	for i, pc := range p.Tenants.Plans {
		ovs, err := tenantspec.PluginOverrides(pc.Plugins)
		if err == nil {
			err = c.Check(ctx, ovs, nil)
		}
		if err != nil {
			return fmt.Errorf("tenants.plans[%d] (plan %q): %w", i, pc.ID, err)
		}
		plans[pc.ID] = ovs
	}
	for i, tc := range p.Tenants.Tenants {
		if len(tc.Plugins) == 0 {
			continue
		}
		ovs, err := tenantspec.PluginOverrides(tc.Plugins)
		if err == nil {
			err = c.Check(ctx, plans[tc.Plan], ovs)
		}
		if err != nil {
			return fmt.Errorf("tenants.tenants[%d] (tenant %q on plan %q): %w", i, tc.ID, tc.Plan, err)
		}
	}
	return nil
}

// checkPlugins is the admin API's check of a plan's and a tenant's plugin
// overrides, against the current policy's pipeline.
func (s *Server) checkPlugins(ctx context.Context, plan, tn tenant.PluginOverrides) error {
	st := s.acquireState()
	if st == nil {
		return fmt.Errorf("the gateway is shutting down")
	}
	defer st.release()
	return st.plugins.Check(ctx, plan, tn)
}
