package budget_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestRedisLeaseExpiry: replica A reserves with a 200ms lease and dies
// without settling; after the lease replica B gets the budget back.
func TestRedisLeaseExpiry(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	ca := newClient(t, srv)
	a := monthly{budget.NewRedis(ca, nil, budget.RedisOptions{})}
	b := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{})}

	// The lease ends 200ms after the script ran, between before and after.
	before := time.Now()
	res, err := a.Reserve(ctx, "acme", month, "crashed", 15_000_000, 20_000_000, 200*time.Millisecond)
	if err != nil || res != admitted(0, 15_000_000, 5_000_000) {
		t.Fatalf("A: Reserve = %+v, %v", res, err)
	}
	after := time.Now()
	ca.Close() // replica A is gone; its hold is never settled

	res, err = b.Reserve(ctx, "acme", month, "early", 10_000_000, 20_000_000, time.Minute)
	if time.Since(before) < 200*time.Millisecond && (err != nil || res != refused(0, 15_000_000, 5_000_000)) {
		t.Fatalf("B within the lease: Reserve = %+v, %v; want refused behind A's hold", res, err)
	}
	time.Sleep(time.Until(after.Add(250 * time.Millisecond)))

	// Reserve drops the expired hold before it decides.
	res, err = b.Reserve(ctx, "acme", month, "late", 10_000_000, 20_000_000, time.Minute)
	if err != nil || res != admitted(0, 10_000_000, 10_000_000) {
		t.Fatalf("B after the lease: Reserve = %+v, %v", res, err)
	}
	if spent, err := b.Settle(ctx, "acme", month, "late", 3_000_000); err != nil || spent != 3_000_000 {
		t.Fatalf("Settle = %d, %v", spent, err)
	}
	if spent, reserved, err := b.Status(ctx, "acme", month); err != nil || spent != 3_000_000 || reserved != 0 {
		t.Fatalf("Status = %d, %d, %v; want 3000000, 0", spent, reserved, err)
	}
	// A late Settle of the expired hold still charges it, and only once.
	for range 2 {
		if spent, err := b.Settle(ctx, "acme", month, "crashed", 4_000_000); err != nil || spent != 7_000_000 {
			t.Fatalf("Settle of the expired hold = %d, %v; want 7000000", spent, err)
		}
	}

	// Shrink does not bring an expired hold back.
	if _, err := b.Reserve(ctx, "acme", month, "shrunk", 5_000_000, 20_000_000, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := b.Shrink(ctx, "acme", month, "shrunk", 1_000_000); err != nil {
		t.Fatal(err)
	}
	if spent, reserved, err := b.Status(ctx, "acme", month); err != nil || spent != 7_000_000 || reserved != 0 {
		t.Fatalf("Status after Shrink of an expired hold = %d, %d, %v; want 7000000, 0", spent, reserved, err)
	}

	// Status and Extend drop expired holds too.
	if _, err := b.Reserve(ctx, "acme", month, "short", 5_000_000, 20_000_000, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	if spent, reserved, err := b.Status(ctx, "acme", month); err != nil || spent != 7_000_000 || reserved != 0 {
		t.Fatalf("Status after a lease = %d, %d, %v; want 7000000, 0", spent, reserved, err)
	}
	if _, err := b.Reserve(ctx, "acme", month, "short2", 5_000_000, 20_000_000, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(250 * time.Millisecond)
	res, err = b.Extend(ctx, "acme", month, "new", 13_000_000, 20_000_000, time.Minute)
	if err != nil || res != (budget.Reservation{Admitted: true, Recreated: true, Spent: 7_000_000, Reserved: 13_000_000}) {
		t.Fatalf("Extend after a lease = %+v, %v", res, err)
	}
}

// TestRedisExtendRenewsLease: a hold extended before its lease ends lives
// one new lease from the Extend.
func TestRedisExtendRenewsLease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{})}
	// Each lease ends a second after its script ran, which was between the
	// times taken around the call.
	if _, err := c.Reserve(ctx, "acme", month, "r", 100, 1000, time.Second); err != nil {
		t.Fatal(err)
	}
	reserved1 := time.Now()
	time.Sleep(time.Until(reserved1.Add(500 * time.Millisecond)))
	extend0 := time.Now()
	res, err := c.Extend(ctx, "acme", month, "r", 50, 1000, time.Second)
	if err != nil || res != admitted(0, 150, 850) {
		t.Fatalf("Extend = %+v, %v", res, err)
	}
	extend1 := time.Now()
	time.Sleep(time.Until(reserved1.Add(1100 * time.Millisecond))) // the first lease is over
	_, reserved, err := c.Status(ctx, "acme", month)
	if late := time.Since(extend0) >= time.Second; err != nil || (reserved != 150 && !late) {
		t.Fatalf("Status past the first lease = %d, %v; want 150 (renewed)", reserved, err)
	} else if late {
		t.Logf("the machine was too slow to check the renewed hold")
	}
	time.Sleep(time.Until(extend1.Add(1100 * time.Millisecond)))
	if _, reserved, err = c.Status(ctx, "acme", month); err != nil || reserved != 0 {
		t.Fatalf("Status past the renewed lease = %d, %v; want 0", reserved, err)
	}
	// Extending the expired hold makes a new one.
	res, err = c.Extend(ctx, "acme", month, "r", 70, 1000, time.Second)
	if err != nil || !res.Recreated || res.Reserved != 70 {
		t.Fatalf("Extend after expiry = %+v, %v; want Recreated with 70", res, err)
	}
}

