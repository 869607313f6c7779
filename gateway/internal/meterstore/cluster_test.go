package meterstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// The load of the cluster tests, per tenant: more requests than the rate
// limit admits, and a budget that fits fewer than that, so both refuse.
const (
	clRPM      = 30  // rate limit: the first 30 requests admitted
	clBudgetN  = 20  // budget: room for exactly 20 holds of clCost
	clCost     = 500 // held and settled per request
	clRequests = 90
	clWorkers  = 32
)

// clusterGateway is what one gateway replica has of the counters: its own
// Redis client on the cluster and a one-trip Store on it.
type clusterGateway struct {
	c *redisx.Client
	m *meterstore.Store
	b *budget.Redis
}

func newClusterGateway(t *testing.T, cl *redistest.Cluster) *clusterGateway {
	t.Helper()
	// The command timeout bounds the retries of a call refused while a
	// slot migrates or a master fails over; 2s, as the e2e tests'.
	c, err := redisx.New(redisx.Options{Addrs: cl.Addrs(), Timeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := meterstore.Preload(ctx, c); err != nil {
		t.Fatal(err)
	}
	seed := func(context.Context, string, budget.Scope) (int64, error) { return 0, nil }
	b := budget.NewRedis(c, seed, budget.RedisOptions{})
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), b)
	if !m.OneTrip() {
		t.Fatal("the Store is not one-trip")
	}
	return &clusterGateway{c: c, m: m, b: b}
}

// spreadTenants returns perMaster tenant names (prefix-0, prefix-1, …)
// for each master of cl, and the master of each.
func spreadTenants(t *testing.T, cl *redistest.Cluster, prefix string, perMaster int) (tenants []string, owner map[string]*redistest.Server) {
	t.Helper()
	count := map[*redistest.Server]int{}
	owner = map[string]*redistest.Server{}
	masters := len(cl.Masters())
	for i := 0; len(tenants) < perMaster*masters; i++ {
		if i > 10_000 {
			t.Fatal("could not spread tenants over the masters")
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		slot, err := cl.Slot("{" + name + "}")
		if err != nil {
			t.Fatal(err)
		}
		o, err := cl.Owner(slot)
		if err != nil {
			t.Fatal(err)
		}
		if count[o] < perMaster {
			count[o]++
			owner[name] = o
			tenants = append(tenants, name)
		}
	}
	return tenants, owner
}

// tally is what one tenant's requests got.
type tally struct {
	rate, held, errs atomic.Int64 // admitted by the rate limit, by the budget; calls that failed
	settled          atomic.Int64 // settles acknowledged
	lastErr          atomic.Pointer[string]
	errAt            [2]atomic.Int64 // Unix ns of the first and last failure
}

func scopeOf() budget.Scope {
	return budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: clBudgetN*clCost + clCost - 1}
}

// clusterLoad sends clRequests requests per tenant from clWorkers
// goroutines, alternating between the gateways, each admitted, held and
// settled as the gateway does (rate limit fail_closed).
//
// disturb, if not nil, runs while the requests run; the requests of the
// gated tenant wait until it calls open, and are then sent one every
// 5 ms for as long as it runs, so that the tenant's admissions and
// settles straddle the disturbance. during is how many of the gated
// tenant's requests, and admitted is how many of its admissions, ended
// while disturb ran.
func clusterLoad(t *testing.T, gws []*clusterGateway, tenants []string, gated string, disturb func(open func())) (tallies map[string]*tally, elapsed time.Duration, during, admitted int64) {
	return clusterLoadPaced(t, gws, tenants, gated, 5*time.Millisecond, disturb)
}

