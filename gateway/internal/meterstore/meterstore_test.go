package meterstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

const month = "2026-12"

// newClient connects a client to srv; its 1s command timeout leaves room
// for a first EVAL under -race on a busy machine.
func newClient(t testing.TB, srv *redistest.Server) *redisx.Client {
	t.Helper()
	return redisxtest.Connect(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
}

// stores are a one-trip Store and a Store that makes the same calls one
// after the other (two clients), on one server under distinct prefixes.
type stores struct {
	one, two   *meterstore.Store
	oneB, twoB budget.Counter
}

func newStores(t testing.TB, srv *redistest.Server, seed budget.Seeder) stores {
	c1, c2 := newClient(t, srv), newClient(t, srv)
	var s stores
	s.oneB = budget.NewRedis(c1, seed, budget.RedisOptions{Prefix: "one:budget:"})
	s.one = meterstore.New(limiter.NewRedis(c1, limiter.RedisOptions{Prefix: "one:rl:"}), s.oneB)
	s.twoB = budget.NewRedis(c2, seed, budget.RedisOptions{Prefix: "two:budget:"})
	s.two = meterstore.New(limiter.NewRedis(c1, limiter.RedisOptions{Prefix: "two:rl:"}), s.twoB)
	if !s.one.OneTrip() || s.two.OneTrip() {
		t.Fatalf("OneTrip: %v and %v, want true and false", s.one.OneTrip(), s.two.OneTrip())
	}
	return s
}

func tenantScope(limit int64) budget.Scope {
	return budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: limit, Alerts: []int{50, 90}}
}

// step is one request of a scenario and what it must get.
type step struct {
	tokens, amount     int64
	id                 string // the hold's request id; "" means a fresh one
	allowed, reserved  bool
	held, duplicate    bool
	refusedBy          string // the refusing scope's kind, when refused
	remainingRequests  int64
	remainingBudgetMin int64 // Reservation.Remaining when reserved
}

