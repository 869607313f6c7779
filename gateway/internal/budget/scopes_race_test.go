package budget_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// maxCost is the most a request of the race can settle: its largest
// reserve plus its largest extension.
const maxCost = 1_000_000 + 500_000

// race is the world of TestScopesUnderContention: one tenant with a
// monthly budget, four keys and eight end users with daily budgets, all
// seeded with some spend; every request is held against the tenant, its
// key and (most of the time) its user, listed in varying order.
type race struct {
	t        *testing.T
	replicas []budget.Counter
	tenant   budget.Scope
	keys     []budget.Scope
	users    []budget.Scope
	seeds    map[string]int64 // by Scope.String()

	settled sync.Map                     // scope → *atomic.Int64: actual costs settled
	once    sync.Map                     // shared request id → struct{}: settled once
	holding sync.Map                     // request id → its scopes, for crashed holds
	mu      sync.Mutex                   //
	crossed map[string][]budget.Crossing // by scope

	admitted, refusals, duplicates, crashed atomic.Int64
	seedCalls                               atomic.Int64
}

func newRace(t *testing.T) *race {
	r := &race{t: t, seeds: map[string]int64{}, crossed: map[string][]budget.Crossing{}}
	r.tenant = budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: 400_000_000,
		Alerts: []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}}
	r.seeds[r.tenant.String()] = 50_000_000
	for i := range 4 {
		k := budget.Scope{Kind: budget.ScopeKey, ID: fmt.Sprint("k:", i), Window: budget.Day, Period: "2026-11-03",
			Limit: 120_000_000, Alerts: []int{50, 100}}
		r.keys = append(r.keys, k)
		r.seeds[k.String()] = int64(i) * 10_000_000
	}
	for i := range 8 {
		u := budget.Scope{Kind: budget.ScopeUser, ID: fmt.Sprint("u{", i, "}"), Window: budget.Day, Period: "2026-11-03",
			Limit: 40_000_000}
		r.users = append(r.users, u)
		r.seeds[u.String()] = 5_000_000
	}
	return r
}

// seed answers the seeded spend after a random wait of up to 3ms, so that
// replicas seed the same scope at the same time and settles land on one
// replica while the other is still seeding.
func (r *race) seed(_ context.Context, _ string, s budget.Scope) (int64, error) {
	r.seedCalls.Add(1)
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	return r.seeds[s.String()], nil
}

func (r *race) all() []budget.Scope {
	return slices.Concat([]budget.Scope{r.tenant}, r.keys, r.users)
}

// scopesFor picks a request's scopes from rng: tenant and key, a user
// three times in four, in an order that varies.
func (r *race) scopesFor(rng *rand.Rand) []budget.Scope {
	s := []budget.Scope{r.tenant, r.keys[rng.IntN(len(r.keys))]}
	if rng.IntN(4) != 0 {
		s = append(s, r.users[rng.IntN(len(r.users))])
	}
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	return s
}

// checkHold checks a Reserve or Extend result against the numbers it was
// made on: an admission leaves room ≥ 0 in every scope (Remaining is the
// least), a refusal names one of the request's scopes and had less room
// than the amount.
func (r *race) checkHold(op, id string, scopes []budget.Scope, amount int64, res budget.Reservation) {
	if res.Admitted {
		if res.Remaining < 0 || res.Refused != nil {
			r.t.Errorf("%s %s admitted %d leaving %d (%+v)", op, id, amount, res.Remaining, res)
		}
		return
	}
	if res.Refused == nil || !slices.ContainsFunc(scopes, func(s budget.Scope) bool { return s.String() == res.Refused.String() }) {
		r.t.Errorf("%s %s refused by %v, not one of its scopes %v", op, id, res.Refused, scopes)
	}
	if res.Remaining >= amount {
		r.t.Errorf("%s %s of %d refused with %d remaining", op, id, amount, res.Remaining)
	}
}

