package e2e

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
)

// The network drills put a fault-injecting proxy (testkit/faultnet)
// between the gateway and its Redis or Postgres: latency above the
// timeout, or a partition — connections accepted and hung, bytes
// swallowed, nothing refused or reset, so the gateway learns of it only
// from its own timeouts. Connections a partition hung stay hung after it
// heals: the gateway must give them up by itself.

// drillRedisTimeout is redis.timeout in the network drills: production's
// (policies/production.yaml), since what they measure is that a request
// waits no longer than it.
const drillRedisTimeout = 100 * time.Millisecond

// drillRedisDelay is the latency the redis-slow drill adds each way: a
// round trip takes 300 ms, three times the timeout.
const drillRedisDelay = 150 * time.Millisecond

// refusalP99Within bounds the 99th percentile of how long a request
// refused for want of Redis took, from sending to the end of the reply:
// ratelimit and budget each wait one redis.timeout (200 ms in all), the
// rest is the machine's. A request that waited on a hung connection
// would take seconds, or forever.
const refusalP99Within = 2*drillRedisTimeout + 800*time.Millisecond

// redisBackWithin bounds how long after a partition heals the gateway
// serves from Redis again: its client gives up a hung connection after
// its write timeout (redis dial timeout, 1 s) and dials anew.
const redisBackWithin = 3 * time.Second

// drillLease is the budget lease in the network drills.
const drillLease = 2 * time.Second

// percentile returns the p-th percentile (0 < p ≤ 1) of the reply times of
// the outcomes f accepts, and how many there were.
func percentile(outs []drillOutcome, p float64, f func(o *drillOutcome) bool) (time.Duration, int) {
	var ds []time.Duration
	for i := range outs {
		if f(&outs[i]) {
			ds = append(ds, outs[i].ended.Sub(outs[i].started))
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	i := int(float64(len(ds))*p+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))], len(ds)
}

// settled waits (up to 15 s) until the proxy has no hung connection
// left and no more open than before the fault, and the process no more
// goroutines than before it (give or take slack): the gateway gave up
// every connection the fault hung and did not pile up goroutines waiting
// on them. It returns what it saw last.
func settled(t *testing.T, p *faultnet.Proxy, openBefore, goroutinesBefore int, checkHung bool) (faultnet.Stats, int) {
	t.Helper()
	const slack = 25 // the load's own keep-alive connections, timers
	var st faultnet.Stats
	var g int
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, g = p.Stats(), runtime.NumGoroutine()
		if (!checkHung || st.Hung == 0) && st.Open <= openBefore && g <= goroutinesBefore+slack {
			return st, g
		}
		if time.Now().After(end) {
			t.Errorf("15 s after the fault: %+v (open before: %d), %d goroutines (before: %d): connections or goroutines piled up",
				st, openBefore, g, goroutinesBefore)
			return st, g
		}
	}
}

// TestDrillRedisSlow puts 150 ms of latency each way between the gateway
// and Redis (redis.timeout 100 ms) under streaming load, then removes it.
// Promised (docs/POLICY.md, redis.timeout and on_redis_error): a command
// waits no longer than the timeout; each plugin then applies its
// on_redis_error — ratelimit fail_open decides in-process, budget
// fail_closed refuses with 503 budget_unavailable — so no request hangs;
// streams already admitted finish; every answered request has its row;
// the counter is reconciled with call_log once Redis is fast again.
func TestDrillRedisSlow(t *testing.T) {
	redisNetDrill(t, "redis-slow")
}

// TestDrillRedisPartition partitions the gateway from Redis under
// streaming load (connections hang, nothing refused), then heals it.
// Promised as for redis-slow, and: after the heal the gateway gives up the
// hung connections and uses Redis again within redisBackWithin, with no
// pile-up of connections or goroutines.
func TestDrillRedisPartition(t *testing.T) {
	redisNetDrill(t, "redis-partition")
}