// TestAdmitReserveAsTwoCalls runs scenarios chosen to refuse at each
// stage on a one-trip Store and on two calls, and wants the same
// decisions, reservations and counters from both, and the expected ones.
func TestAdmitReserveAsTwoCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	seeds := map[string]int64{"cold": 9_000}
	seed := func(_ context.Context, tenant string, s budget.Scope) (int64, error) { return seeds[tenant], nil }
	s := newStores(t, srv, seed)
	key := budget.Scope{Kind: budget.ScopeKey, ID: "k:1", Window: budget.Day, Period: month + "-02", Limit: 1_500}
	user := budget.Scope{Kind: budget.ScopeUser, ID: "u{1}", Window: budget.Day, Period: month + "-02", Limit: 1_000_000}
	tests := []struct {
		name   string
		tenant string
		limits []limiter.Limit
		scopes []budget.Scope
		steps  []step
	}{
		{"rate limit refuses the third", "rpm", []limiter.Limit{{Key: "t", RPM: 2}}, []budget.Scope{tenantScope(10_000)}, []step{
			{amount: 1000, allowed: true, reserved: true, held: true, remainingRequests: 1, remainingBudgetMin: 9_000},
			{amount: 1000, allowed: true, reserved: true, held: true, remainingRequests: 0, remainingBudgetMin: 8_000},
			{amount: 1000, remainingRequests: 0},
		}},
		{"budget refuses the third", "budget", []limiter.Limit{{Key: "t", RPM: 100, TPM: 10_000}}, []budget.Scope{tenantScope(2_500)}, []step{
			{tokens: 100, amount: 1000, allowed: true, reserved: true, held: true, remainingRequests: 99, remainingBudgetMin: 1_500},
			{tokens: 100, amount: 1000, allowed: true, reserved: true, held: true, remainingRequests: 98, remainingBudgetMin: 500},
			{tokens: 100, amount: 1000, allowed: true, reserved: true, refusedBy: budget.ScopeTenant, remainingRequests: 97, remainingBudgetMin: 500},
		}},
		{"cold scope seeded", "cold", []limiter.Limit{{Key: "t", RPM: 10}}, []budget.Scope{tenantScope(10_000)}, []step{
			{amount: 600, allowed: true, reserved: true, held: true, remainingRequests: 9, remainingBudgetMin: 400},
			{amount: 600, allowed: true, reserved: true, refusedBy: budget.ScopeTenant, remainingRequests: 8, remainingBudgetMin: 400},
		}},
		{"key budget of three refuses", "scopes{x}", []limiter.Limit{{Key: "t", RPM: 10}, {Key: "k:1", RPM: 5}}, []budget.Scope{tenantScope(1_000_000), key, user}, []step{
			{amount: 1000, allowed: true, reserved: true, held: true, remainingRequests: 4, remainingBudgetMin: 500},
			{amount: 1000, allowed: true, reserved: true, refusedBy: budget.ScopeKey, remainingRequests: 3, remainingBudgetMin: 500},
		}},
		{"tokens above the TPM", "tpm", []limiter.Limit{{Key: "t", TPM: 50}}, []budget.Scope{tenantScope(10_000)}, []step{
			{tokens: 100, amount: 10},
		}},
		{"limits without rates", "norate", []limiter.Limit{{Key: "t"}}, []budget.Scope{tenantScope(10_000)}, []step{
			{amount: 10, allowed: true, reserved: true, held: true, remainingBudgetMin: 9_990},
		}},
		{"one hold id twice", "dup", []limiter.Limit{{Key: "t", RPM: 10}}, []budget.Scope{tenantScope(10_000)}, []step{
			{id: "same", amount: 100, allowed: true, reserved: true, held: true, remainingRequests: 9, remainingBudgetMin: 9_900},
			{id: "same", amount: 100, allowed: true, reserved: true, held: true, duplicate: true, remainingRequests: 8, remainingBudgetMin: 9_900},
		}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, st := range tt.steps {
				id := st.id
				if id == "" {
					id = fmt.Sprint("r", i)
				}
				var got [2]meterstore.Admitted
				for j, m := range []*meterstore.Store{s.one, s.two} {
					lr := &limiter.Request{Tenant: tt.tenant, Limits: tt.limits, Tokens: st.tokens}
					got[j] = m.AdmitReserve(ctx, lr, &meterstore.Hold{Tenant: tt.tenant, RequestID: id, Scopes: tt.scopes, Amount: st.amount, Lease: time.Minute})
				}
				one, two := got[0], got[1]
				if one.AdmitErr != nil || one.ReserveErr != nil || two.AdmitErr != nil || two.ReserveErr != nil {
					t.Fatalf("step %d: errors %v %v / %v %v", i, one.AdmitErr, one.ReserveErr, two.AdmitErr, two.ReserveErr)
				}
				if !sameDecision(one.Decision, two.Decision) || !sameReservation(one.Reservation, two.Reservation) || one.Reserved != two.Reserved {
					t.Fatalf("step %d: one trip %+v, two calls %+v", i, one, two)
				}
				refusedBy := ""
				if r := one.Reservation.Refused; r != nil {
					refusedBy = r.Kind
				}
				if one.Decision.Allowed != st.allowed || one.Reserved != st.reserved || one.Reservation.Admitted != st.held ||
					one.Reservation.Duplicate != st.duplicate || refusedBy != st.refusedBy || one.Decision.RemainingRequests != st.remainingRequests {
					t.Fatalf("step %d: %+v, want %+v", i, one, st)
				}
				if st.reserved && one.Reservation.Remaining != st.remainingBudgetMin {
					t.Fatalf("step %d: remaining budget %d, want %d", i, one.Reservation.Remaining, st.remainingBudgetMin)
				}
			}
			for _, sc := range tt.scopes {
				s1, r1, err1 := s.oneB.Status(ctx, tt.tenant, sc)
				s2, r2, err2 := s.twoB.Status(ctx, tt.tenant, sc)
				if err1 != nil || err2 != nil || s1 != s2 || r1 != r2 {
					t.Errorf("%s: one trip spent %d reserved %d (%v), two calls %d %d (%v)", sc, s1, r1, err1, s2, r2, err2)
				}
			}
		})
	}
}

// sameDecision compares decisions, their durations within the second the
// Redis clock moves between the two stores' calls and what comes back
// meanwhile (a request, a second's tokens).
func sameDecision(a, b limiter.Decision) bool {
	near := func(x, y time.Duration) bool { return (x - y).Abs() < time.Second }
	within := func(x, y, by int64) bool { return x-y <= by && y-x <= by }
	ok := near(a.ResetRequests, b.ResetRequests) && near(a.ResetTokens, b.ResetTokens) && near(a.RetryAfter, b.RetryAfter) &&
		within(a.RemainingRequests, b.RemainingRequests, 1) && within(a.RemainingTokens, b.RemainingTokens, a.LimitTokens/60+1)
	a.ResetRequests, a.ResetTokens, a.RetryAfter, a.RemainingRequests, a.RemainingTokens = 0, 0, 0, 0, 0
	b.ResetRequests, b.ResetTokens, b.RetryAfter, b.RemainingRequests, b.RemainingTokens = 0, 0, 0, 0, 0
	return ok && a == b
}