// TestRedisSeeding: the Seeder is called when the spent key is missing and
// not on warm calls, and again after Redis restarts empty.
func TestRedisSeeding(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := newClient(t, srv)
	l := newLedger(map[string]int64{"acme": 7_000_000, "beta": 1})
	c := monthly{budget.NewRedis(rc, l.seed, budget.RedisOptions{})}

	// Cold, on a server without the script: EVALSHA (NOSCRIPT), EVAL
	// ("seed"), SET NX, EVALSHA.
	before := rc.Commands()
	spent, reserved, err := c.Status(ctx, "acme", month)
	if err != nil || spent != 7_000_000 || reserved != 0 {
		t.Fatalf("Status = %d, %d, %v", spent, reserved, err)
	}
	if n, d := l.calls.Load(), rc.Commands()-before; n != 1 || d != 4 {
		t.Fatalf("cold Status: %d Seeder calls, %d commands; want 1, 4", n, d)
	}
	// Cold with the script loaded: three commands.
	before = rc.Commands()
	if spent, _, err := c.Status(ctx, "beta", month); err != nil || spent != 1 {
		t.Fatalf("Status = %d, %v", spent, err)
	}
	if n, d := l.calls.Load(), rc.Commands()-before; n != 2 || d != 3 {
		t.Fatalf("cold Status with the script loaded: %d Seeder calls, %d commands; want 2, 3", n, d)
	}
	ttl, err := srv.Do("PTTL", "tollgate:budget:{acme}:tenant::2026-11:spent")
	if ms, _ := strconv.ParseInt(ttl, 10, 64); err != nil || ms <= (40*24*time.Hour-time.Minute).Milliseconds() || ms > (40*24*time.Hour).Milliseconds() {
		t.Fatalf("PTTL of spent = %q, %v; want about 40 days", ttl, err)
	}

	// Warm: no Seeder calls.
	if _, err := c.Reserve(ctx, "acme", month, "r1", 500_000, 10_000_000, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Extend(ctx, "acme", month, "r1", 100_000, 10_000_000, time.Minute); err != nil {
		t.Fatal(err)
	}
	if spent, err := c.Settle(ctx, "acme", month, "r1", 400_000); err != nil || spent != 7_400_000 {
		t.Fatalf("Settle = %d, %v", spent, err)
	}
	if _, _, err := c.Status(ctx, "acme", month); err != nil {
		t.Fatal(err)
	}
	if n := l.calls.Load(); n != 2 {
		t.Fatalf("Seeder called %d times after warm calls, want 2", n)
	}

	// Redis restarts empty; Postgres has the settled cost by now.
	l.set("acme", 7_400_000)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	spent, reserved = waitStatus(t, c, "acme")
	if spent != 7_400_000 || reserved != 0 || l.calls.Load() != 3 {
		t.Fatalf("after restart: Status = %d, %d after %d Seeder calls; want 7400000, 0 after 3", spent, reserved, l.calls.Load())
	}
}

// TestRedisSeedRace: of two replicas seeding at once the first SET NX wins
// and the other's value is dropped, so both see one counter.
func TestRedisSeedRace(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context, tenant string, s budget.Scope) (int64, error) {
		close(entered)
		<-release
		return 100, nil
	}
	a := monthly{budget.NewRedis(newClient(t, srv), slow, budget.RedisOptions{})}
	b := monthly{budget.NewRedis(newClient(t, srv), func(context.Context, string, budget.Scope) (int64, error) { return 200, nil }, budget.RedisOptions{})}
	done := make(chan error, 1)
	go func() {
		_, err := a.Settle(ctx, "acme", month, "ra", 1)
		done <- err
	}()
	<-entered // A found no counter and is reading Postgres
	if spent, err := b.Settle(ctx, "acme", month, "rb", 1); err != nil || spent != 201 {
		t.Fatalf("B: Settle = %d, %v; want 201", spent, err)
	}
	close(release) // A's seed of 100 comes too late and is ignored
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if spent, _, err := a.Status(ctx, "acme", month); err != nil || spent != 202 {
		t.Fatalf("Status = %d, %v; want 202", spent, err)
	}
}