// clusterLoadPaced is clusterLoad with the gated tenant's requests sent
// one every every while disturb runs.
func clusterLoadPaced(t *testing.T, gws []*clusterGateway, tenants []string, gated string, every time.Duration, disturb func(open func())) (tallies map[string]*tally, elapsed time.Duration, during, admitted int64) {
	tallies = map[string]*tally{}
	for _, tn := range tenants {
		tallies[tn] = &tally{}
	}
	total := int64(clRequests * len(tenants))
	var next, dur, adm atomic.Int64
	var disturbing atomic.Bool
	gate := make(chan struct{})
	var openOnce sync.Once
	open := func() { openOnce.Do(func() { close(gate) }) }
	if disturb == nil {
		open()
	}
	var paceMu sync.Mutex
	var lastSent time.Time
	pace := func() {
		<-gate
		paceMu.Lock()
		defer paceMu.Unlock()
		if !disturbing.Load() {
			return
		}
		if d := every - time.Since(lastSent); d > 0 {
			time.Sleep(d)
		}
		lastSent = time.Now()
	}
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: clRPM}}
	failed := func(tl *tally, err error) {
		now := time.Now().UnixNano()
		tl.errAt[0].CompareAndSwap(0, now)
		tl.errAt[1].Store(now)
		tl.errs.Add(1)
		s := err.Error()
		tl.lastErr.Store(&s)
	}
	ended := func(tl *tally, out meterstore.Settled) {
		if out.SettleErr != nil {
			failed(tl, out.SettleErr)
		} else {
			tl.settled.Add(1)
		}
	}
	// The ends go as a gateway's do: after the reply when they may
	// (End), the tenant's next admissions carrying them.
	for _, g := range gws {
		g.m.OnEnd(func(_ *meterstore.Correction, st *meterstore.Settlement, out meterstore.Settled) {
			ended(tallies[st.Tenant], out)
		})
	}
	defer func() {
		for _, g := range gws {
			g.m.Wait()
		}
	}()
	start := time.Now()
	one := func(i int64, w int) {
		tn := tenants[i%int64(len(tenants))]
		if tn == gated && i >= int64(len(tenants)) {
			pace()
		}
		tl := tallies[tn]
		g := gws[int(i)%len(gws)]
		id := fmt.Sprintf("r%d-w%d", i, w)
		fail := func(err error) { failed(tl, err) }
		a := g.m.AdmitReserve(ctx, &limiter.Request{Tenant: tn, Limits: limits, Tokens: 1, OnError: limiter.FailClosed},
			&meterstore.Hold{Tenant: tn, RequestID: id, Scopes: []budget.Scope{scopeOf()}, Amount: clCost, Lease: time.Minute})
		switch {
		case a.AdmitErr != nil:
			fail(a.AdmitErr)
		case !a.Decision.Allowed:
		case a.ReserveErr != nil:
			tl.rate.Add(1)
			fail(a.ReserveErr)
		case !a.Reservation.Admitted:
			tl.rate.Add(1)
		default:
			tl.rate.Add(1)
			tl.held.Add(1)
			if out, deferred := g.m.End(nil, &meterstore.Settlement{Tenant: tn, RequestID: id, Scopes: []budget.Scope{scopeOf()}, Actual: clCost}, g.m.LastSeq()); !deferred {
				ended(tl, out)
			}
		}
		if tn == gated && disturbing.Load() {
			dur.Add(1)
			if a.Decision.Allowed {
				adm.Add(1)
			}
		}
	}
	// Each tenant's first request alone, so its keys exist before any
	// disturbance.
	for i := range int64(len(tenants)) {
		one(i, 0)
	}
	next.Store(int64(len(tenants)))
	if disturb != nil {
		disturbing.Store(true)
	}
	var wg sync.WaitGroup
	for w := range clWorkers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				one(i, w)
			}
		})
	}
	if disturb != nil {
		disturb(open)
		disturbing.Store(false)
		open()
	}
	wg.Wait()
	return tallies, time.Since(start), dur.Load(), adm.Load()
}

