package obs

import (
	"fmt"
	"testing"
)

// BenchmarkLabelCap is the per-request lookup of a tenant's series, for a
// tenant with its own label and one counted as other, with every core
// looking up at once (the map is read-only after admission: no contention).
func BenchmarkLabelCap(b *testing.B) {
	tenants := make([]string, 200)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%03d", i)
	}
	c := NewLabelCap(100, func(v string) *string { return &v })
	for _, t := range tenants {
		c.Get(t)
	}
	for _, bc := range []struct {
		name string
		ids  []string
	}{{"admitted", tenants[:100]}, {"other", tenants[100:]}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					c.Get(bc.ids[i%len(bc.ids)])
					i++
				}
			})
		})
	}
}
