package meterstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// sharedReq is one admission of TestSharedCallAsOneAfterAnother.
type sharedReq struct {
	id             string
	tokens, amount int64
}

// holdFirst returns together(n, f, then), which runs f(0) .. f(n-1) on
// goroutines of their own, each making one counter call on m: f(0)'s
// call is held back until every other one waits for it, in order, so
// that they go in one shared call when it returns; then, unless nil, runs
// just before f(0)'s call is let go.
func holdFirst(m *meterstore.Store) func(n int, f func(i int), then func()) {
	var hold atomic.Pointer[chan struct{}]
	entered := make(chan struct{}, 1)
	m.SetBeforeFirstCall(func() {
		if ch := hold.Swap(nil); ch != nil {
			entered <- struct{}{}
			<-*ch
		}
	})
	return func(n int, f func(i int), then func()) {
		release := make(chan struct{})
		hold.Store(&release)
		var wg sync.WaitGroup
		wg.Go(func() { f(0) })
		<-entered
		for i := 1; i < n; i++ {
			wg.Go(func() { f(i) })
			for m.Waiting() < i {
				time.Sleep(50 * time.Microsecond)
			}
		}
		if then != nil {
			then()
		}
		close(release)
		wg.Wait()
	}
}

// TestSharedCallAsOneAfterAnother makes rounds of admissions wait behind a
// first call held back, so that they go in one shared call
// (admit_reserve_many), and the same admissions one after the other as two
// calls each (the rate limiter's, then the budget's), and wants the same
// decisions, reservations and counters from both. The inputs are chosen to
// reach every branch in one call: rate refusals by requests and by tokens,
// budget refusals by either scope, a request id already holding, one
// settled, one twice in the same call, holds of 0 and scopes that are cold
// (a new period) for the whole call.
func TestSharedCallAsOneAfterAnother(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	seed := func(_ context.Context, _ string, s budget.Scope) (int64, error) {
		if s.Kind == budget.ScopeTenant {
			return 2_000, nil
		}
		return 0, nil
	}
	s := newStores(t, srv, seed)
	var counts, ends meterstore.SharedCounts
	s.one.CountShared(&counts, &ends)
	together := holdFirst(s.one)
	const tenant = "shared"
	limits := []limiter.Limit{{Key: "t", RPM: 100, TPM: 150_000}, {Key: "k:1", RPM: 80}}
	raw, err := newClient(t, srv).Raw()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 27))
	ctx := context.Background()
	var ids, settled []string // earlier rounds' ids: held (not settled) and settled
	var wantShared, wantCalls int64
	var sawSettled bool
	seen := map[string]int{}
	for round := range 14 {
		period := fmt.Sprintf("%s-%02d", month, 1+round/5) // a new, cold day every five rounds
		scopes := []budget.Scope{
			{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 12_000},
			{Kind: budget.ScopeKey, ID: "k:1", Window: budget.Day, Period: period, Limit: 9_000},
		}
		// A cold scope makes every hold of the call seed and then hold
		// alone, each as soon as it can, in no set order, as concurrent
		// requests do: those rounds' holds all fit and are compared by
		// their totals.
		cold := round%5 == 0
		n := 3 + rng.IntN(10)
		reqs := make([]sharedReq, n)
		for i := range reqs {
			r := sharedReq{id: fmt.Sprintf("r%d-%d", round, i), tokens: rng.Int64N(4_000), amount: rng.Int64N(2_500)}
			if cold {
				r.amount /= 20
			}
			switch x := rng.IntN(10); {
			case x == 0 && len(ids) > 0 && !cold:
				r.id = ids[rng.IntN(len(ids))] // holds already
			case x == 1 && len(settled) > 0:
				r.id = settled[rng.IntN(len(settled))]
			case x == 2 && i > 1 && !cold:
				r.id = reqs[1+rng.IntN(i-1)].id // twice in the shared call
			case x == 3:
				r.amount = 0
			}
			reqs[i] = r
		}
		admit := func(m *meterstore.Store, r sharedReq) meterstore.Admitted {
			return m.AdmitReserve(ctx, &limiter.Request{Tenant: tenant, Limits: limits, Tokens: r.tokens},
				&meterstore.Hold{Tenant: tenant, RequestID: r.id, Scopes: scopes, Amount: r.amount, Lease: time.Minute})
		}
		got := make([]meterstore.Admitted, n)
		together(n, func(i int) { got[i] = admit(s.one, reqs[i]) }, nil)
		if n-1 > 1 {
			wantShared += int64(n - 1)
			wantCalls++
		}
		for i, r := range reqs {
			want := admit(s.two, r)
			g := got[i]
			// A settled id's hold is refused with an error, the same.
			if g.AdmitErr != nil || want.AdmitErr != nil || fmt.Sprint(g.ReserveErr) != fmt.Sprint(want.ReserveErr) ||
				g.ReserveErr != nil && !slices.Contains(settled, r.id) {
				t.Fatalf("round %d request %d (%+v): errors %v %v / %v %v", round, i, r, g.AdmitErr, g.ReserveErr, want.AdmitErr, want.ReserveErr)
			}
			if g.ReserveErr != nil {
				sawSettled = true
			}
			sameHold := sameReservation(g.Reservation, want.Reservation)
			if cold {
				sameHold = g.Reservation.Admitted == want.Reservation.Admitted && g.Reservation.Refused == nil && want.Reservation.Refused == nil
			}
			if !sameDecision(g.Decision, want.Decision) || !sameHold || g.Reserved != want.Reserved {
				t.Fatalf("round %d request %d (%+v):\nshared call %+v\none by one  %+v", round, i, r, g, want)
			}
			switch {
			case !g.Decision.Allowed:
				seen["rate refused"]++
			case g.Reservation.Duplicate:
				seen["duplicate"]++
			case g.Reservation.Refused != nil:
				seen["budget refused by "+g.Reservation.Refused.Kind]++
			case g.Reservation.Admitted:
				seen["held"]++
			}
			if g.Reservation.Admitted && !g.Reservation.Duplicate && !slices.Contains(ids, r.id) {
				ids = append(ids, r.id)
			}
		}
		// Settle some of the holds on both, at a cost within each; all of
		// them before a cold round, for its holds to fit.
		for k := 0; k < len(ids); {
			if rng.IntN(3) != 0 && round%5 != 4 {
				k++
				continue
			}
			id := ids[k]
			ids = slices.Delete(ids, k, k+1)
			settled = append(settled, id)
			actual := rng.Int64N(300)
			for _, m := range []*meterstore.Store{s.one, s.two} {
				out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: tenant, Limits: limits, Delta: -100},
					&meterstore.Settlement{Tenant: tenant, RequestID: id, Scopes: scopes, Actual: actual})
				if out.AdjustErr != nil || out.SettleErr != nil {
					t.Fatalf("round %d: settle %s: %+v", round, id, out)
				}
			}
		}
		// Every hold key has a TTL (the invariant of budget's hold).
		for _, k := range []string{"tenant::" + month, "key:k%3A1:" + period} {
			for _, suffix := range []string{":holds", ":leases"} {
				key := "one:budget:{" + tenant + "}:" + k + suffix
				ttl, err := raw.Do(ctx, raw.B().Pttl().Key(key).Build()).AsInt64()
				if err != nil || ttl == -1 {
					t.Fatalf("round %d: %s: PTTL %d (%v): a hold key without a TTL", round, key, ttl, err)
				}
			}
		}
		for _, sc := range scopes {
			s1, r1, err1 := s.oneB.Status(ctx, tenant, sc)
			s2, r2, err2 := s.twoB.Status(ctx, tenant, sc)
			if err1 != nil || err2 != nil || s1 != s2 || r1 != r2 {
				t.Fatalf("round %d, %s: shared spent %d reserved %d (%v), one by one %d %d (%v)", round, sc, s1, r1, err1, s2, r2, err2)
			}
		}
	}
	t.Logf("outcomes %v", seen)
	for _, k := range []string{"rate refused", "duplicate", "budget refused by tenant", "budget refused by key", "held"} {
		if seen[k] == 0 {
			t.Errorf("no request %s: the inputs must reach every branch", k)
		}
	}
	if !sawSettled {
		t.Error("no settled id was asked to hold: the inputs must reach that branch")
	}
	if counts.Shared.Load() != wantShared || counts.Calls.Load() != wantCalls {
		t.Errorf("shared %d admissions in %d calls, want %d in %d", counts.Shared.Load(), counts.Calls.Load(), wantShared, wantCalls)
	}
}