func sameReservation(a, b budget.Reservation) bool {
	if (a.Refused == nil) != (b.Refused == nil) || a.Refused != nil && a.Refused.String() != b.Refused.String() {
		return false
	}
	a.Refused, b.Refused = nil, nil
	return a == b
}

// TestAdjustSettleAsTwoCalls corrects and settles on both stores and
// wants the same counters, crossings and next decision.
func TestAdjustSettleAsTwoCalls(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStores(t, srv, nil)
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 100, TPM: 1_000}}
	scopes := []budget.Scope{tenantScope(10_000)}
	tests := []struct {
		name          string
		tokens, delta int64 // charged, then corrected by delta
		hold, actual  int64
		wantTokens    int64 // remaining tokens at the next admission (of 0 tokens)
		wantSpent     int64
		wantCrossed   []int
	}{
		{"give back, cross 50%", 600, -400, 6_000, 5_500, 800, 5_500, []int{50}},
		{"debt, cross 90%", 100, 150, 4_000, 3_600, 550, 9_100, []int{90}},
		{"nothing to correct", 0, 0, 100, 100, 550, 9_200, nil},
	}
	start := time.Now()
	for i, tt := range tests {
		id := fmt.Sprint("settle-", i)
		for j, m := range []*meterstore.Store{s.one, s.two} {
			lr := &limiter.Request{Tenant: "acme", Limits: limits, Tokens: tt.tokens}
			a := m.AdmitReserve(ctx, lr, &meterstore.Hold{Tenant: "acme", RequestID: id, Scopes: scopes, Amount: tt.hold, Lease: time.Minute})
			if !a.Reservation.Admitted {
				t.Fatalf("%s: store %d: %+v", tt.name, j, a)
			}
			var c *meterstore.Correction
			if tt.delta != 0 {
				c = &meterstore.Correction{Tenant: "acme", Limits: limits, Delta: tt.delta}
			}
			out := m.AdjustSettle(ctx, c, &meterstore.Settlement{Tenant: "acme", RequestID: id, Scopes: scopes, Actual: tt.actual})
			if out.AdjustErr != nil || out.SettleErr != nil {
				t.Fatalf("%s: store %d: %+v", tt.name, j, out)
			}
			var crossed []int
			for _, x := range out.Crossed {
				crossed = append(crossed, x.Threshold)
			}
			if fmt.Sprint(crossed) != fmt.Sprint(tt.wantCrossed) {
				t.Errorf("%s: store %d crossed %v, want %v", tt.name, j, crossed, tt.wantCrossed)
			}
			b := []budget.Counter{s.oneB, s.twoB}[j]
			spent, reserved, err := b.Status(ctx, "acme", scopes[0])
			if err != nil || spent != tt.wantSpent || reserved != 0 {
				t.Errorf("%s: store %d spent %d reserved %d (%v), want %d and 0", tt.name, j, spent, reserved, err, tt.wantSpent)
			}
			// Read the tokens left without charging any.
			d := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits}, &meterstore.Hold{Tenant: "acme", RequestID: id + "-probe", Scopes: scopes, Amount: 0, Lease: time.Minute})
			// The tokens come back at TPM/60 a second meanwhile (since
			// the first case, whose tokens are still coming back).
			slack := int64(time.Since(start).Seconds()*1_000/60) + 1
			if left := d.Decision.RemainingTokens; left < tt.wantTokens || left > tt.wantTokens+slack {
				t.Errorf("%s: store %d: %d tokens left, want %d (+%d)", tt.name, j, left, tt.wantTokens, slack)
			}
			m.AdjustSettle(ctx, nil, &meterstore.Settlement{Tenant: "acme", RequestID: id + "-probe", Scopes: scopes})
		}
	}
}

