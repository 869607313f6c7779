package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// step is one call in a scenario. amount is the amount, the extension,
// the actual cost or the corrected spend, depending on op.
type step struct {
	op       string // reserve, extend, settle, status, correct
	id       string
	amount   int64
	limit    int64
	want     budget.Reservation // reserve, extend
	spent    int64              // settle, status
	reserved int64              // status
	err      error
}

func reserve(id string, amount, limit int64, want budget.Reservation) step {
	return step{op: "reserve", id: id, amount: amount, limit: limit, want: want}
}

func extend(id string, more, limit int64, want budget.Reservation) step {
	return step{op: "extend", id: id, amount: more, limit: limit, want: want}
}

func settle(id string, actual, spent int64) step {
	return step{op: "settle", id: id, amount: actual, spent: spent}
}

func shrink(id string, to int64) step { return step{op: "shrink", id: id, amount: to} }

func status(spent, reserved int64) step {
	return step{op: "status", spent: spent, reserved: reserved}
}

func correct(spent int64) step { return step{op: "correct", amount: spent} }

func admitted(spent, reserved, remaining int64) budget.Reservation {
	return budget.Reservation{Admitted: true, Spent: spent, Reserved: reserved, Remaining: remaining}
}

func refused(spent, reserved, remaining int64) budget.Reservation {
	return budget.Reservation{Spent: spent, Reserved: reserved, Remaining: remaining}
}

func fails(s step, err error) step { s.err = err; return s }