// TestSharedEndsAsOneAfterAnother admits and holds rounds of requests on
// both stores, then ends them (token correction and settle) in one shared
// call on the one-trip Store, the first end held back for the others to
// wait, and one after the other as two calls each on the other, and wants
// the same results: the settles (spent before and after, crossings), the
// counters and the token cells. The inputs include an id ended twice in
// one call, ends of requests settled in an earlier round or never held,
// costs of 0, give-backs that empty a cell and debts.
func TestSharedEndsAsOneAfterAnother(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStores(t, srv, nil)
	var admits, ends meterstore.SharedCounts
	s.one.CountShared(&admits, &ends)
	raw, err := newClient(t, srv).Raw()
	if err != nil {
		t.Fatal(err)
	}
	together := holdFirst(s.one)
	const tenant = "ends"
	// 10 ms of the token cell a token: a correction of 100 tokens or more
	// moves it by a second or more.
	limits := []limiter.Limit{{Key: "t", RPM: 100_000, TPM: 6_000}}
	scopes := []budget.Scope{
		{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 300_000, Alerts: []int{20, 50, 70}},
		{Kind: budget.ScopeKey, ID: "k:1", Window: budget.Day, Period: month + "-02", Limit: 1_000_000, Alerts: []int{5, 15}},
	}
	rng := rand.New(rand.NewPCG(3, 33))
	ctx := context.Background()
	// backlog is how far a cell's TAT is ahead of the server clock, µs
	// (0: no cell), by the cell's key without the store's prefix.
	backlog := func(prefix string) map[string]int64 {
		keys, err := raw.Do(ctx, raw.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, k := range keys {
			v, err := raw.Do(ctx, raw.B().Eval().Script(`local t = redis.call('TIME')
return tonumber(redis.call('GET', KEYS[1])) - (t[1] * 1000000 + t[2])`).Numkeys(1).Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(k, prefix)] = v
		}
		return out
	}
	var settled []string
	var wantShared, wantCalls int64
	seen := map[string]int{}
	for round := range 12 {
		type end struct {
			id            string
			delta, actual int64
		}
		var plan []end
		n := 3 + rng.IntN(10)
		for i := range n {
			id := fmt.Sprintf("e%d-%d", round, i)
			for _, m := range []*meterstore.Store{s.one, s.two} {
				a := m.AdmitReserve(ctx, &limiter.Request{Tenant: tenant, Limits: limits, Tokens: 10},
					&meterstore.Hold{Tenant: tenant, RequestID: id, Scopes: scopes, Amount: 1_000, Lease: time.Minute})
				if a.AdmitErr != nil || a.ReserveErr != nil || !a.Reservation.Admitted {
					t.Fatalf("round %d: admit %s: %+v", round, id, a)
				}
			}
			e := end{id: id, delta: []int64{-300, -150, 120, 250}[rng.IntN(4)], actual: rng.Int64N(5_000)}
			switch x := rng.IntN(8); {
			case x == 0 && len(settled) > 0:
				e.id = settled[rng.IntN(len(settled))] // a repeat
				seen["repeat"]++
			case x == 1 && i > 0:
				e.id = plan[rng.IntN(i)].id // twice in the call
				seen["twice"]++
			case x == 2:
				e.id = fmt.Sprintf("never%d-%d", round, i) // no hold
				seen["no hold"]++
			case x == 3:
				e.actual = 0
			}
			plan = append(plan, e)
		}
		endOn := func(m *meterstore.Store, e end) meterstore.Settled {
			return m.AdjustSettle(ctx, &meterstore.Correction{Tenant: tenant, Limits: limits, Delta: e.delta},
				&meterstore.Settlement{Tenant: tenant, RequestID: e.id, Scopes: scopes, Actual: e.actual})
		}
		got := make([]meterstore.Settled, n)
		together(n, func(i int) { got[i] = endOn(s.one, plan[i]) }, nil)
		if n-1 > 1 {
			wantShared += int64(n - 1)
			wantCalls++
		}
		for i, e := range plan {
			want := endOn(s.two, e)
			g := got[i]
			if g.AdjustErr != nil || want.AdjustErr != nil || g.SettleErr != nil || want.SettleErr != nil {
				t.Fatalf("round %d end %d (%+v): errors %v %v / %v %v", round, i, e, g.AdjustErr, g.SettleErr, want.AdjustErr, want.SettleErr)
			}
			for _, c := range [][]budget.Crossing{g.Crossed, want.Crossed} {
				for k := range c {
					c[k].At = time.Time{} // when the gateway saw it
				}
			}
			if !reflect.DeepEqual(g.Crossed, want.Crossed) {
				t.Fatalf("round %d end %d (%+v): crossed %+v in the shared call, %+v one by one", round, i, e, g.Crossed, want.Crossed)
			}
			if len(g.Crossed) > 0 {
				seen["crossed"]++
			}
			if !slices.Contains(settled, e.id) {
				settled = append(settled, e.id)
			}
		}
		for _, sc := range scopes {
			s1, r1, err1 := s.oneB.Status(ctx, tenant, sc)
			s2, r2, err2 := s.twoB.Status(ctx, tenant, sc)
			if err1 != nil || err2 != nil || s1 != s2 || r1 != r2 {
				t.Fatalf("round %d, %s: shared spent %d reserved %d (%v), one by one %d %d (%v)", round, sc, s1, r1, err1, s2, r2, err2)
			}
		}
		// The cells: the same backlog within the time between the two
		// stores' calls (a correction moves a cell by a second or more).
		b1, b2 := backlog("one:rl:"), backlog("two:rl:")
		if len(b1) != len(b2) {
			t.Fatalf("round %d: cells %v in the shared calls, %v one by one", round, b1, b2)
		}
		for k, v := range b1 {
			if d := v - b2[k]; d > 500_000 || d < -500_000 {
				t.Fatalf("round %d: cell %s %d µs ahead in the shared calls, %d one by one", round, k, v, b2[k])
			}
		}
		// Everything held this round is settled; their holds are gone.
		for _, m := range []*meterstore.Store{s.one, s.two} {
			for _, e := range plan {
				endOn(m, end{id: e.id})
			}
		}
		for i := range n {
			for _, m := range []*meterstore.Store{s.one, s.two} {
				endOn(m, end{id: fmt.Sprintf("e%d-%d", round, i)})
			}
		}
	}
	t.Logf("inputs %v", seen)
	for _, k := range []string{"repeat", "twice", "no hold", "crossed"} {
		if seen[k] == 0 {
			t.Errorf("no end %s: the inputs must reach every branch", k)
		}
	}
	if ends.Shared.Load() != wantShared || ends.Calls.Load() != wantCalls {
		t.Errorf("shared %d ends in %d calls, want %d in %d", ends.Shared.Load(), ends.Calls.Load(), wantShared, wantCalls)
	}
}

// TestSharedCallWaiterCancelled cancels an admission while it waits for
// its group's call in flight: it returns at once, leaves the group and is
// never sent — no hold, no charge — while the call in flight and the next
// admissions go on.
func TestSharedCallWaiterCancelled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStores(t, srv, nil)
	release := make(chan struct{})
	var held atomic.Bool
	entered := make(chan struct{})
	s.one.SetBeforeFirstCall(func() {
		if held.CompareAndSwap(false, true) {
			close(entered)
			<-release
		}
	})
	const tenant = "cancel"
	limits := []limiter.Limit{{Key: "t", RPM: 10}}
	scopes := []budget.Scope{tenantScope(1_000_000)}
	admit := func(ctx context.Context, id string) meterstore.Admitted {
		return s.one.AdmitReserve(ctx, &limiter.Request{Tenant: tenant, Limits: limits},
			&meterstore.Hold{Tenant: tenant, RequestID: id, Scopes: scopes, Amount: 1_000, Lease: time.Minute})
	}
	first := make(chan meterstore.Admitted, 1)
	go func() { first <- admit(context.Background(), "first") }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan meterstore.Admitted, 1)
	go func() { gone <- admit(ctx, "cancelled") }()
	for s.one.Waiting() < 1 {
		time.Sleep(50 * time.Microsecond)
	}
	cancel()
	select {
	case a := <-gone:
		if a.Reserved || a.Reservation.Admitted {
			t.Errorf("the cancelled admission held: %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled admission still waits for the call in flight")
	}
	if n := s.one.Waiting(); n != 0 {
		t.Errorf("%d still waiting after the cancellation", n)
	}
	close(release)
	if a := <-first; !a.Decision.Allowed || !a.Reservation.Admitted || a.Decision.RemainingRequests != 9 {
		t.Fatalf("the call in flight: %+v", a)
	}
	// The cancelled admission was never sent: the next one is the second
	// the limit counts, and the budget holds only the first and the next.
	if a := admit(context.Background(), "next"); !a.Reservation.Admitted || a.Decision.RemainingRequests != 8 {
		t.Fatalf("the next admission: %+v", a)
	}
	if _, reserved, err := s.oneB.Status(context.Background(), tenant, scopes[0]); err != nil || reserved != 2_000 {
		t.Errorf("reserved %d (%v), want 2000: the first's hold and the next's", reserved, err)
	}
}

