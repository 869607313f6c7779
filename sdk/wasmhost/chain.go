package wasmhost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
)

// Chains: which of a pipeline's plugins a request runs, and with which
// config (docs/adr/0017-plugin-chains.md).
//
// A Chain is a route's selection, compiled once when the policy is
// loaded: the slots it selects, and those of them that run unless a plan
// or tenant switches them on (Spec.Disabled). An Override is a plan's and
// tenant's settings, compiled once per pipeline: slots switched on, slots
// switched off, and per slot a variant — the same module loaded again
// with another config, with its own instance pool. Plugins always run in
// policy order; a chain only leaves some out. Per-request state stays
// keyed by slot, so a variant reads and writes its slot's state.
//
// The gateway sets a request's chain before the first phase (SetChain);
// the override comes with the request's Tenant (Tenant.Plugins), which a
// host service sets during a callback. It applies from the next plugin
// on: the plugins that ran before the tenant was known, the one that
// resolved it included, keep the route's chain in every phase.

// MaxPlugins is the most plugins a pipeline holds: chains are bit sets
// of 64 slots.
const MaxPlugins = 64

// MaxVariants caps the distinct configs of one plugin a pipeline loads
// (each its own pool of instances); a config beyond it is an error.
const MaxVariants = 64

// ErrTooManyVariants is returned for a config past MaxVariants.
var ErrTooManyVariants = errors.New("too many distinct configs for one plugin")

// Chain is a precompiled selection of a pipeline's plugins. Immutable.
type Chain struct {
	pl *Pipeline
	in uint64 // slots selected
	on uint64 // selected slots that run unless switched off
}

// Override is a plan's and tenant's settings for a pipeline's plugins,
// compiled: what it switches on and off, and the variant each slot runs.
// Immutable; valid for the pipeline that compiled it only.
type Override struct {
	pl      *Pipeline
	on, off uint64
	variant []*Plugin // per slot; nil (or a nil entry): the policy's config
}

// PluginSetting is what a plan or tenant says about one plugin.
type PluginSetting struct {
	Name string
	// Enabled switches the plugin on or off; nil: as the route's chain
	// (and the policy's enabled) say.
	Enabled *bool
	// Config is the plugin's whole config for this setting (the
	// caller merges overrides over the policy's); nil: the policy's.
	Config []byte
}

// selection is a request's chain state; the zero value runs every
// plugin of the pipeline that is not disabled.
type selection struct {
	chain    *Chain
	override *Override
	tenant   *Tenant // the Tenant the override was taken from
	from     int     // the first slot the override applies to
	ran      int     // 1 + the slot of the last plugin picked to run
}

// variants are the configs of a pipeline's plugins loaded beside the
// policy's, by slot and SHA-256 of the config.
type variants struct {
	host   *Host
	specs  []Spec
	mu     sync.Mutex
	bySlot []map[[32]byte]*variantLoad
	closed bool
	max    int // MaxVariants; lower in tests
}

type variantLoad struct {
	done chan struct{}
	p    *Plugin
	err  error
}

// initChains records what variants are loaded from and builds the
// default chain: every plugin, those not disabled on.
func (pl *Pipeline) initChains(h *Host, specs []Spec) {
	pl.vars = &variants{host: h, specs: specs, bySlot: make([]map[[32]byte]*variantLoad, len(specs)), max: MaxVariants}
	all := &Chain{pl: pl}
	for i, s := range specs {
		all.in |= 1 << i
		if !s.Disabled {
			all.on |= 1 << i
		}
	}
	pl.all = all
}

// Chain compiles the selection of the plugins named names (nil: every
// plugin). Names must be the pipeline's, each once; they run in policy
// order whatever the order given.
func (pl *Pipeline) Chain(names []string) (*Chain, error) {
	if pl == nil {
		return nil, nil
	}
	if names == nil {
		return pl.all, nil
	}
	c := &Chain{pl: pl}
	for _, n := range names {
		slot := pl.slotOf(n)
		if slot < 0 {
			return nil, fmt.Errorf("chain: no plugin %q in the pipeline", n)
		}
		c.in |= 1 << slot
	}
	c.on = c.in & pl.all.on
	return c, nil
}

// Override compiles settings, loading each config not loaded yet as a
// variant (a plugin refusing its config is an error naming it).
func (pl *Pipeline) Override(ctx context.Context, settings []PluginSetting) (*Override, error) {
	o := &Override{pl: pl}
	for _, s := range settings {
		slot := pl.slotOf(s.Name)
		if slot < 0 {
			return nil, fmt.Errorf("no plugin %q in the pipeline", s.Name)
		}
		if s.Enabled != nil {
			if *s.Enabled {
				o.on |= 1 << slot
			} else {
				o.off |= 1 << slot
			}
		}
		if s.Config == nil {
			continue
		}
		v, err := pl.Variant(ctx, s.Name, s.Config)
		if err != nil {
			return nil, err
		}
		if v != pl.plugins[slot] {
			if o.variant == nil {
				o.variant = make([]*Plugin, len(pl.plugins))
			}
			o.variant[slot] = v
		}
	}
	return o, nil
}