// waitStatus polls Status until Redis answers again.
func waitStatus(t *testing.T, c monthly, tenant string) (spent, reserved int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		spent, reserved, err := c.Status(context.Background(), tenant, month)
		if err == nil {
			return spent, reserved
		}
		t.Logf("Status while Redis restarts: %v", err)
		if !errors.Is(err, budget.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Status after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRedisUnavailable: with Redis dead every operation fails fast with
// ErrUnavailable (nothing is admitted); after a restart the same counter
// works again.
func TestRedisUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	l := newLedger(map[string]int64{"acme": 1000})
	// The default command timeout (100ms), as in production.
	c := monthly{budget.NewRedis(newClientWith(t, redisx.Options{Addrs: []string{srv.Addr()}}), l.seed, budget.RedisOptions{})}
	for attempt := 0; ; attempt++ { // a cold call may pass 100ms on a busy machine
		_, err := c.Reserve(ctx, "acme", month, "r0", 1, 10_000, time.Minute)
		if err == nil {
			break
		}
		if attempt == 10 {
			t.Fatal(err)
		}
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		call func() error
	}{
		{"Reserve", func() error {
			res, err := c.Reserve(ctx, "acme", month, "r1", 1, 10_000, time.Minute)
			if res.Admitted {
				return errors.New("admitted")
			}
			return err
		}},
		{"Extend", func() error {
			res, err := c.Extend(ctx, "acme", month, "r0", 1, 10_000, time.Minute)
			if res.Admitted {
				return errors.New("admitted")
			}
			return err
		}},
		{"Settle", func() error { _, err := c.Settle(ctx, "acme", month, "r0", 1); return err }},
		{"Status", func() error { _, _, err := c.Status(ctx, "acme", month); return err }},
		{"Correct", func() error { return c.Correct(ctx, "acme", month, 5) }},
	}
	for round := range 2 {
		for _, op := range ops {
			start := time.Now()
			err := op.call()
			if d := time.Since(start); !errors.Is(err, budget.ErrUnavailable) || d > 200*time.Millisecond {
				t.Errorf("round %d: %s with Redis down: %v after %v; want ErrUnavailable within 200ms", round, op.name, err, d)
			}
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if spent, reserved := waitStatus(t, c, "acme"); spent != 1000 || reserved != 0 {
		t.Fatalf("after restart: Status = %d, %d; want 1000 (re-seeded), 0", spent, reserved)
	}
	res, err := c.Reserve(ctx, "acme", month, "r2", 9000, 10_000, time.Minute)
	if err != nil || res != admitted(1000, 9000, 0) {
		t.Fatalf("Reserve after restart = %+v, %v", res, err)
	}
}

// TestRedisCommandsPerOperation: a warm operation is one command, counted
// by the client and by the server.
func TestRedisCommandsPerOperation(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rc := newClient(t, srv)
	c := monthly{budget.NewRedis(rc, newLedger(nil).seed, budget.RedisOptions{})}
	scopes := []budget.Scope{tenantMonth(month, 1<<40)}
	// Warm up: seed the counter, load all scripts.
	if _, err := c.Reserve(ctx, "acme", month, "warm", 1, 1<<40, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Extend(ctx, "acme", month, "warm", 1, 1<<40, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Settle(ctx, "acme", month, "warm", 1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Status(ctx, "acme", month); err != nil {
		t.Fatal(err)
	}
	if err := c.Shrink(ctx, "acme", month, "warm", 0); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		call func() error
		// sets is how many SETs the script itself runs (commandstats
		// counts commands run by scripts too); a seeding SET would be one
		// more.
		sets int64
	}{
		{"Reserve", func() error { _, err := c.Reserve(ctx, "acme", month, "r", 1000, 1<<40, time.Minute); return err }, 0},
		{"Reserve again", func() error { _, err := c.Reserve(ctx, "acme", month, "r", 1000, 1<<40, time.Minute); return err }, 0},
		{"Extend", func() error { _, err := c.Extend(ctx, "acme", month, "r", 1000, 1<<40, time.Minute); return err }, 0},
		{"Shrink", func() error { return c.Shrink(ctx, "acme", month, "r", 1500) }, 0},
		{"Status", func() error { _, _, err := c.Status(ctx, "acme", month); return err }, 0},
		{"Settle", func() error { _, err := c.c.Settle(ctx, "acme", "r", scopes, 1500); return err }, 1},
		{"Settle again", func() error { _, err := c.c.Settle(ctx, "acme", "r", scopes, 1500); return err }, 1},
		{"Correct", func() error { return c.Correct(ctx, "acme", month, 2000) }, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resetStats(t, srv)
			before := rc.Commands()
			if err := tt.call(); err != nil {
				t.Fatal(err)
			}
			if d := rc.Commands() - before; d != 1 {
				t.Errorf("client sent %d commands, want 1", d)
			}
			stats := commandStats(t, srv)
			want := int64(1)
			if tt.name == "Correct" {
				want = 0
			}
			if stats["evalsha"] != want || stats["eval"] != 0 || stats["set"] != tt.sets {
				t.Errorf("server saw evalsha %d, eval %d, set %d; want %d, 0, %d (all: %v)",
					stats["evalsha"], stats["eval"], stats["set"], want, tt.sets, stats)
			}
		})
	}
}

// TestRedisSettledWindow: a repeated Settle adds nothing within SettledTTL
// and counts again after it.
func TestRedisSettledWindow(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{SettledTTL: 200 * time.Millisecond})}
	// The marker ends 200ms after the script ran, between before and after.
	var after time.Time
	before := time.Now()
	for range 2 {
		if spent, err := c.Settle(ctx, "acme", month, "r", 10); err != nil || (spent != 10 && time.Since(before) < 200*time.Millisecond) {
			t.Fatalf("Settle = %d, %v; want 10", spent, err)
		}
		if after.IsZero() {
			after = time.Now()
		}
	}
	time.Sleep(time.Until(after.Add(300 * time.Millisecond)))
	if spent, err := c.Settle(ctx, "acme", month, "r", 10); err != nil || spent != 20 {
		t.Fatalf("Settle after the window = %d, %v; want 20", spent, err)
	}
	if res, err := c.Reserve(ctx, "acme", month, "r2", 5, 100, time.Minute); err != nil || res != admitted(20, 5, 75) {
		t.Fatalf("Reserve = %+v, %v", res, err)
	}
}

// TestRedisPurgesManyExpiredHolds: more expired holds than one purge batch
// are all dropped by the next call.
func TestRedisPurgesManyExpiredHolds(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := monthly{budget.NewRedis(newClient(t, srv), nil, budget.RedisOptions{})}
	const n = 600
	start := time.Now()
	for i := range n {
		if _, err := c.Reserve(ctx, "acme", month, fmt.Sprint("r", i), 10, 1<<40, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	last := time.Now() // the last short lease ends before last + 2s
	if _, err := c.Reserve(ctx, "acme", month, "long", 7, 1<<40, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, reserved, err := c.Status(ctx, "acme", month); err != nil || (reserved != n*10+7 && time.Since(start) < 2*time.Second) {
		t.Fatalf("Status = %d, %v; want %d", reserved, err, n*10+7)
	}
	time.Sleep(time.Until(last.Add(2100 * time.Millisecond)))
	if _, reserved, err := c.Status(ctx, "acme", month); err != nil || reserved != 7 {
		t.Fatalf("Status after the leases = %d, %v; want 7", reserved, err)
	}
	for cmd, want := range map[string]string{"HLEN": "2", "ZCARD": "1"} {
		key := "tollgate:budget:{acme}:tenant::2026-11:holds"
		if cmd == "ZCARD" {
			key = "tollgate:budget:{acme}:tenant::2026-11:leases"
		}
		if got, err := srv.Do(cmd, key); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %s", cmd, got, err, want)
		}
	}
}
