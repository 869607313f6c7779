package meterstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// benchRequest is one request's counter traffic, as the gateway makes it
// with ratelimit and budget on: admission and hold, then correction and
// settle, against a plan's RPM/TPM and a key's RPM, and three budgets.
func benchRequest(b *testing.B, m *meterstore.Store, id string) {
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: limiter.MaxRPM, TPM: 1 << 40}, {Key: "k:key-1", RPM: limiter.MaxRPM}}
	scopes := []budget.Scope{
		{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 1 << 50, Alerts: []int{80, 100}},
		{Kind: budget.ScopeKey, ID: "key-1", Window: budget.Day, Period: month + "-02", Limit: 1 << 50},
		{Kind: budget.ScopeUser, ID: "user-42@example.com", Window: budget.Day, Period: month + "-02", Limit: 1 << 50},
	}
	a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 1_000},
		&meterstore.Hold{Tenant: "acme", RequestID: id, Scopes: scopes, Amount: 1_000_000, Lease: time.Minute})
	if a.AdmitErr != nil || a.ReserveErr != nil || !a.Reservation.Admitted {
		b.Fatalf("%+v", a)
	}
	out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "acme", Limits: limits, Delta: -400},
		&meterstore.Settlement{Tenant: "acme", RequestID: id, Scopes: scopes, Actual: 700_000})
	if out.AdjustErr != nil || out.SettleErr != nil {
		b.Fatalf("%+v", out)
	}
}

// BenchmarkRequestCounters compares a request's counter traffic in one
// call per pair (onetrip: 2 round trips; the admissions that arrive
// together share a call) with each admission in a call of its own (alone)
// and with the same calls made one after the other (twocalls: 4), against a real Redis on loopback:
// one request at a time (serial, the latency a request sees) and 32 at
// once (parallel, where round trips are pipelined). server-ns/op is Redis's
// own time in the scripts (wall clock: it grows when the machine is busy);
// server-cpu-ns/op is redis-server's CPU time (INFO cpu: scripts, network
// and event loop); rediscalls/op counts the commands the scripts ran;
// client-cpu-ns/op is this process's CPU time: the gateway's side.
func BenchmarkRequestCounters(b *testing.B) {
	srv := redistest.Start(b)
	for _, mode := range []string{"serial", "parallel"} {
		for _, trip := range []string{"onetrip", "alone", "twocalls"} {
			b.Run(mode+"/"+trip, func(b *testing.B) {
				if _, err := srv.Do("FLUSHALL"); err != nil {
					b.Fatal(err)
				}
				c1 := newClient(b, srv)
				var m *meterstore.Store
				if trip != "twocalls" {
					m = meterstore.New(limiter.NewRedis(c1, limiter.RedisOptions{}), budget.NewRedis(c1, nil, budget.RedisOptions{}))
					m.SetShared(trip == "onetrip")
				} else {
					m = meterstore.New(limiter.NewRedis(newClient(b, srv), limiter.RedisOptions{}), budget.NewRedis(c1, nil, budget.RedisOptions{}))
				}
				benchRequest(b, m, "warm") // seed, load the scripts
				if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
					b.Fatal(err)
				}
				cpu0, own0 := serverCPU(b, srv), ownCPU(b)
				b.ReportAllocs()
				var n atomic.Int64
				if mode == "serial" {
					for b.Loop() {
						benchRequest(b, m, strconv.FormatInt(n.Add(1), 10))
					}
				} else {
					b.SetParallelism(16) // × GOMAXPROCS 2: 32 at once
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							benchRequest(b, m, strconv.FormatInt(n.Add(1), 10))
						}
					})
				}
				cpu, own := serverCPU(b, srv)-cpu0, ownCPU(b)-own0
				st := scriptStats(b, srv)
				b.ReportMetric(float64(st.scripts)/float64(b.N), "scripts/op")
				b.ReportMetric(float64(st.usec)*1000/float64(b.N), "server-ns/op")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "server-cpu-ns/op")
				b.ReportMetric(float64(st.inner)/float64(b.N), "rediscalls/op")
				b.ReportMetric(float64(own.Nanoseconds())/float64(b.N), "client-cpu-ns/op")
			})
		}
	}
}

// commandStats are counts from INFO commandstats since CONFIG RESETSTAT.
type commandStats struct {
	scripts, usec int64 // EVALSHA and FCALL calls and the µs Redis spent in them
	inner         int64 // other data commands: those the scripts ran
}

// scriptStats reads INFO commandstats.
func scriptStats(b *testing.B, srv *redistest.Server) commandStats {
	out, err := srv.Do("INFO", "commandstats")
	if err != nil {
		b.Fatal(err)
	}
	var st commandStats
	for line := range strings.Lines(out) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, rest, _ := strings.Cut(rest, ":")
		for f := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			call := name == "evalsha" || name == "fcall"
			switch {
			case call && k == "calls":
				st.scripts += n
			case call && k == "usec":
				st.usec += n
			case k == "calls" && name != "info" && name != "config" && name != "eval" && !call &&
				!strings.HasPrefix(name, "function"):
				st.inner += n
			}
		}
	}
	return st
}

// serverCPU is redis-server's CPU time so far, user and system (INFO cpu).
func serverCPU(b *testing.B, srv *redistest.Server) time.Duration {
	out, err := srv.Do("INFO", "cpu")
	if err != nil {
		b.Fatal(err)
	}
	var sec float64
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s: %v", k, err)
			}
			sec += f
		}
	}
	return time.Duration(sec * float64(time.Second))
}

// ownCPU is this process's CPU time so far, user and system.
func ownCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