// Variant returns the plugin named name loaded with config: the policy's
// own when config is the same bytes, else a variant, loaded on first use
// and kept until the pipeline closes. The error of a config the plugin
// refuses names the plugin and is not kept: the next call tries again.
func (pl *Pipeline) Variant(ctx context.Context, name string, config []byte) (*Plugin, error) {
	slot := pl.slotOf(name)
	if slot < 0 {
		return nil, fmt.Errorf("no plugin %q in the pipeline", name)
	}
	base := pl.plugins[slot]
	if bytes.Equal(config, base.spec.Config) {
		return base, nil
	}
	vs := pl.vars
	key := sha256.Sum256(config)
	vs.mu.Lock()
	if vs.closed {
		vs.mu.Unlock()
		return nil, fmt.Errorf("plugin %q: the pipeline is closed", name)
	}
	m := vs.bySlot[slot]
	if m == nil {
		m = make(map[[32]byte]*variantLoad)
		vs.bySlot[slot] = m
	}
	if l, ok := m[key]; ok {
		vs.mu.Unlock()
		select {
		case <-l.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("plugin %q: waiting for a config to load: %w", name, ctx.Err())
		}
		if l.err != nil {
			return nil, l.err
		}
		return l.p, nil
	}
	if len(m) >= vs.max {
		vs.mu.Unlock()
		return nil, fmt.Errorf("plugin %q: %w (at most %d per policy load)", name, ErrTooManyVariants, vs.max)
	}
	l := &variantLoad{done: make(chan struct{})}
	m[key] = l
	vs.mu.Unlock()

	l.p, l.err = vs.load(ctx, slot, config, base)
	vs.mu.Lock()
	if l.err != nil {
		delete(m, key)
	} else if vs.closed {
		l.p.Close()
		l.p, l.err = nil, fmt.Errorf("plugin %q: the pipeline is closed", name)
	}
	vs.mu.Unlock()
	close(l.done)
	return l.p, l.err
}

func (vs *variants) load(ctx context.Context, slot int, config []byte, base *Plugin) (*Plugin, error) {
	spec := vs.specs[slot]
	spec.Slot, spec.Config = slot, bytes.Clone(config)
	p, err := vs.host.Load(ctx, spec)
	if err != nil {
		return nil, err
	}
	if p.phases != base.phases {
		p.Close()
		return nil, fmt.Errorf("plugin %q: with this config it takes part in phases %s instead of %s: a config must not change a plugin's phases",
			spec.Name, p.phases, base.phases)
	}
	return p, nil
}

// Variants reports how many configs of the plugin named name are loaded
// beside the policy's.
func (pl *Pipeline) Variants(name string) int {
	slot := pl.slotOf(name)
	if pl == nil || slot < 0 {
		return 0
	}
	pl.vars.mu.Lock()
	defer pl.vars.mu.Unlock()
	n := 0
	for _, l := range pl.vars.bySlot[slot] {
		select {
		case <-l.done:
			if l.err == nil {
				n++
			}
		default:
		}
	}
	return n
}

// WithVariants returns the pipeline's plugins in policy order, each
// followed by the variants of it loaded so far (for counters: a
// variant's Stats are its own).
func (pl *Pipeline) WithVariants() []*Plugin {
	if pl == nil {
		return nil
	}
	out := make([]*Plugin, 0, len(pl.plugins))
	pl.vars.mu.Lock()
	defer pl.vars.mu.Unlock()
	for slot, p := range pl.plugins {
		out = append(out, p)
		for _, l := range pl.vars.bySlot[slot] {
			select {
			case <-l.done:
				if l.p != nil {
					out = append(out, l.p)
				}
			default:
			}
		}
	}
	return out
}

// closeVariants closes every variant; loads finishing later close theirs.
func (pl *Pipeline) closeVariants() {
	vs := pl.vars
	if vs == nil {
		return
	}
	vs.mu.Lock()
	vs.closed = true
	var done []*Plugin
	for _, m := range vs.bySlot {
		for _, l := range m {
			select {
			case <-l.done:
				if l.p != nil {
					done = append(done, l.p)
				}
			default:
			}
		}
	}
	vs.mu.Unlock()
	for _, p := range done {
		p.Close()
	}
}

func (pl *Pipeline) slotOf(name string) int {
	if pl == nil {
		return -1
	}
	for i, p := range pl.plugins {
		if p.spec.Name == name {
			return i
		}
	}
	return -1
}

// SetChain sets the chain r runs (nil: every plugin not disabled). Set it
// before the first phase.
func (r *Request) SetChain(c *Chain) { r.sel.chain = c }

// pick returns the plugin to call in p's slot for r — p, a variant of it,
// or nil when r does not run it — and records that the slot was reached.
func (pl *Pipeline) pick(r *Request, p *Plugin) *Plugin {
	q := pl.chosen(r, p)
	if q != nil {
		r.sel.ran = max(r.sel.ran, p.spec.Slot+1)
	}
	return q
}

// chosen is pick without the record (for Wants).
func (pl *Pipeline) chosen(r *Request, p *Plugin) *Plugin {
	s := &r.sel
	if r.Tenant != s.tenant {
		s.adopt(pl, r.Tenant)
	}
	slot := p.spec.Slot
	bit := uint64(1) << slot
	c := s.chain
	if c == nil {
		c = pl.all
	}
	if c.in&bit == 0 {
		return nil
	}
	run := c.on&bit != 0
	if o := s.override; o != nil && slot >= s.from {
		switch {
		case o.off&bit != 0:
			return nil
		case o.on&bit != 0:
			run = true
		}
		if run && o.variant != nil && o.variant[slot] != nil {
			return o.variant[slot]
		}
	}
	if !run {
		return nil
	}
	return p
}

// adopt takes the override of the request's new tenant: it applies to the
// plugins after the last one picked.
func (s *selection) adopt(pl *Pipeline, t *Tenant) {
	s.tenant = t
	s.override = nil
	if t != nil && t.Plugins != nil && t.Plugins.pl == pl {
		s.override, s.from = t.Plugins, s.ran
	}
}