// settle charges actual and records what the counter should now hold.
func (r *race) settle(c budget.Counter, id string, scopes []budget.Scope, actual int64, shared bool) {
	crossings, err := c.Settle(context.Background(), "acme", id, scopes, actual)
	if err != nil {
		r.t.Errorf("Settle %s: %v", id, err)
		return
	}
	// The pair settles the same cost once; the one that returns second is
	// not always the one Redis ran second (their commands may travel on
	// different connections), so the crossings of both are kept: a
	// threshold the duplicate reported again is counted twice and fails
	// the once-each check.
	dup := false
	if shared {
		_, dup = r.once.LoadOrStore(id, struct{}{})
	}
	if !dup {
		for _, s := range scopes {
			v, _ := r.settled.LoadOrStore(s.String(), new(atomic.Int64))
			v.(*atomic.Int64).Add(actual)
		}
	}
	r.mu.Lock()
	for _, x := range crossings {
		r.crossed[x.Scope.String()] = append(r.crossed[x.Scope.String()], x)
	}
	r.mu.Unlock()
}

// request runs one request of goroutine g in round n: a plain one (maybe
// shrunk, maybe extended), one whose replica crashes (a short lease, never
// settled), or one whose id the neighbouring goroutine uses at the same
// time with the same scopes and costs.
func (r *race) request(c budget.Counter, g, n int, rng *rand.Rand) {
	ctx := context.Background()
	id, shared := fmt.Sprintf("g%d-%d", g, n), n%5 == 0
	prng := rng
	if shared {
		id = fmt.Sprintf("shared%d-%d", g/2, n)
		h := fnv.New64a()
		h.Write([]byte(id))
		prng = rand.New(rand.NewPCG(h.Sum64(), 7)) // the pair draws the same request
	}
	scopes := r.scopesFor(prng)
	amount := 200_000 + prng.Int64N(800_001)
	crash := !shared && rng.IntN(10) == 0
	lease := 10 * time.Second
	if crash {
		lease = 30 * time.Millisecond
	}
	res, err := c.Reserve(ctx, "acme", id, scopes, amount, lease)
	if shared && errors.Is(err, budget.ErrSettled) {
		return // the other of the pair was quicker
	}
	if err != nil {
		r.t.Errorf("Reserve %s: %v", id, err)
		return
	}
	r.checkHold("Reserve", id, scopes, amount, res)
	if !res.Admitted {
		r.refusals.Add(1)
		return
	}
	r.admitted.Add(1)
	if res.Duplicate {
		r.duplicates.Add(1)
	}
	if crash {
		r.crashed.Add(1)
		return
	}
	hold := amount
	time.Sleep(time.Duration(rng.IntN(1000)) * time.Microsecond)
	if !shared {
		hold = r.reshape(c, id, scopes, hold, rng)
	}
	r.settle(c, id, scopes, prng.Int64N(hold+1), shared)
}

// reshape shrinks the hold, extends it, or neither, and returns it.
func (r *race) reshape(c budget.Counter, id string, scopes []budget.Scope, hold int64, rng *rand.Rand) int64 {
	ctx := context.Background()
	switch rng.IntN(3) {
	case 0:
		to := hold * 7 / 10
		if err := c.Shrink(ctx, "acme", id, scopes, to); err != nil {
			r.t.Errorf("Shrink %s: %v", id, err)
			return hold
		}
		return to
	case 1:
		more := 100_000 + rng.Int64N(400_001)
		res, err := c.Extend(ctx, "acme", id, scopes, more, 10*time.Second)
		if err != nil {
			r.t.Errorf("Extend %s: %v", id, err)
			return hold
		}
		r.checkHold("Extend", id, scopes, more, res)
		if res.Recreated {
			r.t.Errorf("Extend %s recreated a hold whose lease has not ended", id)
		}
		if res.Admitted {
			return hold + more
		}
	}
	return hold
}

// watch polls every scope until done and checks spent + reserved ≤ limit.
func (r *race) watch(c budget.Counter, done <-chan struct{}) (polls int) {
	for {
		for _, s := range r.all() {
			spent, reserved, err := c.Status(context.Background(), "acme", s)
			if err != nil {
				r.t.Errorf("Status %s: %v", s, err)
				return polls
			}
			if spent+reserved > s.Limit {
				r.t.Errorf("%s: spent %d + reserved %d > limit %d", s, spent, reserved, s.Limit)
			}
		}
		polls++
		select {
		case <-done:
			return polls
		default:
		}
	}
}

