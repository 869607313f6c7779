package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

const chainsBase = valid + `
plugins:
  - {name: pre, builtin: preflight}
  - {name: guard, builtin: ratelimit, config: {keywords: [a]}}
  - {name: hold, builtin: holdback, enabled: false}
`

func TestChainsResolve(t *testing.T) {
	src := strings.Replace(chainsBase, "    upstream: a\n", "    upstream: a\n    plugins: guarded\n  - models: [m2]\n    upstream: a\n    plugins: [pre, hold]\n  - models: [m3]\n    upstream: a\n    plugins: []\n  - models: [m4]\n    upstream: a\n", 1) +
		"chains:\n  guarded: [pre, guard]\n"
	p, err := Parse([]byte(src), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		route int
		want  []string
	}{
		{0, []string{"pre", "guard"}},
		{1, []string{"pre", "hold"}},
		{2, []string{}},
		{3, nil},
	}
	for _, tt := range tests {
		got := p.Routes[tt.route].PluginNames
		if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("routes[%d].PluginNames = %#v, want %#v", tt.route, got, tt.want)
		}
	}
	if p.Plugins[2].PluginEnabled() || !p.Plugins[1].PluginEnabled() {
		t.Errorf("enabled: hold %v, guard %v; want false, true", p.Plugins[2].PluginEnabled(), p.Plugins[1].PluginEnabled())
	}
}

func TestChainsProblems(t *testing.T) {
	route := func(sel string) string {
		return strings.Replace(chainsBase, "    upstream: a\n", "    upstream: a\n    plugins: "+sel+"\n", 1)
	}
	tenants := func(plans, tenants string) string {
		return chainsBase + "tenants:\n  plans:\n    - id: basic\n" + plans + "  tenants:\n    - id: acme\n      plan: basic\n" + tenants
	}
	tests := []struct {
		name, src, path, msg string
	}{
		{"unknown chain", route("nosuch") + "chains: {c: [pre]}\n", "routes[0].plugins", `names no chain: "nosuch" (declared: "c")`},
		{"unknown plugin in route", route("[pre, nope]"), "routes[0].plugins[1]", `names no plugin: "nope"`},
		{"duplicate in route", route("[pre, pre]"), "routes[0].plugins[1]", `"pre" is already listed at [0]`},
		{"out of policy order", route("[guard, pre]"), "routes[0].plugins[1]", `"pre" is listed after "guard", but plugins run in the order of the policy's plugins`},
		{"unknown plugin in chain", chainsBase + "chains: {c: [pre, x]}\n", "chains.c[1]", `names no plugin: "x"`},
		{"duplicate in chain", chainsBase + "chains: {c: [guard, guard]}\n", "chains.c[1]", `already listed`},
		{"mapping for plugins", route("{a: b}"), "routes[0].plugins.a", "unknown field"},
		{"unknown plugin in plan", tenants("      plugins: {nope: {enabled: true}}\n", ""), "tenants.plans[0].plugins.nope", `names no plugin: "nope"`},
		{"unknown plugin in tenant", tenants("", "      plugins: {zap: {enabled: false}}\n"), "tenants.tenants[0].plugins.zap", `names no plugin: "zap"`},
		{"config not a mapping", tenants("      plugins: {guard: {config: [1]}}\n", ""), "tenants.plans[0].plugins.guard.config", "must be a mapping"},
		{"unknown override key", tenants("      plugins: {guard: {on: true}}\n", ""), "tenants.plans[0].plugins.guard.on", "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), env(nil))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err = %v, want Problems", err)
			}
			for _, p := range ps {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) {
					return
				}
			}
			t.Errorf("no problem at %s containing %q in:\n%v", tt.path, tt.msg, err)
		})
	}
}