// TestOneTripCommands counts the commands the one-trip Store sends: one
// script call for a warm admission and hold (refused or not) and one for
// a correction and settle; cold scopes add a seed (SET NX) each and a
// second script call.
func TestOneTripCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := newClient(t, srv)
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), budget.NewRedis(c, nil, budget.RedisOptions{}))
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 2, TPM: 1_000}}
	scopes := []budget.Scope{tenantScope(10_000), {Kind: budget.ScopeKey, ID: "k", Window: budget.Day, Period: month + "-01", Limit: 5_000}}
	hold := func(tenant, id string) *meterstore.Hold {
		return &meterstore.Hold{Tenant: tenant, RequestID: id, Scopes: scopes, Amount: 100, Lease: time.Minute}
	}
	// Load the scripts (a first call is EVALSHA, NOSCRIPT, EVAL).
	m.AdmitReserve(ctx, &limiter.Request{Tenant: "warm", Limits: limits, Tokens: 10}, hold("warm", "w"))
	m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "warm", Limits: limits, Delta: -5},
		&meterstore.Settlement{Tenant: "warm", RequestID: "w", Scopes: scopes, Actual: 50})
	tests := []struct {
		name string
		run  func() bool
		want int64
	}{
		{"cold admit and hold: two scripts, two seeds", func() bool {
			a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 10}, hold("acme", "a"))
			return a.Reservation.Admitted
		}, 4},
		{"warm admit and hold", func() bool {
			a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 10}, hold("acme", "b"))
			return a.Reservation.Admitted
		}, 1},
		{"admission refused", func() bool {
			a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 10}, hold("acme", "c"))
			return !a.Decision.Allowed && !a.Reserved
		}, 1},
		{"correct and settle", func() bool {
			out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "acme", Limits: limits, Delta: -5},
				&meterstore.Settlement{Tenant: "acme", RequestID: "b", Scopes: scopes, Actual: 50})
			return out.AdjustErr == nil && out.SettleErr == nil
		}, 1},
	}
	for _, tt := range tests {
		before := c.Commands()
		if !tt.run() {
			t.Fatalf("%s: unexpected outcome", tt.name)
		}
		if got := c.Commands() - before; got != tt.want {
			t.Errorf("%s: %d commands, want %d", tt.name, got, tt.want)
		}
	}
}

// TestAdjustSettleCold settles a request whose budget counter Redis lost
// meanwhile: the correction is made once, the scope is seeded, and the
// settle adds to the seeded spend, in two script calls and a seed.
func TestAdjustSettleCold(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var seeds atomic.Int64
	seed := func(context.Context, string, budget.Scope) (int64, error) { seeds.Add(1); return 4_000, nil }
	c := newClient(t, srv)
	b := budget.NewRedis(c, seed, budget.RedisOptions{})
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), b)
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", TPM: 600}}
	scopes := []budget.Scope{tenantScope(10_000)}
	// Load the scripts: a cold settle of another tenant runs both.
	m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "warm", Limits: limits, Delta: 1},
		&meterstore.Settlement{Tenant: "warm", RequestID: "w", Scopes: scopes, Actual: 1})
	a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 300},
		&meterstore.Hold{Tenant: "acme", RequestID: "r", Scopes: scopes, Amount: 1_000, Lease: time.Minute})
	if !a.Reservation.Admitted || a.Decision.RemainingTokens != 300 || seeds.Load() != 2 {
		t.Fatalf("%+v after %d seeds, want held with 300 tokens left after 2", a, seeds.Load())
	}
	if _, err := srv.Do("DEL", "tollgate:budget:{acme}:tenant::"+month+":spent"); err != nil {
		t.Fatal(err)
	}
	before := c.Commands()
	start := time.Now()
	out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "acme", Limits: limits, Delta: -200},
		&meterstore.Settlement{Tenant: "acme", RequestID: "r", Scopes: scopes, Actual: 700})
	if out.AdjustErr != nil || out.SettleErr != nil {
		t.Fatalf("%+v", out)
	}
	if n := c.Commands() - before; n != 3 || seeds.Load() != 3 {
		t.Errorf("%d commands and %d seeds in all, want 3 (script, SET NX, script) and 3", n, seeds.Load())
	}
	spent, reserved, err := b.Status(ctx, "acme", scopes[0])
	if err != nil || spent != 4_700 || reserved != 0 {
		t.Errorf("spent %d reserved %d (%v), want 4700 and 0", spent, reserved, err)
	}
	// The 200 tokens came back once, not twice.
	d := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits},
		&meterstore.Hold{Tenant: "acme", RequestID: "probe", Scopes: scopes, Amount: 0, Lease: time.Minute})
	slack := int64(time.Since(start).Seconds()*600/60) + 1
	if left := d.Decision.RemainingTokens; left < 500 || left > 500+slack {
		t.Errorf("%d tokens left, want 500 (+%d)", left, slack)
	}
}