// Every scenario starts with 1000 spent (from the Seeder) and a limit of
// 2000 unless a step says otherwise.
var scenarios = []struct {
	name  string
	steps []step
}{
	{"reserve within the limit", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		status(1000, 400),
	}},
	{"reserve up to the limit exactly", []step{
		reserve("a", 1000, 2000, admitted(1000, 1000, 0)),
		reserve("b", 0, 2000, admitted(1000, 1000, 0)),
	}},
	{"reserve one micro over the limit", []step{
		reserve("a", 1001, 2000, refused(1000, 0, 1000)),
		status(1000, 0),
	}},
	{"holds add up", []step{
		reserve("a", 500, 2000, admitted(1000, 500, 500)),
		reserve("b", 500, 2000, admitted(1000, 1000, 0)),
		reserve("c", 1, 2000, refused(1000, 1000, 0)),
		status(1000, 1000),
	}},
	{"a limit already passed", []step{
		reserve("a", 1, 800, refused(1000, 0, -200)),
		reserve("b", 0, 800, refused(1000, 0, -200)),
	}},
	{"settle less than held frees the rest", []step{
		reserve("a", 800, 2000, admitted(1000, 800, 200)),
		settle("a", 300, 1300),
		status(1300, 0),
		reserve("b", 700, 2000, admitted(1300, 700, 0)),
		reserve("c", 1, 2000, refused(1300, 700, 0)),
	}},
	{"settle more than held", []step{
		reserve("a", 100, 2000, admitted(1000, 100, 900)),
		settle("a", 250, 1250),
		status(1250, 0),
	}},
	{"settle without a hold", []step{
		settle("x", 50, 1050),
		status(1050, 0),
	}},
	{"reserve is idempotent", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		reserve("a", 900, 2000, budget.Reservation{Admitted: true, Duplicate: true, Spent: 1000, Reserved: 400, Remaining: 600}),
		status(1000, 400),
		settle("a", 400, 1400),
		status(1400, 0),
	}},
	{"settle is idempotent", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		settle("a", 300, 1300),
		settle("a", 300, 1300),
		settle("a", 999, 1300),
		status(1300, 0),
	}},
	{"a settled id cannot hold again", []step{
		settle("a", 300, 1300),
		fails(reserve("a", 100, 2000, budget.Reservation{}), budget.ErrSettled),
		fails(extend("a", 100, 2000, budget.Reservation{}), budget.ErrSettled),
		status(1300, 0),
	}},
	{"extend admitted", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		extend("a", 600, 2000, admitted(1000, 1000, 0)),
		status(1000, 1000),
		settle("a", 900, 1900),
		status(1900, 0),
	}},
	{"extend refused leaves the hold", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		extend("a", 601, 2000, refused(1000, 400, 600)),
		status(1000, 400),
		settle("a", 400, 1400),
		status(1400, 0),
	}},
	{"extend counts other holds", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		reserve("b", 500, 2000, admitted(1000, 900, 100)),
		extend("a", 101, 2000, refused(1000, 900, 100)),
		extend("a", 100, 2000, admitted(1000, 1000, 0)),
		settle("b", 0, 1000),
		settle("a", 500, 1500),
	}},
	{"extend without a hold makes one", []step{
		extend("z", 300, 2000, budget.Reservation{Admitted: true, Recreated: true, Spent: 1000, Reserved: 300, Remaining: 700}),
		extend("z", 300, 2000, admitted(1000, 600, 400)),
		extend("y", 401, 2000, refused(1000, 600, 400)),
		status(1000, 600),
	}},
	{"shrink lowers a hold and frees the difference", []step{
		reserve("a", 800, 2000, admitted(1000, 800, 200)),
		reserve("b", 201, 2000, refused(1000, 800, 200)),
		shrink("a", 300),
		status(1000, 300),
		reserve("b", 700, 2000, admitted(1000, 1000, 0)),
		settle("a", 300, 1300),
		status(1300, 700),
	}},
	{"shrink never raises a hold", []step{
		reserve("a", 300, 2000, admitted(1000, 300, 700)),
		shrink("a", 900),
		status(1000, 300),
		shrink("a", 300),
		status(1000, 300),
	}},
	{"shrink is idempotent", []step{
		reserve("a", 800, 2000, admitted(1000, 800, 200)),
		shrink("a", 500),
		shrink("a", 500),
		shrink("a", 600),
		status(1000, 500),
		extend("a", 100, 2000, admitted(1000, 600, 400)),
		shrink("a", 0),
		status(1000, 0),
		settle("a", 50, 1050),
		status(1050, 0),
	}},
	{"shrink without a hold does nothing", []step{
		shrink("x", 100),
		status(1000, 0),
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		settle("a", 400, 1400),
		shrink("a", 0),
		status(1400, 0),
		fails(shrink("a", -1), budget.ErrInvalid),
		fails(shrink("", 1), budget.ErrInvalid),
	}},
	{"correct keeps holds", []step{
		reserve("a", 400, 2000, admitted(1000, 400, 600)),
		correct(1500),
		status(1500, 400),
		reserve("b", 100, 2000, admitted(1500, 500, 0)),
		reserve("c", 1, 2000, refused(1500, 500, 0)),
		settle("a", 400, 1900),
		status(1900, 100),
	}},
	{"no limit", []step{
		reserve("a", 1<<40, math.MaxInt64, admitted(1000, 1<<40, math.MaxInt64-1000-1<<40)),
	}},
	{"invalid arguments", []step{
		fails(reserve("a", -1, 2000, budget.Reservation{}), budget.ErrInvalid),
		fails(reserve("", 1, 2000, budget.Reservation{}), budget.ErrInvalid),
		fails(extend("a", -1, 2000, budget.Reservation{}), budget.ErrInvalid),
		fails(settle("a", -1, 0), budget.ErrInvalid),
		fails(settle("", 1, 0), budget.ErrInvalid),
		fails(correct(-1), budget.ErrInvalid),
		status(1000, 0),
	}},
}

func TestArithmetic(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					l := newLedger(nil)
					tenant := "tenant " + sc.name
					l.set(tenant, 1000)
					c := be.new(t, l.seed)
					for i, s := range sc.steps {
						runStep(t, monthly{c}, tenant, i, s)
					}
					if n := l.calls.Load(); n != 1 {
						t.Errorf("Seeder called %d times, want 1", n)
					}
				})
			}
		})
	}
}

