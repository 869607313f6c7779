package meterstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// BenchmarkClusterRequestCounters is BenchmarkRequestCounters' request
// (admission and hold, then correction and settle: two FCALLs) from 32
// goroutines of one client, over 96 tenants, against one standalone
// redis-server and against Redis Clusters of 1, 2 and 3 masters (no
// replicas) on loopback. req/s is requests a second, calls/s FCALLs a
// second (two a request); server-cpu-ns/op is the CPU time of all the
// redis-servers together, client-cpu-ns/op this process's. Every process
// shares the machine's cores: on a 2-core machine more masters add event
// loops, not cores.
func BenchmarkClusterRequestCounters(b *testing.B) {
	tenants := make([]string, 96)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%d", i)
	}
	for _, shape := range []string{"standalone", "masters=1", "masters=2", "masters=3"} {
		// The servers and the client are made once per shape, not once
		// per b.N the benchmark tries.
		var nodes []*redistest.Server
		if shape == "standalone" {
			nodes = []*redistest.Server{redistest.Start(b)}
		} else {
			n, _ := strconv.Atoi(shape[len("masters="):])
			nodes = redistest.StartCluster(b, n, 0).Nodes()
		}
		addrs := make([]string, len(nodes))
		for i, s := range nodes {
			addrs[i] = s.Addr()
		}
		c, err := redisx.New(redisx.Options{Addrs: addrs, Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.Connect(ctx)
		if err == nil {
			err = meterstore.Preload(ctx, c)
		}
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), budget.NewRedis(c, nil, budget.RedisOptions{}))
		for _, tn := range tenants { // seed every tenant's counters
			benchTenantRequest(b, m, tn, "warm")
		}
		var n atomic.Int64 // request ids, unique across the rounds b.Run makes
		b.Run(shape, func(b *testing.B) {
			cpu0 := clusterCPU(b, nodes)
			own0 := ownCPU(b)
			b.ReportAllocs()
			b.SetParallelism(16) // × GOMAXPROCS 2: 32 at once
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					benchTenantRequest(b, m, tenants[i%int64(len(tenants))], strconv.FormatInt(i, 10))
				}
			})
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
			b.ReportMetric(2*float64(b.N)/elapsed.Seconds(), "calls/s")
			b.ReportMetric(float64((clusterCPU(b, nodes)-cpu0).Nanoseconds())/float64(b.N), "server-cpu-ns/op")
			b.ReportMetric(float64((ownCPU(b)-own0).Nanoseconds())/float64(b.N), "client-cpu-ns/op")
		})
	}
}

// benchTenantRequest is benchRequest for tenant.
func benchTenantRequest(b *testing.B, m *meterstore.Store, tenant, id string) {
	benchTenantRequestThen(b, m, tenant, id, func() {})
}

// benchTenantRequestThen is benchTenantRequest, running after after each
// of the two calls.
func benchTenantRequestThen(b *testing.B, m *meterstore.Store, tenant, id string, after func()) {
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: limiter.MaxRPM, TPM: 1 << 40}, {Key: "k:key-1", RPM: limiter.MaxRPM}}
	scopes := []budget.Scope{
		{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 1 << 50, Alerts: []int{80, 100}},
		{Kind: budget.ScopeKey, ID: "key-1", Window: budget.Day, Period: month + "-02", Limit: 1 << 50},
		{Kind: budget.ScopeUser, ID: "user-42@example.com", Window: budget.Day, Period: month + "-02", Limit: 1 << 50},
	}
	a := m.AdmitReserve(ctx, &limiter.Request{Tenant: tenant, Limits: limits, Tokens: 1_000},
		&meterstore.Hold{Tenant: tenant, RequestID: id, Scopes: scopes, Amount: 1_000_000, Lease: time.Minute})
	if a.AdmitErr != nil || a.ReserveErr != nil || !a.Reservation.Admitted {
		b.Fatalf("%+v", a)
	}
	after()
	out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: tenant, Limits: limits, Delta: -400},
		&meterstore.Settlement{Tenant: tenant, RequestID: id, Scopes: scopes, Actual: 700_000})
	if out.AdjustErr != nil || out.SettleErr != nil {
		b.Fatalf("%+v", out)
	}
	after()
}

// clusterCPU is the CPU time of all of nodes so far.
func clusterCPU(b *testing.B, nodes []*redistest.Server) time.Duration {
	var d time.Duration
	for _, s := range nodes {
		d += serverCPU(b, s)
	}
	return d
}

// BenchmarkReplicatedWait prices WAIT, which would make a master's
// acknowledgement mean "on its replica too" (so a killed master could not
// lose it): the request of BenchmarkClusterRequestCounters from 32
// goroutines against a master with one replica, as the gateway sends it
// (nowait) and with WAIT 1 after each of its two calls (wait), as a
// gateway that waited would: one more round trip a call, which lasts
// until the replica has acknowledged.
func BenchmarkReplicatedWait(b *testing.B) {
	master := redistest.Start(b)
	replica := redistest.Start(b, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if info, err := replica.Do("INFO", "replication"); err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica did not sync")
		}
	}
	c, err := redisx.New(redisx.Options{Addrs: []string{master.Addr()}, Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		b.Fatal(err)
	}
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), budget.NewRedis(c, nil, budget.RedisOptions{}))
	rc, err := c.Raw()
	if err != nil {
		b.Fatal(err)
	}
	// WAIT waits for the replica to acknowledge the offset of its own
	// connection's last write, and a pipelined client shares connections:
	// so each WAIT is sent after a write of its own on the same connection
	// (one DoMulti: rueidis gives a pipeline holding a blocking command a
	// connection of its own). The replication stream is in order, so its
	// acknowledgement covers the call that ended before it.
	wait := func(tn string) {
		res := rc.DoMulti(context.Background(), rc.B().Incr().Key("{"+tn+"}:wait").Build(), rc.B().Wait().Numreplicas(1).Timeout(1000).Build())
		if n, err := res[1].AsInt64(); err != nil || n != 1 {
			b.Fatalf("WAIT: %d replicas, %v", n, err)
		}
	}
	var n atomic.Int64
	for _, mode := range []string{"nowait", "wait"} {
		b.Run(mode, func(b *testing.B) {
			b.SetParallelism(16)
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					tn := fmt.Sprintf("tenant-%d", i%96)
					if mode == "nowait" {
						benchTenantRequest(b, m, tn, strconv.FormatInt(i, 10))
						continue
					}
					benchTenantRequestThen(b, m, tn, strconv.FormatInt(i, 10), func() { wait(tn) })
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
		})
	}
}
