package chains

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// LoadTimeout bounds the loading of one override's variants.
const LoadTimeout = 2 * time.Minute

// Compiler compiles plugin overrides for one pipeline. It is immutable
// and safe for concurrent use.
type Compiler struct {
	pipe *wasmhost.Pipeline
	// base is each plugin's config in the policy, canonical (MergePatch's
	// encoding), by name.
	base map[string][]byte
}

// New returns the compiler for pipe, whose plugins were loaded from specs
// (their configs are the ones overrides are merged over). A nil pipe
// compiles nothing: every override is an error.
func New(pipe *wasmhost.Pipeline, specs []wasmhost.Spec) (*Compiler, error) {
	c := &Compiler{pipe: pipe, base: make(map[string][]byte, len(specs))}
	for _, s := range specs {
		cfg, err := Canonical(s.Config)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: config: %w", s.Name, err)
		}
		c.base[s.Name] = cfg
	}
	return c, nil
}

// Compile returns ps compiled for the compiler's pipeline: the one kept
// with ps when there is one, else compiled now (loading the variants not
// loaded yet) and kept with ps. A nil ps compiles to nil.
func (c *Compiler) Compile(ps *tenant.PluginSet) (*wasmhost.Override, error) {
	if ps == nil || c == nil {
		return nil, nil
	}
	if ov, ok := ps.Compiled(c.pipe).(*wasmhost.Override); ok {
		return ov, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), LoadTimeout)
	defer cancel()
	ov, err := c.compile(ctx, ps.Plan, ps.Tenant)
	if err != nil {
		return nil, fmt.Errorf("plugins of tenant %q on plan %q: %w", ps.TenantID, ps.PlanID, err)
	}
	ps.SetCompiled(c.pipe, ov)
	return ov, nil
}

// Check compiles a plan's overrides and, over them, a tenant's (either
// may be nil), loading the variants they need: nil when every plugin
// named is the policy's and accepts its merged config; else an error
// naming the plugin, with the plugin's own message.
func (c *Compiler) Check(ctx context.Context, plan, tn tenant.PluginOverrides) error {
	_, err := c.compile(ctx, plan, tn)
	return err
}

func (c *Compiler) compile(ctx context.Context, plan, tn tenant.PluginOverrides) (*wasmhost.Override, error) {
	names := make([]string, 0, len(plan)+len(tn))
	for n := range plan {
		names = append(names, n)
	}
	for n := range tn {
		if _, dup := plan[n]; !dup {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	settings := make([]wasmhost.PluginSetting, 0, len(names))
	var errs []error
	for _, name := range names {
		s, err := c.setting(name, plan[name], tn[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		settings = append(settings, s)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(settings) == 0 {
		return nil, nil
	}
	if c.pipe == nil {
		return nil, errors.New("the policy has no plugins")
	}
	return c.pipe.Override(ctx, settings)
}

// setting merges one plugin's plan and tenant overrides over the policy.
func (c *Compiler) setting(name string, plan, tn tenant.PluginOverride) (wasmhost.PluginSetting, error) {
	s := wasmhost.PluginSetting{Name: name, Enabled: plan.Enabled}
	if tn.Enabled != nil {
		s.Enabled = tn.Enabled
	}
	base, ok := c.base[name]
	if !ok {
		return s, fmt.Errorf("plugin %q: the policy has no plugin of that name (its plugins: %s)", name, c.names())
	}
	cfg := base
	for _, patch := range [][]byte{plan.Config, tn.Config} {
		if patch == nil {
			continue
		}
		merged, err := MergePatch(cfg, patch)
		if err != nil {
			return s, fmt.Errorf("plugin %q: config: %w (it must be a JSON object: a merge patch over the policy's config)", name, err)
		}
		cfg = merged
	}
	if !bytes.Equal(cfg, base) {
		s.Config = cfg
	}
	return s, nil
}

func (c *Compiler) names() string {
	names := make([]string, 0, len(c.base))
	for n := range c.base {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