// TestSharedCallRedisDown kills Redis while admissions and ends wait
// behind their groups' first calls: every one of them gets what a call of
// its own would have got — under fail_open a fallback admission and an
// unavailable hold, under fail_closed an unavailable refusal, and
// unavailable ends — within two command timeouts, and none is left
// waiting.
func TestSharedCallRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const timeout = 200 * time.Millisecond
	m, _ := oneTrip(t, srv.Addr(), timeout)
	ctx := context.Background()
	together := holdFirst(m)
	scopes := []budget.Scope{tenantScope(1_000_000)}
	limits := []limiter.Limit{{Key: "t", RPM: 1_000, TPM: 1_000_000}}
	const n = 6
	for k, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed} {
		got := make([]meterstore.Admitted, n)
		took := make([]time.Duration, n)
		together(n, func(i int) {
			t0 := time.Now()
			got[i] = m.AdmitReserve(ctx, &limiter.Request{Tenant: "down", Limits: limits, Tokens: 10, OnError: mode},
				&meterstore.Hold{Tenant: "down", RequestID: fmt.Sprint("r", k, "-", i), Scopes: scopes, Amount: 1, Lease: time.Minute})
			took[i] = time.Since(t0)
		}, func() {
			if k == 0 {
				// Every call waits: Redis goes before the first is let go.
				if err := srv.Kill(); err != nil {
					t.Fatal(err)
				}
			}
		})
		for i, a := range got {
			switch {
			case mode == limiter.FailOpen && (a.AdmitErr != nil || !a.Decision.Fallback || !a.Reserved || !isBudgetUnavailable(a.ReserveErr)):
				t.Errorf("fail_open, admission %d: %+v, want a fallback admission and an unavailable hold", i, a)
			case mode == limiter.FailClosed && (a.Reserved || !isUnavailable(a.AdmitErr)):
				t.Errorf("fail_closed, admission %d: %+v, want unavailable and no hold", i, a)
			}
			if took[i] > 2*timeout+time.Second {
				t.Errorf("admission %d took %v, more than two timeouts of %v", i, took[i], timeout)
			}
		}
	}
	outs := make([]meterstore.Settled, n)
	together(n, func(i int) {
		outs[i] = m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "down", Limits: limits, Delta: 5},
			&meterstore.Settlement{Tenant: "down", RequestID: fmt.Sprint("e", i), Scopes: scopes, Actual: 1})
	}, nil)
	for i, out := range outs {
		if !isUnavailable(out.AdjustErr) || !isBudgetUnavailable(out.SettleErr) {
			t.Errorf("end %d: %+v, want both unavailable", i, out)
		}
	}
	if w := m.Waiting(); w != 0 {
		t.Errorf("%d calls still waiting", w)
	}
}
