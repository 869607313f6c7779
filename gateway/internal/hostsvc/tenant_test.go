package hostsvc

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// oneKey resolves one key to snap.
type oneKey struct{ snap *tenant.Snapshot }

func (k oneKey) Key(_ context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if h != k.snap.Key.Hash {
		return nil, tenant.ErrNotFound
	}
	return k.snap, nil
}

// countingCompiler compiles every set to ov (or err), counting calls.
type countingCompiler struct {
	ov    *wasmhost.Override
	err   error
	calls int
}

func (c *countingCompiler) Compile(ps *tenant.PluginSet) (*wasmhost.Override, error) {
	c.calls++
	return c.ov, c.err
}

// tenant.resolve hands the tenant's compiled plugin settings to the
// request with its tenant; a snapshot without settings compiles nothing,
// and settings that cannot be compiled fail the resolution.
func TestResolveCarriesPluginOverride(t *testing.T) {
	ov := new(wasmhost.Override)
	on := true
	set := tenant.NewPluginSet("basic", tenant.PluginOverrides{"guard": {Enabled: &on}}, "acme", nil)
	tests := []struct {
		name      string
		plugins   *tenant.PluginSet
		compErr   error
		want      *wasmhost.Override
		wantCalls int
		wantErr   bool
	}{
		{"no settings", nil, nil, nil, 0, false},
		{"settings", set, nil, ov, 1, false},
		{"settings refused", set, errors.New("plugin \"guard\": configuration refused"), nil, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &tenant.Snapshot{
				Key:    tenant.Key{ID: "k", TenantID: "acme", Hash: tenant.HashKey("tg_key"), Status: tenant.StatusActive},
				Tenant: tenant.Tenant{ID: "acme", Status: tenant.StatusActive, PlanID: "basic"},
				Plan:   tenant.Plan{ID: "basic"}, Plugins: tt.plugins,
			}
			comp := &countingCompiler{ov: ov, err: tt.compErr}
			set := NewSet(Config{Log: slog.New(slog.DiscardHandler), Tenants: oneKey{snap}, Now: time.Now})
			set.SetPlugins(comp)
			var c Session
			c.Bind(set)
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			out, err := c.Call(r, "tenant.resolve", []byte("tg_key"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("resolve: %q, %v", out, err)
			}
			if comp.calls != tt.wantCalls {
				t.Errorf("compiled %d times, want %d", comp.calls, tt.wantCalls)
			}
			if tt.wantErr {
				if r.Tenant != nil {
					t.Errorf("a failed resolution set the tenant %+v", r.Tenant)
				}
				return
			}
			if string(out) != "ok" || r.Tenant == nil || r.Tenant.Plugins != tt.want {
				t.Errorf("resolve = %q, tenant %+v; want ok with override %p", out, r.Tenant, tt.want)
			}
		})
	}
}
