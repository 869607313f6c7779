package budget_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// benchScopes are the scope lists benchmarked: the tenant's month alone,
// and the tenant's month with its key's and its end user's day.
var benchScopes = []struct {
	name   string
	scopes []budget.Scope
}{
	{"1scope", []budget.Scope{{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 1 << 50}}},
	{"3scopes", []budget.Scope{
		{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 1 << 50, Alerts: []int{80, 100}},
		{Kind: budget.ScopeKey, ID: "k_0123456789", Window: budget.Day, Period: "2026-11-03", Limit: 1 << 50},
		{Kind: budget.ScopeUser, ID: "user-42@example.com", Window: budget.Day, Period: "2026-11-03", Limit: 1 << 50},
	}},
}

// benchReserveSettle is one request's budget traffic: Reserve, then
// Settle. Request ids are formatted in the loop (one allocation of the
// benchmark's own) because a settled id cannot be reserved again.
func benchReserveSettle(b *testing.B, c budget.Counter, scopes []budget.Scope, srv *redistest.Server) {
	ctx := context.Background()
	if _, err := c.Settle(ctx, "acme", "warm", scopes, 1); err != nil { // seed
		b.Fatal(err)
	}
	if _, err := c.Reserve(ctx, "acme", "warm2", scopes, 1, time.Minute); err != nil { // load scripts
		b.Fatal(err)
	}
	b.ReportAllocs()
	if srv != nil {
		if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		id := strconv.Itoa(i)
		i++
		res, err := c.Reserve(ctx, "acme", id, scopes, 1_000_000, time.Minute)
		if err != nil || !res.Admitted {
			b.Fatalf("Reserve = %+v, %v", res, err)
		}
		if _, err := c.Settle(ctx, "acme", id, scopes, 700_000); err != nil {
			b.Fatal(err)
		}
	}
	if srv != nil {
		// Redis's own time in the scripts, which the machine's other load
		// disturbs less than the round trips.
		b.ReportMetric(float64(serverMicros(b, srv, "evalsha"))*1000/float64(b.N), "server-ns/op")
	}
}

// serverMicros is the total time Redis spent in a command since the last
// CONFIG RESETSTAT (INFO commandstats usec).
func serverMicros(b *testing.B, srv *redistest.Server, cmd string) int64 {
	out, err := srv.Do("INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				return n
			}
		}
	}
	b.Fatalf("no %s in %q", cmd, out)
	return 0
}

func BenchmarkMemoryReserveSettle(b *testing.B) {
	for _, bs := range benchScopes {
		b.Run(bs.name, func(b *testing.B) {
			benchReserveSettle(b, budget.NewMemory(nil, nil), bs.scopes, nil)
		})
	}
}

func BenchmarkRedisReserveSettle(b *testing.B) {
	srv := redistest.Start(b)
	for _, bs := range benchScopes {
		b.Run(bs.name, func(b *testing.B) {
			// A fresh server state per list: the settled markers and holds
			// of the other run do not weigh on this one.
			if _, err := srv.Do("FLUSHALL"); err != nil {
				b.Fatal(err)
			}
			benchReserveSettle(b, budget.NewRedis(newClient(b, srv), nil, budget.RedisOptions{}), bs.scopes, srv)
		})
	}
}

// BenchmarkMemorySettleMarkers is a Reserve and a Settle with an hour's
// window of markers kept — 1,000,000 of them, a gateway at ~280 requests
// a second, or five minutes of one at ~3,300 — and reports the heap a
// marker costs (B/marker, after a collection) and the garbage collector's
// CPU per operation over the loop (gc-cpu-ns/op, runtime/metrics
// /cpu/classes/gc/total), which grows with the heap it has to mark.
func BenchmarkMemorySettleMarkers(b *testing.B) {
	const markers = 1_000_000
	ctx := context.Background()
	scopes := []budget.Scope{{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 1 << 50}}
	m := budget.NewMemory(nil, nil).WithSettledTTL(time.Hour)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	id := make([]byte, 0, 64)
	next := func(i int) string {
		id = append(append(id[:0], "chatcmpl-"...), strconv.FormatInt(int64(i)*7919, 36)...)
		return string(id)
	}
	for i := range markers {
		if _, err := m.Settle(ctx, "bench", next(i), scopes, 1); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perMarker := float64(after.HeapAlloc-before.HeapAlloc) / markers
	gc := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	gcBefore := gc[0].Value.Float64()
	i := markers
	for b.Loop() {
		i++
		s := next(i)
		if _, err := m.Reserve(ctx, "bench", s, scopes, 1, time.Minute); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Settle(ctx, "bench", s, scopes, 1); err != nil {
			b.Fatal(err)
		}
	}
	metrics.Read(gc)
	b.ReportMetric((gc[0].Value.Float64()-gcBefore)*1e9/float64(b.N), "gc-cpu-ns/op")
	b.ReportMetric(perMarker, "B/marker")
	runtime.KeepAlive(m)
}