// checkExact wants, for each tenant: no failed call; exactly clRPM
// admitted by the rate limit (plus the GCRA's refill over elapsed, one
// request every 2 s at 30 RPM); exactly clBudgetN holds; and the Redis
// counter at exactly clBudgetN × clCost spent, nothing held.
func checkExact(t *testing.T, g *clusterGateway, tallies map[string]*tally, tenants []string, elapsed time.Duration) {
	t.Helper()
	extra := int64(elapsed / (time.Minute / clRPM))
	for _, tn := range tenants {
		tl := tallies[tn]
		if tl.errs.Load() != 0 {
			t.Errorf("%s: %d calls failed, last: %s", tn, tl.errs.Load(), *tl.lastErr.Load())
			continue
		}
		if r := tl.rate.Load(); r < clRPM || r > clRPM+extra {
			t.Errorf("%s: the rate limit admitted %d, want exactly %d (+%d for the run's %v)", tn, r, clRPM, extra, elapsed)
		}
		if h := tl.held.Load(); h != clBudgetN {
			t.Errorf("%s: %d holds, want exactly %d (budget %d, %d each)", tn, h, clBudgetN, scopeOf().Limit, clCost)
		}
		spent, reserved, err := g.b.Status(context.Background(), tn, scopeOf())
		if err != nil || spent != tl.settled.Load()*clCost || spent > scopeOf().Limit || reserved != 0 {
			t.Errorf("%s: Redis spent %d reserved %d (%v); want %d settled (≤ %d), 0 held", tn, spent, reserved, err,
				tl.settled.Load()*clCost, scopeOf().Limit)
		}
	}
}

// TestClusterExact: two gateways' counters on a three-master Redis
// Cluster (a replica each), with tenants on every master, under
// concurrent load that refuses most requests: the rate limit admits
// exactly its limit and the budget exactly what fits, per tenant —
// with nothing disturbing the cluster, while the slot of a loaded tenant
// moves to another master (its keys split between the two for a while:
// calls over them are refused with TRYAGAIN and sent again), and through a
// graceful failover of a loaded master.
//
// Why it holds: every key of a tenant is in its {tenant} slot, so each
// call runs atomically on the one node that owns the slot; during a
// migration a node runs a call only if it holds all of the call's keys
// (else ASK or TRYAGAIN, and the call did nothing); a graceful failover
// hands the slot over only once the replica has every write the master
// acknowledged.
func TestClusterExact(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	gws := []*clusterGateway{newClusterGateway(t, cl), newClusterGateway(t, cl)}

	t.Run("steady", func(t *testing.T) {
		tenants, _ := spreadTenants(t, cl, "steady", 2)
		tallies, elapsed, _, _ := clusterLoad(t, gws, tenants, "", nil)
		t.Logf("%d tenants × %d requests in %v", len(tenants), clRequests, elapsed)
		checkExact(t, gws[0], tallies, tenants, elapsed)
	})

	t.Run("reshard", func(t *testing.T) {
		tenants, owner := spreadTenants(t, cl, "reshard", 2)
		moved := tenants[0]
		slot, err := cl.Slot("{" + moved + "}")
		if err != nil {
			t.Fatal(err)
		}
		var to *redistest.Server
		for _, m := range cl.Masters() {
			if m != owner[moved] {
				to = m
				break
			}
		}
		retries := gws[0].c.Retries() + gws[1].c.Retries()
		var keys int
		var took time.Duration
		tallies, elapsed, during, admitted := clusterLoad(t, gws, tenants, moved, func(open func()) {
			start := time.Now()
			// The tenant's requests start once its first key has moved,
			// and the slot stays split (1 ms a key) while they run.
			if err := cl.MoveSlot(slot, to, func() { keys++; open(); time.Sleep(time.Millisecond) }); err != nil {
				t.Error(err)
			}
			took = time.Since(start)
		})
		retries = gws[0].c.Retries() + gws[1].c.Retries() - retries
		t.Logf("moved %s's slot %d (%d keys) in %v under load: %d of its requests (%d admitted) ended meanwhile, %d calls sent again; all in %v",
			moved, slot, keys, took, during, admitted, retries, elapsed)
		if retries == 0 || keys == 0 {
			t.Fatalf("no call met the split slot (%d keys moved, %d calls sent again): the test proves nothing", keys, retries)
		}
		if o, err := cl.Owner(slot); err != nil || o != to {
			t.Fatalf("slot %d is on %v (%v) after the move", slot, o, err)
		}
		checkExact(t, gws[0], tallies, tenants, elapsed)
	})

	t.Run("failover", func(t *testing.T) {
		tenants, owner := spreadTenants(t, cl, "failover", 2)
		var took time.Duration
		tallies, elapsed, during, admitted := clusterLoad(t, gws, tenants, tenants[0], func(open func()) {
			start := time.Now()
			open()
			if _, err := cl.Failover(owner[tenants[0]]); err != nil {
				t.Error(err)
			}
			took = time.Since(start)
		})
		t.Logf("graceful failover of %s's master in %v under load: %d of its requests (%d admitted) ended meanwhile; all in %v",
			tenants[0], took, during, admitted, elapsed)
		if admitted == 0 {
			t.Fatal("no admission of the tenant ended during the failover: the test proves nothing")
		}
		checkExact(t, gws[0], tallies, tenants, elapsed)
	})
}