// TestScopesUnderContention: 48 goroutines on two replicas (two Redis
// clients; for Memory one counter) run requests against overlapping scope
// lists that together ask for several times every budget, starting cold so
// that seeds race, with pairs of goroutines sharing request ids and one
// request in ten abandoned with a short lease. A watcher checks spent +
// reserved ≤ limit in every scope throughout; every decision is checked
// against the numbers it was made on; at the end every scope holds nothing
// and has spent exactly its seed plus what was settled in it, and each
// alert threshold crossed was reported once.
func TestScopesUnderContention(t *testing.T) {
	const goroutines, rounds = 48, 30
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			r := newRace(t)
			r.replicas = []budget.Counter{be.new(t, r.seed)}
			if be.name == "redis" {
				r.replicas = append(r.replicas, be.new(t, r.seed))
			}
			done := make(chan struct{})
			polls := make(chan int, 1)
			go func() { polls <- r.watch(r.replicas[0], done) }()
			var wg sync.WaitGroup
			for g := range goroutines {
				c := r.replicas[g%len(r.replicas)]
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for n := range rounds {
						r.request(c, g, n, rng)
					}
				})
			}
			wg.Wait()
			close(done)
			t.Logf("admitted %d (duplicates %d, abandoned %d), refused %d, %d watcher rounds, %d Seeder calls for %d scopes",
				r.admitted.Load(), r.duplicates.Load(), r.crashed.Load(), r.refusals.Load(), <-polls, r.seedCalls.Load(), len(r.all()))
			if be.name == "memory" && r.seedCalls.Load() != int64(len(r.all())) {
				t.Errorf("Memory called the Seeder %d times for %d scopes, want once each", r.seedCalls.Load(), len(r.all()))
			}
			time.Sleep(50 * time.Millisecond) // the abandoned holds' leases end
			r.checkFinal()
		})
	}
}

// checkFinal checks every scope's counter and crossings at the end.
func (r *race) checkFinal() {
	t := r.t
	if r.refusals.Load() == 0 || r.admitted.Load() < 400 || r.duplicates.Load() == 0 || r.crashed.Load() == 0 {
		t.Errorf("the run did not test what it should: admitted %d, refused %d, duplicates %d, abandoned %d",
			r.admitted.Load(), r.refusals.Load(), r.duplicates.Load(), r.crashed.Load())
	}
	for _, s := range r.all() {
		var settled int64
		if v, ok := r.settled.Load(s.String()); ok {
			settled = v.(*atomic.Int64).Load()
		}
		spent, reserved, err := r.replicas[len(r.replicas)-1].Status(context.Background(), "acme", s)
		want := r.seeds[s.String()] + settled
		if err != nil || spent != want || reserved != 0 {
			t.Errorf("%s: Status = %d, %d, %v; want %d (seed + settled), 0", s, spent, reserved, err, want)
		}
		if spent > s.Limit {
			t.Errorf("%s: spent %d > limit %d", s, spent, s.Limit)
		}
		r.checkCrossings(s, r.seeds[s.String()], spent)
	}
}

// checkCrossings: the thresholds between the seed and the final spend were
// each reported once, by a settle whose before and after straddle it.
func (r *race) checkCrossings(s budget.Scope, seed, spent int64) {
	got := map[int]int{}
	for _, x := range r.crossed[s.String()] {
		got[x.Threshold]++
		level := (s.Limit*int64(x.Threshold) + 99) / 100
		if !(x.Before < level && level <= x.After) || x.After-x.Before > maxCost {
			r.t.Errorf("%s: crossing of %d%% from %d to %d", s, x.Threshold, x.Before, x.After)
		}
	}
	for _, pct := range s.Alerts {
		level := (s.Limit*int64(pct) + 99) / 100
		want := 0
		if seed < level && level <= spent {
			want = 1
		}
		if got[pct] != want {
			r.t.Errorf("%s: %d%% reported %d times, want %d (seed %d, spent %d)", s, pct, got[pct], want, seed, spent)
		}
	}
}
