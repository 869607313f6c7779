package e2e

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
)

// The network drills put a fault-injecting proxy (testkit/faultnet)
// between the gateway and its Redis or Postgres: latency above the
// timeout, or a partition — connections accepted and hung, bytes
// swallowed, nothing refused or reset, so the gateway learns of it only
// from its own timeouts. Connections a partition hung stay hung after it
// heals: the gateway must give them up by itself.

// drillRedisTimeout is redis.timeout in the Redis network drills: short
// enough that waiting on a hung connection past it shows, long enough
// that a round trip starved by a loaded 2-core machine (with -race) does
// not time out when nothing is injected. Production's is 100 ms; the
// other drills use 1 s.
const drillRedisTimeout = 500 * time.Millisecond

// drillRedisDelay is the latency the redis-slow drill adds each way: a
// round trip takes 1.2 s, past the timeout.
const drillRedisDelay = 600 * time.Millisecond

// refusalP99Within bounds the 99th percentile of how long a request
// refused for want of Redis took, from sending to the end of the reply:
// it waits for at most two Redis calls, each given up at redis.timeout
// (its admission-and-hold call, and the shared call in flight that it
// queued behind; docs/RELIABILITY.md), the rest is the machine's. A request
// that waited on a hung connection would take its client's 10 s or
// forever.
const refusalP99Within = 2*drillRedisTimeout + time.Second

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

// TestDrillRedisSlow puts 600 ms of latency each way between the gateway
// and Redis (redis.timeout 500 ms) under streaming load, then removes it.
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
	// within the timeout.
	workers := load.workers
	load.workers = 1
	load.run(1)
	load.workers = workers
	load.run(scaled(16, 64))
	openBefore, goroutinesBefore := px.Stats().Open, runtime.NumGoroutine()
	load.start()
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))

	fallbacks := metric(t, metrics, "tollgate_ratelimit_decisions_total", `result="fallback"`)
	redisFailures := metric(t, metrics, "tollgate_redis_failures_total", "")
	faulted := time.Now()
	if partition {
		px.Partition()
	} else if err := px.SetDelay(drillRedisDelay); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scaled(2*time.Second, 5*time.Second))
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
	redisFailures = metric(t, metrics, "tollgate_redis_failures_total", "") - redisFailures

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
			"in %s, 99th percentile %s (asserted ≤ %s: at most two Redis calls waited for, each given up at the %s timeout; %.0f Redis calls failed in all); every stream already admitted finished (served: %s); "+
			"served from Redis again %s after the heal%s; holds of reserves Redis ran after the gateway stopped waiting expired with their 2 s lease; "+
			"the counter equals call_log (the reconcile job, every 1 s, corrected %.0f µ$)",
			fallbacks, refusals, latency(outs, isRefusal), dur(p99), dur(refusalP99Within), dur(drillRedisTimeout), redisFailures,
			latency(outs, healthyServed), dur(back), hung, drift),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^" + strings.Replace(t.Name(), "/", "$/^", -1) + "$",
	})
}

// coldKeyWithin bounds how long a key the cache does not hold waits,
// with Postgres partitioned, for its clear 503: the tenant cache's load
// timeout (tenant.DefaultCacheLoadTimeout, 5 s) and a loaded machine's
// slack.
const coldKeyWithin = 8 * time.Second

// coldAfterHealWithin bounds how long after the heal a key the cache does
// not hold is served: an idle pooled connection the partition hung is
// given up after a ping of at most pg.PingTimeout (1 s), and a pool slot
// held by a connection attempt it hung is freed within pg.ConnectTimeout
// (3 s) of the attempt; with a loaded machine's slack.
const coldAfterHealWithin = pg.PingTimeout + pg.ConnectTimeout + 2*time.Second