// TestClusterMasterKilled: a loaded master of a three-master cluster is
// SIGKILLed and its replica elected in its place. The tenants of the
// other masters are served throughout, exactly (a call refused with
// CLUSTERDOWN while the cluster is failed is sent again within the 2 s
// command timeout). The killed master's tenants get errors — the
// policy's on_redis_error — from the kill until the promotion, and are
// served again after it. Writes the dead master acknowledged but had not
// yet sent to its replica are lost (asynchronous replication): the test
// measures them as the settles acknowledged minus the promoted replica's
// spent counter, and wants every excess admission explained by them —
// the gateway adds no error of its own (no call run twice).
//
// It runs with Redis's default cluster-require-full-coverage yes (every
// node refuses every call, CLUSTERDOWN, from the dead master's marking as
// failed to its replica's election) and with no (the other masters keep
// serving); a probe tenant on another master sends a request every 5 ms
// from the kill to the promotion and must be served every time, within
// the 2 s command timeout; its slowest answer is the refusal window.
func TestClusterMasterKilled(t *testing.T) {
	t.Parallel()
	for _, coverage := range []string{"yes", "no"} {
		t.Run("full-coverage-"+coverage, func(t *testing.T) {
			t.Parallel()
			masterKilled(t, redistest.StartCluster(t, 3, 1, "--cluster-require-full-coverage", coverage))
		})
	}
}