func runStep(t *testing.T, c monthly, tenant string, i int, s step) {
	t.Helper()
	ctx := context.Background()
	where := fmt.Sprintf("step %d %s(%q, %d)", i, s.op, s.id, s.amount)
	check := func(err error) bool {
		t.Helper()
		if s.err != nil {
			if !errors.Is(err, s.err) {
				t.Fatalf("%s: error %v, want %v", where, err, s.err)
			}
			return false
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		return true
	}
	switch s.op {
	case "reserve", "extend":
		f := c.Reserve
		if s.op == "extend" {
			f = c.Extend
		}
		got, err := f(ctx, tenant, month, s.id, s.amount, s.limit, time.Minute)
		if check(err) && got != s.want {
			t.Fatalf("%s = %+v, want %+v", where, got, s.want)
		}
	case "settle":
		spent, err := c.Settle(ctx, tenant, month, s.id, s.amount)
		if check(err) && spent != s.spent {
			t.Fatalf("%s = %d, want %d", where, spent, s.spent)
		}
	case "status":
		spent, reserved, err := c.Status(ctx, tenant, month)
		if check(err) && (spent != s.spent || reserved != s.reserved) {
			t.Fatalf("%s = %d, %d, want %d, %d", where, spent, reserved, s.spent, s.reserved)
		}
	case "shrink":
		check(c.Shrink(ctx, tenant, month, s.id, s.amount))
	case "correct":
		check(c.Correct(ctx, tenant, month, s.amount))
	default:
		t.Fatalf("unknown op %q", s.op)
	}
}

// TestMonthsAndTenantsAreSeparate: counters do not leak between tenants or
// months, including tenant ids that need escaping in Redis keys. (Request
// ids differ: a tenant settles a request id once, whatever its scopes.)
func TestMonthsAndTenantsAreSeparate(t *testing.T) {
	ctx := context.Background()
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			l := newLedger(nil)
			c := monthly{be.new(t, l.seed)}
			keys := []struct{ tenant, month string }{
				{"acme", "2026-11"}, {"acme", "2026-12"}, {"acme:2026", "11"},
				{"a{b}", month}, {"a%7Bb%7D", month}, {"}", month}, {"", month},
			}
			for i, k := range keys {
				if _, err := c.Settle(ctx, k.tenant, k.month, fmt.Sprint("r", i), int64(i+1)); err != nil {
					t.Fatal(err)
				}
			}
			for i, k := range keys {
				spent, reserved, err := c.Status(ctx, k.tenant, k.month)
				if err != nil || spent != int64(i+1) || reserved != 0 {
					t.Errorf("Status(%q, %q) = %d, %d, %v; want %d, 0", k.tenant, k.month, spent, reserved, err, i+1)
				}
			}
			if n := l.calls.Load(); n != int64(len(keys)) {
				t.Errorf("Seeder called %d times, want %d", n, len(keys))
			}
		})
	}
}

