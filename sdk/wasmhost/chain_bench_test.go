package wasmhost

import (
	"context"
	"testing"
)

// BenchmarkChainPick is what a chain adds to each plugin of each phase:
// the choice of the plugin to call, for a request with a route's chain
// and a tenant's override (a variant in one slot).
func BenchmarkChainPick(b *testing.B) {
	specs := make([]Spec, 4)
	for i := range specs {
		specs[i] = Spec{Name: string(rune('a' + i)), Module: testPlugin(b), Config: []byte(`{"phases":["request"]}`), Instances: 1}
	}
	pl, err := NewPipeline(context.Background(), testHost(b), specs)
	if err != nil {
		b.Fatal(err)
	}
	defer pl.Close()
	c, err := pl.Chain([]string{"a", "b", "d"})
	if err != nil {
		b.Fatal(err)
	}
	on := true
	ov, err := pl.Override(context.Background(), []PluginSetting{{Name: "b", Enabled: &on,
		Config: []byte(`{"phases":["request"],"reject_message":"variant"}`)}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		chain *Chain
		t     *Tenant
	}{
		{"no chain", nil, nil},
		{"chain and override", c, &Tenant{ID: "t", Plugins: ov}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := AcquireRequest()
			defer ReleaseRequest(r)
			r.SetChain(bc.chain)
			r.Tenant = bc.t
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, p := range pl.plugins {
					if pl.pick(r, p) != nil {
						n++
					}
				}
			}
			if n == 0 {
				b.Fatal("nothing picked")
			}
		})
	}
}
