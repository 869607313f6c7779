package calllog

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
)

// BenchmarkWrite measures rows made durable in Postgres through one Writer
// from 16 goroutines per CPU, queueing to the end of Close's drain, and
// reports the group commit's rows per transaction.
//
//	go test -run '^$' -bench BenchmarkWrite ./gateway/internal/calllog/
func BenchmarkWrite(b *testing.B) {
	pool := newDB(b)
	w := newWriter(b, pool, Options{Logger: slog.New(slog.DiscardHandler)})
	var seq atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			if err := w.Write(context.Background(), row(fmt.Sprintf("b-%d", i), tenants[i%4], 1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	if err := w.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	s := w.Stats()
	if s.Rows != int64(b.N) {
		b.Fatalf("%d rows stored, want %d", s.Rows, b.N)
	}
	b.ReportMetric(s.RowsPerTx(), "rows/tx")
	b.ReportMetric(float64(s.InlineWrites)/float64(b.N), "inline/op")
}