// TestConcurrentReplicas: 64 goroutines on two counters (two Redis
// clients, as two replicas would have; for Memory both are one counter)
// reserve 1,000,000 micros against a limit of 20,000,000 and settle a random
// actual cost. Every decision must match the numbers it was made on, and the
// final spend must be exactly the sum of the settled costs.
func TestConcurrentReplicas(t *testing.T) {
	const (
		limit      = 20_000_000
		amount     = 1_000_000
		goroutines = 64
		rounds     = 2 // 128 × ≥300,000 > limit: some must be refused
	)
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			l := newLedger(nil)
			a := monthly{be.new(t, l.seed)}
			b := a
			if be.name == "redis" {
				b = monthly{be.new(t, l.seed)}
			}
			var (
				wg             sync.WaitGroup
				admitted, refs atomic.Int64
				settled        atomic.Int64
			)
			ctx := context.Background()
			for g := range goroutines {
				c := a
				if g%2 == 1 {
					c = b
				}
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					for r := range rounds {
						id := fmt.Sprintf("req-%d-%d", g, r)
						res, err := c.Reserve(ctx, "acme", month, id, amount, limit, time.Minute)
						if err != nil {
							t.Error(err)
							return
						}
						if !res.Admitted {
							refs.Add(1)
							if res.Spent+res.Reserved+amount <= limit {
								t.Errorf("%s refused with spent %d + reserved %d + %d ≤ %d", id, res.Spent, res.Reserved, amount, limit)
							}
							continue
						}
						admitted.Add(1)
						if res.Spent+res.Reserved > limit || res.Reserved < amount {
							t.Errorf("%s admitted at spent %d, reserved %d", id, res.Spent, res.Reserved)
						}
						time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
						actual := 300_000 + rng.Int64N(700_001)
						if _, err := c.Settle(ctx, "acme", month, id, actual); err != nil {
							t.Error(err)
							return
						}
						settled.Add(actual)
					}
				})
			}
			wg.Wait()
			spent, reserved, err := a.Status(ctx, "acme", month)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("admitted %d, refused %d, spent %d, Seeder calls %d", admitted.Load(), refs.Load(), spent, l.calls.Load())
			if spent != settled.Load() || reserved != 0 {
				t.Errorf("Status = %d, %d; want %d (the sum settled), 0", spent, reserved, settled.Load())
			}
			if spent > limit {
				t.Errorf("spent %d > limit %d", spent, limit)
			}
			if admitted.Load() < limit/amount {
				t.Errorf("admitted %d < %d", admitted.Load(), limit/amount)
			}
			if admitted.Load()+refs.Load() != goroutines*rounds || refs.Load() == 0 {
				t.Errorf("admitted %d + refused %d, want %d with some refused", admitted.Load(), refs.Load(), goroutines*rounds)
			}
		})
	}
}

// TestSeederError: the error comes back (as ErrUnavailable too, so the
// caller applies its failure policy), nothing is admitted, and the next call
// asks the Seeder again.
func TestSeederError(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("postgres is down")
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			l := newLedger(map[string]int64{"acme": 5000})
			l.fail(boom)
			c := monthly{be.new(t, l.seed)}
			res, err := c.Reserve(ctx, "acme", month, "r1", 100, 10_000, time.Minute)
			if !errors.Is(err, boom) || !errors.Is(err, budget.ErrUnavailable) || res.Admitted {
				t.Fatalf("Reserve = %+v, %v; want an error wrapping the Seeder's and ErrUnavailable", res, err)
			}
			if _, err := c.Settle(ctx, "acme", month, "r1", 100); !errors.Is(err, boom) {
				t.Fatalf("Settle: %v", err)
			}
			if _, _, err := c.Status(ctx, "acme", month); !errors.Is(err, boom) {
				t.Fatalf("Status: %v", err)
			}
			if n := l.calls.Load(); n != 3 {
				t.Fatalf("Seeder called %d times, want 3 (errors are not cached)", n)
			}
			l.fail(nil)
			if res, err = c.Reserve(ctx, "acme", month, "r1", 100, 10_000, time.Minute); err != nil || res != admitted(5000, 100, 4900) {
				t.Fatalf("Reserve after recovery = %+v, %v", res, err)
			}
			if _, err := c.Settle(ctx, "acme", month, "r1", 70); err != nil {
				t.Fatal(err)
			}
			if spent, _, err := c.Status(ctx, "acme", month); err != nil || spent != 5070 || l.calls.Load() != 4 {
				t.Fatalf("Status = %d, %v after %d Seeder calls; want 5070 after 4", spent, err, l.calls.Load())
			}
		})
	}
}

// TestNilSeeder: with no Seeder counters start at 0.
func TestNilSeeder(t *testing.T) {
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			c := monthly{be.new(t, nil)}
			res, err := c.Reserve(context.Background(), "acme", month, "r", 10, 10, time.Minute)
			if err != nil || res != admitted(0, 10, 0) {
				t.Fatalf("Reserve = %+v, %v", res, err)
			}
		})
	}
}