// TestDrillPostgresPartition partitions the gateway from Postgres under
// streaming load (its connections hang: nothing refused, nothing reset),
// then heals it. Promised (DESIGN §6, ADR 0004, ADR 0022, docs/POLICY.md
// store.cache): warm requests are served from the caches as before — a
// warm request does no Postgres work before its first byte, and the call
// log does not hold requests: rows go to the write-ahead log and the
// spool; a key the cache does not hold is refused with a clear 503
// tenant_service_unavailable once the cache's load times out; after the
// heal every row lands in Postgres exactly once. Nothing that talks to
// Postgres waits forever on a hung connection.
func TestDrillPostgresPartition(t *testing.T) {
	const id = "postgres-partition"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-pgpart")
	cold := w.tenant(t, "drill-pgpart-cold")            // a real key no request used
	coldAfter := w.tenant(t, "drill-pgpart-cold-after") // another, first used after the heal
	pgAddr := fmt.Sprintf("127.0.0.1:%d", w.pg.Port())
	px := faultnet.Start(t, pgAddr)
	w.gatewayDSN = strings.Replace(w.dsn, pgAddr, px.Addr(), 1)
	if w.gatewayDSN == w.dsn {
		t.Fatalf("the DSN %q does not name %s", w.dsn, pgAddr)
	}
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{}))
	// The gateway's connections the partition hung (and pgx's cancel
	// requests for them, sent during it) would hold its shutdown at the
	// end of the test for up to 15 s, pgx's bound on closing a connection
	// it gave up: close them first, as the network would reset them.
	t.Cleanup(func() { px.Close() })
	load := newDrillLoad(t, "drill-pgpart", gw, key, scaled(8, 32), healthyStreams)
	load.run(scaled(16, 64))
	openBefore, goroutinesBefore := px.Stats().Open, runtime.NumGoroutine()
	load.start()
	time.Sleep(scaled(time.Second, 3*time.Second))

	faulted := time.Now()
	px.Partition()
	// A key the cache does not hold, sent as the partition starts.
	type coldReply struct {
		status int
		code   string
		took   time.Duration
	}
	coldCh := make(chan coldReply, 1)
	go func() {
		start := time.Now()
		status, _, body := post(t, gw+"/v1/chat/completions", chatMax100, "Authorization", "Bearer "+cold)
		r := coldReply{status: status, took: time.Since(start)}
		if e := errorCode(body); e != "" {
			r.code = e
		}
		coldCh <- r
	}()
	// The partition lasts past the tenant cache's TTL (3 s: warm keys are
	// then served stale while their reloads hang) and past the cold key's
	// answer.
	time.Sleep(scaled(4*time.Second, 10*time.Second))
	var cr coldReply
	select {
	case cr = <-coldCh:
	case <-time.After(coldKeyWithin):
		t.Fatalf("a key the cache does not hold had no answer %s into the partition", dur(time.Since(faulted)))
	}
	spooling := srv.AccountingStats().Ledger
	hungAtHeal := px.Stats().Hung
	px.Heal()
	healed := time.Now()
	// After the heal, a key the cache does not hold is looked up on a
	// fresh connection, not on one the partition hung.
	firstStatus, firstTook := 0, time.Duration(0)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		start := time.Now()
		st, _, _ := post(t, gw+"/v1/chat/completions", chatMax100, "Authorization", "Bearer "+coldAfter)
		if firstStatus == 0 {
			firstStatus, firstTook = st, time.Since(start)
		}
		if st == 200 {
			break
		}
	}
	coldServed := time.Since(healed)
	replayedAt := waitSpoolReplayed(t, srv, 60*time.Second, "the heal", true)
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))
	load.stopLoad()
	outs := load.outcomes()

	expectOutcomes(t, outs, func(o *drillOutcome) bool { return o.kind == served })
	if cr.status != 503 || cr.code != "tenant_service_unavailable" {
		t.Errorf("a key the cache does not hold, during the partition: %d %q; want 503 tenant_service_unavailable", cr.status, cr.code)
	}
	if cr.took > coldKeyWithin {
		t.Errorf("a key the cache does not hold waited %s for its 503; want ≤ %s", dur(cr.took), coldKeyWithin)
	}
	if coldServed > coldAfterHealWithin {
		t.Errorf("after the heal, a key the cache did not hold was served %s later (its first try: %d after %s); want ≤ %s",
			dur(coldServed), firstStatus, dur(firstTook), coldAfterHealWithin)
	}
	// No request waited for Postgres: what waits for it waits for a
	// timeout (the cache's load, 5 s; a ledger transaction, 10 s).
	during := func(o *drillOutcome) bool {
		return o.kind == served && o.started.After(faulted) && o.started.Before(healed)
	}
	before := func(o *drillOutcome) bool { return o.kind == served && o.ended.Before(faulted) }
	p99During, nDuring := percentile(outs, 0.99, during)
	p99Before, _ := percentile(outs, 0.99, before)
	if nDuring == 0 || p99During > p99Before+time.Second {
		t.Errorf("during the partition, %d requests served, in up to %s at the 99th percentile (before it: %s): warm requests waited on Postgres",
			nDuring, dur(p99During), dur(p99Before))
	}
	c := w.checkLedger(t, "drill-pgpart", outs, nil)
	expectNothingLost(t, c)
	st := srv.AccountingStats().Ledger
	if st.Lost != 0 || st.Rejected != 0 || st.ReplayedRows != st.SpooledRows {
		t.Errorf("ledger stats %+v: rows lost, rejected or not replayed", st)
	}
	if spent, held := w.budgetCounter(t, "drill-pgpart"); spent != c.sum || held != 0 {
		t.Errorf("Redis counter %d µ$ (held %d), call_log %d µ$", spent, held, c.sum)
	}
	pst, goroutines := settled(t, px, openBefore+maxGatewayPGConns, goroutinesBefore, false)
	report(t, drillResult{
		id: id,
		fault: fmt.Sprintf("the gateway partitioned from Postgres for %s (connections accepted and hung, bytes swallowed, nothing refused or reset), then healed; the connections it hung stay hung",
			dur(healed.Sub(faulted))),
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s; %d streams open at the partition",
			load.workers, len(outs), dur(load.took), openAt(outs, faulted)),
		happened: fmt.Sprintf("every request served whole from the caches (tenant cache TTL 3 s, stale served while reloads hung), %d during the partition in %s (99th percentile %s; before it %s); "+
			"a key the cache did not hold refused 503 %s after %s, and one first used after the heal served %s after it; %d call_log rows in the spool at the heal, %d in all, replayed %s after it; Redis counter = call_log; "+
			"%d connections hung at the heal; after it %d open (%d before: the pools' new ones and hung ones not yet given up, within the pools' %d), %d goroutines (%d before)",
			nDuring, latency(outs, during), dur(p99During), dur(p99Before), cr.code, dur(cr.took), dur(coldServed), spooling.SpooledRows, st.SpooledRows, dur(replayedAt.Sub(healed)),
			hungAtHeal, pst.Open, openBefore, maxGatewayPGConns, goroutines, goroutinesBefore),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillPostgresPartition$",
	})
}

// maxGatewayPGConns is the most Postgres connections a gateway holds:
// the tenant store's pool (pgxpool's default, the greater of 4 and the
// CPUs), the call log's 4 and the eviction listener's one.
var maxGatewayPGConns = max(4, runtime.NumCPU()) + 4 + 1
