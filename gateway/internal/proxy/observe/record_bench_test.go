package observe

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkRecordTenants is the metrics update of one finished request
// (Record without an access log), cycling over 200 tenants of which the
// first 100 have their own tenant label and the rest count as other, on
// every core at once.
func BenchmarkRecordTenants(b *testing.B) {
	o := NewMetrics(nil, nil, 100)
	o.SetSources(zeroSources())
	fs := make([]Finished, 200)
	for i := range fs {
		fs[i] = finished()
		fs[i].AccessLog = false
		fs[i].Row.TenantID = fmt.Sprintf("tenant-%03d", i)
		o.Record(&fs[i], nil, nil)
	}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			o.Record(&fs[i%len(fs)], nil, log)
			i++
		}
	})
}

// BenchmarkTenantSeries is the tenant-labelled part of Record alone: the
// capped lookup of the tenant's resolved series (cap 100, 200 tenants),
// against resolving them by label values on every request as before the
// cap (WithLabelValues, 3 label hashes and map lookups under a read lock).
func BenchmarkTenantSeries(b *testing.B) {
	tenants := make([]string, 200)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%03d", i)
	}
	b.Run("capped", func(b *testing.B) {
		o := NewMetrics(nil, nil, 100)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			o.tenants.Get(tenants[i%len(tenants)]).add(7, 3, 12)
		}
	})
	b.Run("by_label_values", func(b *testing.B) {
		tokens := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t", Help: "h"}, []string{"tenant", "type"})
		cost := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c", Help: "h"}, []string{"tenant"})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			t := tenants[i%len(tenants)]
			tokens.WithLabelValues(t, "prompt").Add(7)
			tokens.WithLabelValues(t, "completion").Add(3)
			cost.WithLabelValues(t).Add(12)
		}
	})
}