func masterKilled(t *testing.T, cl *redistest.Cluster) {
	gws := []*clusterGateway{newClusterGateway(t, cl), newClusterGateway(t, cl)}
	tenants, owner := spreadTenants(t, cl, "kill", 2)
	victim := owner[tenants[0]]
	probe := tenants[1]
	if owner[probe] == victim {
		probe = tenants[2]
	}
	var took, slowest time.Duration
	var promoted *redistest.Server
	var probed, probeErrs int
	var killedAt time.Time
	tallies, elapsed, during, admitted := clusterLoadPaced(t, gws, tenants, tenants[0], 10*time.Millisecond, func(open func()) {
		open()
		time.Sleep(50 * time.Millisecond) // some of the tenant's requests before the kill
		killedAt = time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var err error
			if promoted, took, err = cl.KillMaster(victim); err != nil {
				t.Error(err)
			}
		}()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			start := time.Now()
			_, err := gws[i%2].m.AdmitReserve(ctx, &limiter.Request{Tenant: probe + "-probe", Limits: []limiter.Limit{{Key: "t", RPM: limiter.MaxRPM}}, Tokens: 1, OnError: limiter.FailClosed},
				&meterstore.Hold{Tenant: probe + "-probe", RequestID: fmt.Sprint("probe-", i), Scopes: []budget.Scope{scopeOf()}, Amount: 1, Lease: time.Minute}).AdmitErr, error(nil)
			probed++
			if err != nil {
				probeErrs++
				t.Errorf("probe on a surviving master: %v", err)
			}
			slowest = max(slowest, time.Since(start))
		}
	})
	t.Logf("killed %s's master; replica serving after %v; %d of its requests (%d admitted) ended meanwhile; all in %v; %d calls sent again (CLUSTERDOWN)",
		tenants[0], took, during, admitted, elapsed, gws[0].c.Retries()+gws[1].c.Retries())
	t.Logf("probe on a surviving master: %d requests from the kill to the promotion, %d failed, slowest %v", probed, probeErrs, slowest)
	if took > 10*time.Second {
		t.Errorf("the failover took %v", took)
	}
	// The functions came with replication: the promoted replica has them
	// before any gateway loads them again.
	if promoted != nil {
		if out, err := promoted.Do("FUNCTION", "LIST", "LIBRARYNAME", "tollgate_meter_*"); err != nil || !strings.Contains(out, "tollgate_meter_") {
			t.Errorf("FUNCTION LIST on the promoted replica: %q, %v", out, err)
		}
	}

	var survivors, victims []string
	for _, tn := range tenants {
		if owner[tn] == victim {
			victims = append(victims, tn)
		} else {
			survivors = append(survivors, tn)
		}
	}
	checkExact(t, gws[0], tallies, survivors, elapsed)

	ctx := context.Background()
	for _, tn := range victims {
		tl := tallies[tn]
		// Served again: a request after the promotion is decided, once
		// rueidis has refreshed its slot map (at a random delay of up to
		// 1 s after the errors that call for it).
		for gi, g := range gws {
			deadline := time.Now().Add(5 * time.Second)
			for {
				a := g.m.AdmitReserve(ctx, &limiter.Request{Tenant: tn, Limits: []limiter.Limit{{Key: "t", RPM: clRPM}}, Tokens: 1},
					&meterstore.Hold{Tenant: tn, RequestID: "after", Scopes: []budget.Scope{scopeOf()}, Amount: 1, Lease: time.Minute})
				if a.AdmitErr == nil && a.ReserveErr == nil {
					t.Logf("%s: served again by gateway %d %v after the promotion", tn, gi, time.Since(killedAt.Add(took)))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: not served by gateway %d 5 s after the failover: %v %v", tn, gi, a.AdmitErr, a.ReserveErr)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		spent, _, err := gws[0].b.Status(ctx, tn, scopeOf())
		if err != nil {
			t.Fatal(err)
		}
		lost := tl.settled.Load() - spent/clCost
		var window time.Duration
		if tl.errs.Load() > 0 {
			window = time.Duration(tl.errAt[1].Load() - tl.errAt[0].Load())
			if first := time.Unix(0, tl.errAt[0].Load()); first.Before(killedAt) {
				t.Errorf("%s: a call failed %v before the kill", tn, killedAt.Sub(first))
			}
			if last := time.Unix(0, tl.errAt[1].Load()); last.After(killedAt.Add(took + 2*time.Second)) {
				t.Errorf("%s: a call failed %v after the promotion", tn, last.Sub(killedAt.Add(took)))
			}
		}
		t.Logf("%s: %d calls failed over %v (last: %v); rate-admitted %d (limit %d), held %d (budget room %d), settles acknowledged %d, counted by the promoted replica %d: %d lost",
			tn, tl.errs.Load(), window, ptrOr(tl.lastErr.Load()), tl.rate.Load(), clRPM, tl.held.Load(), clBudgetN, tl.settled.Load(), spent/clCost, lost)
		if spent > scopeOf().Limit {
			t.Errorf("%s: spent %d above the budget %d", tn, spent, scopeOf().Limit)
		}
		if excess := tl.held.Load() - clBudgetN; excess > max(lost, 0) {
			t.Errorf("%s: %d holds above the budget's room, but only %d settles lost", tn, excess, lost)
		}
	}
}

func ptrOr(p *string) string {
	if p == nil {
		return "none"
	}
	return *p
}
