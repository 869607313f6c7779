package tenantspec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// PluginOverrideConfig is a plan's or tenant's setting for one plugin of
// the policy:
//
//	plugins:
//	  keywordguard: {enabled: true, config: {keywords: [secret]}}
//	  holdback: {enabled: false}
type PluginOverrideConfig struct {
	// Enabled switches the plugin on or off (absent: as the plan, else
	// the policy, says).
	Enabled *bool `yaml:"enabled"`
	// Config is a JSON merge patch (RFC 7386) over the plugin's config in
	// the policy (the plan's patch first, then the tenant's): keys given
	// replace the policy's, null removes one, objects merge.
	Config any `yaml:"config"`
}

// PluginOverrides converts a plan's or tenant's plugin overrides (nil
// for none). The error names the plugin whose config is not JSON.
func PluginOverrides(cs map[string]PluginOverrideConfig) (tenant.PluginOverrides, error) {
	b := builder{}
	ovs := b.pluginOverrides("", cs)
	if len(b.problems) > 0 {
		return nil, b.problems[0]
	}
	return ovs, nil
}

// pluginOverrides converts a plan's or tenant's plugin overrides (nil for
// none). Config values were checked to be JSON objects by the config
// package, which knows the plugins' names.
func (b *builder) pluginOverrides(at string, cs map[string]PluginOverrideConfig) tenant.PluginOverrides {
	if len(cs) == 0 {
		return nil
	}
	out := make(tenant.PluginOverrides, len(cs))
	names := make([]string, 0, len(cs))
	for name := range cs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		c := cs[name]
		ov := tenant.PluginOverride{Enabled: c.Enabled}
		if c.Config != nil {
			raw, err := json.Marshal(c.Config)
			if err != nil {
				b.add(strings.TrimPrefix(fmt.Sprintf("%s.plugins.%s.config", at, name), "."), "cannot be expressed as JSON: %v", err)
				continue
			}
			ov.Config = raw
		}
		out[name] = ov
	}
	return out
}
