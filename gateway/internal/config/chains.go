package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

// PluginSelection is a route's plugins: the name of an entry of
// Policy.Chains, or a list of plugin names. Plugins always run in the
// order of Policy.Plugins; a selection picks a subset of them, and lists
// them in that order (docs/adr/0017-plugin-chains.md says why).
type PluginSelection struct {
	// Chain names an entry of Policy.Chains ("" when Names is given).
	Chain string
	// Names are plugin names, when the route lists them itself.
	Names []string
}

// UnmarshalYAML implements yaml.Unmarshaler: a chain's name (a string) or
// a list of plugin names.
func (s *PluginSelection) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag != "!!str" {
			return fmt.Errorf("line %d: plugins must be a chain's name or a list of plugin names, got %s", n.Line, n.Value)
		}
		s.Chain = n.Value
		return nil
	case yaml.SequenceNode:
		s.Names = make([]string, 0, len(n.Content))
		return n.Decode(&s.Names)
	}
	return fmt.Errorf("line %d: plugins must be a chain's name or a list of plugin names", n.Line)
}

// MaxPlugins caps a policy's plugins: a chain is a bit set of 64 slots
// and a plugin's skip_phases is kept the same way (sdk/wasmhost).
const MaxPlugins = 64

// validateChains checks chains, routes[].plugins and the plan and tenant
// plugin overrides against the policy's plugins, and resolves each route's
// selection into Route.PluginNames.
func (p *Policy) validateChains(ps *Problems) {
	if len(p.Plugins) > MaxPlugins {
		ps.add("plugins", "lists %d plugins, at most %d are supported", len(p.Plugins), MaxPlugins)
	}
	order := make(map[string]int, len(p.Plugins))
	for i, pl := range p.Plugins {
		if _, dup := order[pl.Name]; !dup && pl.Name != "" {
			order[pl.Name] = i
		}
	}
	for _, name := range sortedKeys(p.Chains) {
		at := "chains." + name
		if name == "" {
			ps.add("chains", "a chain's name must not be empty")
			continue
		}
		checkPluginList(at, p.Chains[name], order, ps)
	}
	for i := range p.Routes {
		r := &p.Routes[i]
		r.PluginNames = p.resolveSelection(fmt.Sprintf("routes[%d].plugins", i), r.Plugins, order, ps)
	}
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		s.PluginNames = p.resolveSelection(fmt.Sprintf("mcp.servers[%d].plugins", i), s.Plugins, order, ps)
	}
	for i, pc := range p.Tenants.Plans {
		checkOverrides(fmt.Sprintf("tenants.plans[%d].plugins", i), pc.Plugins, order, ps)
	}
	for i, tc := range p.Tenants.Tenants {
		checkOverrides(fmt.Sprintf("tenants.tenants[%d].plugins", i), tc.Plugins, order, ps)
	}
}

// resolveSelection checks a route's or MCP server's plugin selection (at
// names it) and returns its plugin names: nil for every plugin (none
// selected, or a selection with problems, which are reported).
func (p *Policy) resolveSelection(at string, sel *PluginSelection, order map[string]int, ps *Problems) []string {
	switch {
	case sel == nil:
		return nil
	case sel.Chain != "":
		names, ok := p.Chains[sel.Chain]
		if !ok {
			ps.add(at, "names no chain: %q (declared: %s)", sel.Chain, quotedKeys(p.Chains))
			return nil
		}
		return nonNilNames(names)
	default:
		if checkPluginList(at, sel.Names, order, ps) {
			return nonNilNames(sel.Names)
		}
	}
	return nil
}

// checkPluginList checks a chain's or a route's plugin names: each names a
// plugin, at most once, in policy order. It reports whether all were.
func checkPluginList(at string, names []string, order map[string]int, ps *Problems) bool {
	ok := true
	seen := make(map[string]int, len(names))
	prev, prevName := -1, ""
	for j, n := range names {
		np := fmt.Sprintf("%s[%d]", at, j)
		i, known := order[n]
		switch {
		case !known:
			ps.add(np, "names no plugin: %q (declared: %s)", n, quotedKeys(order))
			ok = false
			continue
		case seen[n] > 0:
			ps.add(np, "%q is already listed at [%d]", n, seen[n]-1)
			ok = false
			continue
		case i < prev:
			ps.add(np, "%q is listed after %q, but plugins run in the order of the policy's plugins (%q is plugins[%d], %q plugins[%d]): list them in that order",
				n, prevName, n, i, prevName, prev)
			ok = false
		}
		seen[n] = j + 1
		prev, prevName = i, n
	}
	return ok
}

// checkOverrides checks a plan's or tenant's plugin overrides: each names
// a plugin, and its config is a JSON object (a merge patch) or null. What
// the plugin makes of the merged config is checked when the pipeline is
// loaded.
func checkOverrides(at string, ovs map[string]tenantspec.PluginOverrideConfig, order map[string]int, ps *Problems) {
	for _, name := range sortedKeys(ovs) {
		np := at + "." + name
		if _, known := order[name]; !known {
			ps.add(np, "names no plugin: %q (declared: %s)", name, quotedKeys(order))
			continue
		}
		ov := ovs[name]
		if ov.Config == nil {
			continue
		}
		if _, err := json.Marshal(ov.Config); err != nil {
			ps.add(np+".config", "cannot be expressed as JSON: %v", err)
		} else if _, isMap := ov.Config.(map[string]any); !isMap {
			ps.add(np+".config", "must be a mapping: a JSON merge patch over the plugin's config (RFC 7386)")
		}
	}
}

func nonNilNames(names []string) []string {
	if names == nil {
		return []string{}
	}
	return slices.Clone(names)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func quotedKeys[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	keys := sortedKeys(m)
	for i, k := range keys {
		keys[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(keys, ", ")
}

// PluginEnabled reports whether the plugin runs where no plan or tenant
// switches it on or off (enabled, default true).
func (pl *Plugin) PluginEnabled() bool { return pl.Enabled == nil || *pl.Enabled }
