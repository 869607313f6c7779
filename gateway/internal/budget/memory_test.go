package budget_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
)

// TestMemoryLeaseExpiry: a hold that is neither settled nor extended is
// dropped when its lease ends (at the instant, not after it), and an Extend
// renews the lease.
func TestMemoryLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := monthly{budget.NewMemory(nil, clock.Now)}
	if res, err := m.Reserve(ctx, "acme", month, "crashed", 15_000_000, 20_000_000, 200*time.Millisecond); err != nil || res != admitted(0, 15_000_000, 5_000_000) {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	if res, err := m.Reserve(ctx, "acme", month, "renewed", 1_000_000, 20_000_000, 200*time.Millisecond); err != nil || res != admitted(0, 16_000_000, 4_000_000) {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	clock.Advance(150 * time.Millisecond)
	if res, err := m.Extend(ctx, "acme", month, "renewed", 0, 20_000_000, 200*time.Millisecond); err != nil || res != admitted(0, 16_000_000, 4_000_000) {
		t.Fatalf("Extend = %+v, %v", res, err)
	}
	if res, err := m.Reserve(ctx, "acme", month, "blocked", 10_000_000, 20_000_000, time.Minute); err != nil || res != refused(0, 16_000_000, 4_000_000) {
		t.Fatalf("Reserve within the lease = %+v, %v", res, err)
	}
	clock.Advance(49 * time.Millisecond)
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 16_000_000 {
		t.Fatalf("Status 1ms before the lease ends = %d, %v", reserved, err)
	}
	clock.Advance(time.Millisecond)
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 1_000_000 {
		t.Fatalf("Status when the lease ends = %d, %v; want 1000000 (the renewed hold)", reserved, err)
	}
	if res, err := m.Reserve(ctx, "acme", month, "late", 10_000_000, 20_000_000, time.Minute); err != nil || res != admitted(0, 11_000_000, 9_000_000) {
		t.Fatalf("Reserve after the lease = %+v, %v", res, err)
	}
	clock.Advance(150 * time.Millisecond)
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 10_000_000 {
		t.Fatalf("Status after the renewed lease = %d, %v; want 10000000", reserved, err)
	}
	// A renewal with a shorter lease moves the end earlier.
	if _, err := m.Extend(ctx, "acme", month, "late", 0, 20_000_000, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Millisecond)
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 0 {
		t.Fatalf("Status after a shortened lease = %d, %v; want 0", reserved, err)
	}
	// Shrink neither brings an expired hold back nor renews a lease.
	if _, err := m.Reserve(ctx, "acme", month, "shrunk", 5_000_000, 20_000_000, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := m.Shrink(ctx, "acme", month, "shrunk", 2_000_000); err != nil {
		t.Fatal(err)
	}
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 2_000_000 {
		t.Fatalf("Status after Shrink = %d, %v; want 2000000", reserved, err)
	}
	clock.Advance(10 * time.Millisecond)
	if err := m.Shrink(ctx, "acme", month, "shrunk", 1_000_000); err != nil {
		t.Fatal(err)
	}
	if _, reserved, err := m.Status(ctx, "acme", month); err != nil || reserved != 0 {
		t.Fatalf("Status after the shrunk hold's lease = %d, %v; want 0", reserved, err)
	}
	// The expired hold still settles, once.
	for range 2 {
		if spent, err := m.Settle(ctx, "acme", month, "crashed", 4_000_000); err != nil || spent != 4_000_000 {
			t.Fatalf("Settle = %d, %v", spent, err)
		}
	}
}

// TestMemorySettledWindow: a repeated Settle adds nothing for
// DefaultSettledTTL and counts again after it.
func TestMemorySettledWindow(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := monthly{budget.NewMemory(nil, clock.Now)}
	for i, want := range []int64{10, 10, 10, 20} {
		if i == 2 {
			clock.Advance(budget.DefaultSettledTTL - time.Millisecond)
		}
		if i == 3 {
			clock.Advance(time.Millisecond)
		}
		if spent, err := m.Settle(ctx, "acme", month, "r", 10); err != nil || spent != want {
			t.Fatalf("Settle %d = %d, %v; want %d", i, spent, err, want)
		}
	}
	// Many markers come and go without the window breaking.
	for i := range 1000 {
		if _, err := m.Settle(ctx, "acme", month, fmt.Sprint("m", i), 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(budget.DefaultSettledTTL / 500)
	}
	if spent, err := m.Settle(ctx, "acme", month, "m999", 1); err != nil || spent != 1020 {
		t.Fatalf("Settle of a recent id = %d, %v; want 1020 (unchanged)", spent, err)
	}
	if spent, err := m.Settle(ctx, "acme", month, "m0", 1); err != nil || spent != 1021 {
		t.Fatalf("Settle of an old id = %d, %v; want 1021", spent, err)
	}
}

// TestMemorySettledTTL: WithSettledTTL shortens the window.
func TestMemorySettledTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := monthly{budget.NewMemory(nil, clock.Now).WithSettledTTL(5 * time.Minute)}
	for i, want := range []int64{10, 10, 20} {
		if i == 1 {
			clock.Advance(5*time.Minute - time.Millisecond)
		}
		if i == 2 {
			clock.Advance(time.Millisecond)
		}
		if spent, err := m.Settle(ctx, "acme", month, "r", 10); err != nil || spent != want {
			t.Fatalf("Settle %d = %d, %v; want %d", i, spent, err, want)
		}
	}
}

// TestMemoryForgetsIdleMonths: a tenant-month unused for DefaultKeyTTL is
// dropped and seeded again on its next use.
func TestMemoryForgetsIdleMonths(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	l := newLedger(map[string]int64{"acme": 100, "beta": 1})
	m := monthly{budget.NewMemory(l.seed, clock.Now)}
	if _, err := m.Settle(ctx, "acme", month, "r", 5); err != nil {
		t.Fatal(err)
	}
	clock.Advance(budget.DefaultKeyTTL)
	if _, _, err := m.Status(ctx, "beta", month); err != nil { // sweeps
		t.Fatal(err)
	}
	l.set("acme", 105)
	if spent, _, err := m.Status(ctx, "acme", month); err != nil || spent != 105 || l.calls.Load() != 3 {
		t.Fatalf("Status = %d, %v after %d Seeder calls; want 105 after 3", spent, err, l.calls.Load())
	}
}

// TestMemorySeedsOnceOutsideTheLock: concurrent cold calls share one Seeder
// call, and the Seeder may call into the counter (it runs without the
// mutex; under it this would deadlock).
func TestMemorySeedsOnceOutsideTheLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := newLedger(map[string]int64{"acme": 1000})
	var m monthly
	seed := func(ctx context.Context, tenant string, s budget.Scope) (int64, error) {
		if tenant != "acme" {
			return 0, nil
		}
		if _, _, err := m.Status(ctx, "other", month); err != nil {
			return 0, err
		}
		time.Sleep(20 * time.Millisecond) // a slow Postgres
		return l.seed(ctx, tenant, s)
	}
	m = monthly{budget.NewMemory(seed, nil)}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if _, err := m.Reserve(ctx, "acme", month, fmt.Sprint("r", i), 10, 10_000, time.Minute); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if spent, reserved, err := m.Status(ctx, "acme", month); err != nil || spent != 1000 || reserved != 640 {
		t.Fatalf("Status = %d, %d, %v; want 1000, 640", spent, reserved, err)
	}
	if n := l.calls.Load(); n != 1 {
		t.Fatalf("Seeder (for acme) called %d times, want 1", n)
	}
}

// TestMemoryCorrectWithoutSeed: Correct sets a counter that does not exist
// yet without asking the Seeder.
func TestMemoryCorrectWithoutSeed(t *testing.T) {
	ctx := context.Background()
	l := newLedger(map[string]int64{"acme": 1000})
	m := monthly{budget.NewMemory(l.seed, nil)}
	if err := m.Correct(ctx, "acme", month, 42); err != nil {
		t.Fatal(err)
	}
	if spent, _, err := m.Status(ctx, "acme", month); err != nil || spent != 42 || l.calls.Load() != 0 {
		t.Fatalf("Status = %d, %v after %d Seeder calls; want 42 after 0", spent, err, l.calls.Load())
	}
}

// TestMemoryScopesLeaseExpiry: a hold held in three scopes ends in all of
// them when its lease does; Extend remakes it where asked, and Settle still
// charges every scope once.
func TestMemoryScopesLeaseExpiry(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := budget.NewMemory(nil, clock.Now)
	if res, err := m.Reserve(ctx, "acme", "r", in("TKU"), 500, 200*time.Millisecond); err != nil || !res.Admitted {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
	clock.Advance(199 * time.Millisecond)
	if res, err := m.Reserve(ctx, "acme", "other", in("KU"), 101, time.Minute); err != nil || res.Admitted || res.Refused.Kind != budget.ScopeUser {
		t.Fatalf("Reserve within the lease = %+v, %v; want refused by the user's", res, err)
	}
	clock.Advance(time.Millisecond)
	for _, l := range "TKU" {
		if _, reserved, err := m.Status(ctx, "acme", named[string(l)]); err != nil || reserved != 0 {
			t.Errorf("Status(%c) after the lease = %d, %v; want 0", l, reserved, err)
		}
	}
	res, err := m.Extend(ctx, "acme", "r", in("TK"), 50, time.Minute)
	if err != nil || !res.Recreated || res.Reserved != 50 {
		t.Fatalf("Extend after the lease = %+v, %v; want Recreated with 50", res, err)
	}
	if _, err := m.Settle(ctx, "acme", "r", in("TKU"), 400); err != nil {
		t.Fatal(err)
	}
	for l, want := range map[string]int64{"T": 400, "K": 400, "U": 400} {
		if spent, reserved, err := m.Status(ctx, "acme", named[l]); err != nil || spent != want || reserved != 0 {
			t.Errorf("Status(%s) = %d, %d, %v; want %d, 0", l, spent, reserved, err, want)
		}
	}
}

// TestMemoryForgetsIdleScopes: a daily scope is forgotten after
// DefaultDayKeyTTL unused, a monthly one after DefaultKeyTTL, and a
// tenant's settle markers once their window ended.
func TestMemoryForgetsIdleScopes(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	l := &scopeLedger{spent: map[string]int64{scopeT.String(): 100, scopeK.String(): 10}}
	m := budget.NewMemory(l.seed, clock.Now)
	if _, err := m.Settle(ctx, "acme", "r", in("TK"), 5); err != nil {
		t.Fatal(err)
	}
	l.takeAsked()
	l.spent[scopeT.String()], l.spent[scopeK.String()] = 200, 20
	clock.Advance(budget.DefaultDayKeyTTL)
	if _, _, err := m.Status(ctx, "beta", scopeT); err != nil { // sweeps
		t.Fatal(err)
	}
	for _, tt := range []struct {
		s     budget.Scope
		spent int64
	}{{scopeT, 105}, {scopeK, 20}} {
		if spent, _, err := m.Status(ctx, "acme", tt.s); err != nil || spent != tt.spent {
			t.Errorf("Status(%s) = %d, %v; want %d", tt.s, spent, err, tt.spent)
		}
	}
	want := []string{"acme " + scopeK.String(), "beta " + scopeT.String()}
	if got := l.takeAsked(); !slices.Equal(got, want) {
		t.Errorf("Seeder asked for %q, want %q", got, want)
	}
	// The marker of "r" ended long ago: the id settles again.
	if _, err := m.Settle(ctx, "acme", "r", in("T"), 5); err != nil {
		t.Fatal(err)
	}
	if spent, _, err := m.Status(ctx, "acme", scopeT); err != nil || spent != 110 {
		t.Errorf("Status after a settle past the window = %d, %v; want 110", spent, err)
	}
}
