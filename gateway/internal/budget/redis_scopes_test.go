package budget_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// scopeLedger is a Seeder that answers per scope and records which scopes
// it was asked for.
type scopeLedger struct {
	mu    sync.Mutex
	spent map[string]int64 // by Scope.String()
	asked []string
	delay time.Duration
}

func (l *scopeLedger) seed(_ context.Context, tenant string, s budget.Scope) (int64, error) {
	time.Sleep(l.delay)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, tenant+" "+s.String())
	return l.spent[s.String()], nil
}

func (l *scopeLedger) takeAsked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.asked
	l.asked = nil
	slices.Sort(a)
	return a
}

// TestRedisSeedsEachScope: a cold call seeds every scope that has no spent
// key, at once (one wait, not three), and runs the script twice; a scope
// that loses its key later is seeded alone.
func TestRedisSeedsEachScope(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := newClient(t, srv)
	l := &scopeLedger{spent: map[string]int64{
		scopeT.String(): 4_000, scopeK.String(): 200, scopeU.String(): 0,
	}, delay: 300 * time.Millisecond}
	c := budget.NewRedis(rc, l.seed, budget.RedisOptions{})
	// Load the scripts, so the counts below do not include NOSCRIPT.
	if _, err := c.Reserve(ctx, "warm", "w", in("T"), 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Settle(ctx, "warm", "w", in("T"), 1); err != nil {
		t.Fatal(err)
	}
	l.takeAsked()

	before, start := rc.Commands(), time.Now()
	res, err := c.Reserve(ctx, "acme", "r1", in("TKU"), 300, time.Minute)
	if err != nil || res != admitted(0, 300, 300) {
		t.Fatalf("cold Reserve = %+v, %v", res, err)
	}
	took := time.Since(start)
	want := []string{"acme " + scopeK.String(), "acme " + scopeT.String(), "acme " + scopeU.String()}
	slices.Sort(want)
	if got := l.takeAsked(); !slices.Equal(got, want) {
		t.Errorf("Seeder asked for %q, want %q", got, want)
	}
	if d := rc.Commands() - before; d != 5 {
		t.Errorf("cold Reserve of three scopes sent %d commands, want 5 (script, three SET NX, script)", d)
	}
	if took >= 3*l.delay {
		t.Errorf("cold Reserve took %v: the three seeds ran one after another", took)
	} else {
		t.Logf("cold Reserve of three scopes with a %v Seeder took %v", l.delay, took)
	}

	// The key's counter vanishes (expiry, eviction): only it is seeded.
	l.spent[scopeK.String()] = 250
	if _, err := srv.Do("DEL", "tollgate:budget:{acme}:key:k%3A1:2026-11-03:spent"); err != nil {
		t.Fatal(err)
	}
	before = rc.Commands()
	if _, err := c.Settle(ctx, "acme", "r1", in("TKU"), 280); err != nil {
		t.Fatal(err)
	}
	if got := l.takeAsked(); !slices.Equal(got, []string{"acme " + scopeK.String()}) {
		t.Errorf("Seeder asked for %q, want the key's scope only", got)
	}
	if d := rc.Commands() - before; d != 3 {
		t.Errorf("Settle with one cold scope sent %d commands, want 3", d)
	}
	for letter, want := range map[string]int64{"T": 4_280, "K": 530, "U": 280} {
		if spent, reserved, err := c.Status(ctx, "acme", named[letter]); err != nil || spent != want || reserved != 0 {
			t.Errorf("Status(%s) = %d, %d, %v; want %d, 0", letter, spent, reserved, err, want)
		}
	}
	if got := l.takeAsked(); len(got) != 0 {
		t.Errorf("warm calls asked the Seeder for %q", got)
	}
}

// TestRedisScopeKeyTTLs: a daily scope's keys live DayKeyTTL, a monthly
// one's KeyTTL, from seeding, Correct and each hold.
func TestRedisScopeKeyTTLs(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{KeyTTL: time.Hour, DayKeyTTL: time.Minute})
	if _, err := c.Reserve(ctx, "acme", "r", in("TK"), 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Correct(ctx, "acme", scopeU, 5); err != nil {
		t.Fatal(err)
	}
	month := "tollgate:budget:{acme}:tenant::2026-11:"
	day := "tollgate:budget:{acme}:key:k%3A1:2026-11-03:"
	user := "tollgate:budget:{acme}:user:u%7B1%7D:2026-11-03:"
	hour, minute := within(3590e3, 3600e3), within(50e3, 60e3)
	checks := []struct {
		key  string
		want func(string) bool
	}{
		{month + "spent", hour}, {month + "holds", hour}, {month + "leases", hour},
		{day + "spent", minute}, {day + "holds", minute}, {day + "leases", minute},
		{user + "spent", minute},
	}
	for _, ch := range checks {
		if got, err := srv.Do("PTTL", ch.key); err != nil || !ch.want(got) {
			t.Errorf("PTTL %s = %q, %v", ch.key, got, err)
		}
	}
}

// TestRedisScopesCommandsPerOperation: a warm operation is one command
// however many scopes it holds.
func TestRedisScopesCommandsPerOperation(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := newClient(t, srv)
	c := budget.NewRedis(rc, nil, budget.RedisOptions{})
	scopes := in("TKU")
	// Warm up: seed the scopes, load every script.
	if _, err := c.Reserve(ctx, "acme", "warm", scopes, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Extend(ctx, "acme", "warm", scopes, 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := c.Shrink(ctx, "acme", "warm", scopes, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Settle(ctx, "acme", "warm", scopes, 1); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		call func() error
	}{
		{"Reserve", func() error { _, err := c.Reserve(ctx, "acme", "r", scopes, 10, time.Minute); return err }},
		{"Extend", func() error { _, err := c.Extend(ctx, "acme", "r", scopes, 10, time.Minute); return err }},
		{"Shrink", func() error { return c.Shrink(ctx, "acme", "r", scopes, 5) }},
		{"Settle", func() error { _, err := c.Settle(ctx, "acme", "r", scopes, 5); return err }},
	}
	for _, op := range ops {
		resetStats(t, srv)
		before := rc.Commands()
		if err := op.call(); err != nil {
			t.Fatalf("%s: %v", op.name, err)
		}
		if d := rc.Commands() - before; d != 1 {
			t.Errorf("%s sent %d commands, want 1", op.name, d)
		}
		if stats := commandStats(t, srv); stats["evalsha"] != 1 || stats["eval"] != 0 {
			t.Errorf("%s: server saw %v", op.name, stats)
		}
	}
}

// TestRedisScopesLeaseExpiry: replica A holds in three scopes and dies;
// when the lease ends (server clock) each scope gives the hold back on its
// own next call, whichever scope list that call holds.
func TestRedisScopesLeaseExpiry(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	ca := newClient(t, srv)
	a := budget.NewRedis(ca, nil, budget.RedisOptions{})
	b := budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{})
	before := time.Now()
	if res, err := a.Reserve(ctx, "acme", "crashed", in("TKU"), 600, 300*time.Millisecond); err != nil || !res.Admitted {
		t.Fatalf("A: Reserve = %+v, %v", res, err)
	}
	after := time.Now()
	ca.Close()
	res, err := b.Reserve(ctx, "acme", "early", in("KU"), 1, time.Minute)
	if time.Since(before) < 300*time.Millisecond && (err != nil || res.Admitted || res.Refused.Kind != budget.ScopeUser) {
		t.Fatalf("B within the lease: Reserve = %+v, %v; want refused by the user's", res, err)
	}
	time.Sleep(time.Until(after.Add(350 * time.Millisecond)))
	// The user's scope alone: its hold is purged, the others' not yet
	// looked at.
	if res, err := b.Reserve(ctx, "acme", "late", in("U"), 600, time.Minute); err != nil || res != admitted(0, 600, 0) {
		t.Fatalf("B after the lease, user only = %+v, %v", res, err)
	}
	for l, want := range map[string]int64{"T": 0, "K": 0, "U": 600} {
		if _, reserved, err := b.Status(ctx, "acme", named[l]); err != nil || reserved != want {
			t.Errorf("Status(%s) = %d, %v; want %d reserved", l, reserved, err, want)
		}
	}
	// A late Settle of the dead request charges every scope once.
	for range 2 {
		if _, err := b.Settle(ctx, "acme", "crashed", in("TKU"), 100); err != nil {
			t.Fatal(err)
		}
	}
	for l, want := range map[string]int64{"T": 100, "K": 100, "U": 100} {
		if spent, _, err := b.Status(ctx, "acme", named[l]); err != nil || spent != want {
			t.Errorf("Status(%s) = %d spent, %v; want %d", l, spent, err, want)
		}
	}
}

// TestRedisScopesSeedRace: replica A reads one scope's spend from Postgres
// slowly; meanwhile replica B seeds all three and settles in them. A's
// stale value comes too late and is dropped (SET NX), so B's settle is not
// lost, and A's own settle adds on top.
func TestRedisScopesSeedRace(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(_ context.Context, _ string, s budget.Scope) (int64, error) {
		if s.Kind == budget.ScopeKey {
			close(entered)
			<-release
			return 1, nil // what Postgres said before B's settle landed
		}
		return 0, nil
	}
	fast := func(_ context.Context, _ string, s budget.Scope) (int64, error) {
		if s.Kind == budget.ScopeKey {
			return 2, nil
		}
		return 0, nil
	}
	a := budget.NewRedis(newClient(t, srv), slow, budget.RedisOptions{})
	b := budget.NewRedis(newClient(t, srv), fast, budget.RedisOptions{})
	done := make(chan error, 1)
	go func() {
		_, err := a.Settle(ctx, "acme", "ra", in("TKU"), 10)
		done <- err
	}()
	<-entered
	if _, err := b.Settle(ctx, "acme", "rb", in("UKT"), 100); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for l, want := range map[string]int64{"T": 110, "K": 112, "U": 110} {
		if spent, _, err := a.Status(ctx, "acme", named[l]); err != nil || spent != want {
			t.Errorf("Status(%s) = %d, %v; want %d", l, spent, err, want)
		}
	}
}