func redisNetDrill(t *testing.T, id string) {
	partition := id == "redis-partition"
	tenantID := "drill-" + id
	w := newDrillWorld(t)
	key := w.tenant(t, tenantID)
	px := faultnet.Start(t, w.redis.Addr())
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{reconcile: "1s", lease: drillLease.String(),
		redisAddr: px.Addr(), redisTimeout: drillRedisTimeout.String()}))
	metrics := srv.MetricsHandler()
	load := newDrillLoad(t, tenantID, gw, key, scaled(8, 32), healthyStreams)
	// Warm: key cached, counter seeded, the functions loaded, connections
	// open. One request first, alone: the first one seeds the counter
	// from Postgres, which concurrent first requests would each wait for
	// within the 100 ms timeout.
	workers := load.workers
	load.workers = 1
	load.run(1)
	load.workers = workers
	load.run(scaled(16, 64))
	openBefore, goroutinesBefore := px.Stats().Open, runtime.NumGoroutine()
	load.start()
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))

	fallbacks := metric(t, metrics, "tollgate_ratelimit_decisions_total", `result="fallback"`)
	faulted := time.Now()
	if partition {
		px.Partition()
	} else if err := px.SetDelay(drillRedisDelay); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scaled(1500*time.Millisecond, 5*time.Second))
	hungAtHeal := px.Stats().Hung
	px.Heal()
	healed := time.Now()
	recovered := waitOutcome(t, load, healed, func(o *drillOutcome) bool { return o.kind == served })
	// Reserves Redis ran after the gateway had stopped waiting for them
	// left holds no request settles: they expire with their lease (2 s),
	// dropped by the next call that touches the counter. The load runs
	// past it.
	time.Sleep(max(time.Until(healed.Add(drillLease+500*time.Millisecond)), time.Until(recovered.Add(scaled(500*time.Millisecond, 3*time.Second)))))
	load.stopLoad()
	stopped := time.Now()
	outs := load.outcomes()
	fallbacks = metric(t, metrics, "tollgate_ratelimit_decisions_total", `result="fallback"`) - fallbacks

	refusals, lastRefusal := 0, time.Time{}
	isRefusal := func(o *drillOutcome) bool {
		return o.kind == refused && o.status == 503 && o.code == "budget_unavailable" && o.ended.After(faulted)
	}
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		if isRefusal(o) {
			refusals++
			if o.started.After(lastRefusal) {
				lastRefusal = o.started
			}
			return true
		}
		return o.kind == served
	})
	if refusals == 0 || fallbacks == 0 {
		t.Errorf("the fault was not seen under load: %d budget refusals, %v ratelimit fallbacks", refusals, fallbacks)
	}
	p99, n := percentile(outs, 0.99, isRefusal)
	if p99 > refusalP99Within {
		t.Errorf("refusals took up to %s at the 99th percentile (%d refusals, %s); want ≤ %s: requests waited on Redis past redis.timeout (%s)",
			dur(p99), n, latency(outs, isRefusal), dur(refusalP99Within), drillRedisTimeout)
	}
	back := recovered.Sub(healed)
	if back > redisBackWithin {
		t.Errorf("served again %s after the heal; want ≤ %s", dur(back), redisBackWithin)
	}
	if late := lastRefusal.Sub(healed); late > redisBackWithin {
		t.Errorf("a request sent %s after the heal was refused budget_unavailable; refusals must stop within %s", dur(late), redisBackWithin)
	}
	st, goroutines := settled(t, px, openBefore, goroutinesBefore, true)
	settledAt := time.Now()

	c := w.checkLedger(t, tenantID, outs, nil)
	expectNothingLost(t, c)
	if held := w.waitReleased(t, tenantID, 5*time.Second); held != 0 {
		t.Errorf("%d µ$ still held after the load, whose last requests came after the lease (%s) of every request sent during the fault", held, drillLease)
	}
	t.Logf("phases: fault %s, load stopped %s after the heal, settled %s later, ledger checked %s after that",
		dur(healed.Sub(faulted)), dur(stopped.Sub(healed)), dur(settledAt.Sub(stopped)), dur(time.Since(settledAt)))
	var spent int64
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if spent, _ = w.budgetCounter(t, tenantID); spent == c.sum {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the Redis counter (%d µ$) did not converge to call_log's sum (%d µ$)", spent, c.sum)
		}
	}
	drift := metric(t, metrics, "tollgate_budget_reconcile_drift_micros_total", "")

	fault := fmt.Sprintf("%s of latency added each way between the gateway and Redis (a round trip %s; redis.timeout %s) for %s, then removed",
		dur(drillRedisDelay), dur(2*drillRedisDelay), dur(drillRedisTimeout), dur(healed.Sub(faulted)))
	hung := ""
	if partition {
		fault = fmt.Sprintf("the gateway partitioned from Redis for %s (connections accepted and hung, bytes swallowed, nothing refused or reset; redis.timeout %s), then healed; the connections it hung stay hung",
			dur(healed.Sub(faulted)), dur(drillRedisTimeout))
		hung = fmt.Sprintf("; %d connections hung at the heal, all given up by the gateway afterwards (%d open after, %d before), %d goroutines after (%d before)",
			hungAtHeal, st.Open, openBefore, goroutines, goroutinesBefore)
	}
	report(t, drillResult{
		id:    id,
		fault: fault,
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s; %d streams open at the fault",
			load.workers, len(outs), dur(load.took), openAt(outs, faulted)),
		happened: fmt.Sprintf("ratelimit (fail_open) decided %.0f requests in-process; budget (fail_closed) refused %d with 503 budget_unavailable, "+
			"in %s (99th percentile %s: nothing waited past the timeout); every stream already admitted finished (served: %s); "+
			"served from Redis again %s after the heal%s; holds of reserves Redis ran after the gateway stopped waiting expired with their 2 s lease; "+
			"the counter equals call_log (the reconcile job, every 1 s, corrected %.0f µ$)",
			fallbacks, refusals, latency(outs, isRefusal), dur(p99), latency(outs, healthyServed), dur(back), hung, drift),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^" + strings.Replace(t.Name(), "/", "$/^", -1) + "$",
	})
}
