package proxy

import (
	"fmt"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// PluginSpecs turns a policy's plugins into what the plugin host loads:
// each module (built-in or read from its file), its config as JSON and its
// limits. `tollgate plugin warm` compiles the same specs, so the code it
// caches is the code a server looks up (the cache is keyed on the module
// bytes after instrumentation, which interruptible changes).
func PluginSpecs(p *config.Policy) ([]wasmhost.Spec, error) {
	specs := make([]wasmhost.Spec, 0, len(p.Plugins))
	for i := range p.Plugins {
		pl := &p.Plugins[i]
		bin, err := pl.Module()
		if err != nil {
			return nil, fmt.Errorf("plugin %q: %w", pl.Name, err)
		}
		cfg, err := pluginConfigJSON(pl.Config)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: config: %w", pl.Name, err)
		}
		spec := wasmhost.Spec{Name: pl.Name, Module: bin, Config: cfg, MemoryBytes: int64(pl.Limits.Memory),
			Deadline: pl.Limits.Deadline, Instances: pl.Limits.Instances}
		if pl.Limits.Interruptible != nil && !*pl.Limits.Interruptible {
			spec.Uninterruptible = true
		}
		spec.Disabled = !pl.PluginEnabled()
		if pl.OnError == config.FailOpen {
			spec.OnError = wasmhost.FailOpen
		}
		specs = append(specs, spec)
	}
	return specs, nil
}
