package redisx

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

var pairLib = NewLibrary("tollgate_test_pair", `
register('pair', function(keys, args)
  return redis.call('INCRBY', keys[1], args[1]) + redis.call('INCRBY', keys[2], args[1])
end)
`)

var pairFn = pairLib.Function("pair")

var pairScript = rueidis.NewLuaScript(`return redis.call('INCRBY', KEYS[1], ARGV[1]) + redis.call('INCRBY', KEYS[2], ARGV[1])`)

// TestClusterSplitSlotRetried: a function call and a script whose two
// keys are split between the two nodes of a slot being migrated are
// refused with TRYAGAIN; the client sends them again until the migration
// ends and each runs exactly once, on the new owner. Then a graceful
// failover: the promoted replica has the library already (replicated),
// so a call is one command.
func TestClusterSplitSlotRetried(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, 1)
	c, err := New(Options{Addrs: cl.Addrs(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Connect(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Load(ctx, pairLib); err != nil {
		t.Fatal(err)
	}
	keys := []string{"{t}a", "{t}b"}
	if n, err := c.FCall(ctx, pairFn, keys, []string{"10"}).AsInt64(); err != nil || n != 20 {
		t.Fatalf("FCALL = %d, %v; want 20", n, err)
	}
	slot, err := cl.Slot("{t}")
	if err != nil {
		t.Fatal(err)
	}
	from, err := cl.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	to := cl.Masters()[0]
	if to == from {
		to = cl.Masters()[1]
	}

	type result struct {
		n   int64
		err error
	}
	fcall, script := make(chan result, 1), make(chan result, 1)
	steps := 0
	err = cl.MoveSlot(slot, to, func() {
		steps++
		if steps != 1 {
			return
		}
		// One key moved, one not: both calls must be refused until the
		// other moves.
		before := c.Retries()
		go func() {
			n, err := c.FCall(ctx, pairFn, keys, []string{"1"}).AsInt64()
			fcall <- result{n, err}
		}()
		go func() {
			n, err := c.Exec(ctx, pairScript, keys, []string{"100"}).AsInt64()
			script <- result{n, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for c.Retries() < before+2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if len(fcall) > 0 || len(script) > 0 {
			t.Errorf("a call over a split slot returned before the migration ended")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	f, s := <-fcall, <-script
	if f.err != nil || s.err != nil {
		t.Fatalf("after the migration: FCALL %v, script %v", f.err, s.err)
	}
	// Each ran once, in some order: a and b each got 1 and 100.
	if a, err := to.Do("GET", "{t}a"); err != nil || a != "111" {
		t.Fatalf("{t}a on the new owner = %q, %v; want 111 (10 + 1 + 100, each call once)", a, err)
	}
	if f.n+s.n != 2*11+2*110 && f.n+s.n != 2*111+2*11 && f.n+s.n != 2*110+2*111 {
		t.Fatalf("replies %d and %d do not fit one run each", f.n, s.n)
	}
	if c.Retries() < 2 {
		t.Fatalf("%d retries, want at least 2", c.Retries())
	}

	promoted, err := cl.Failover(to)
	if err != nil {
		t.Fatal(err)
	}
	out, err := promoted.Do("FUNCTION", "LIST")
	if err != nil || !strings.Contains(out, pairLib.Name()) {
		t.Fatalf("FUNCTION LIST on the promoted replica = %q, %v", out, err)
	}
	before := c.Commands()
	if n, err := c.FCall(ctx, pairFn, keys, []string{"1"}).AsInt64(); err != nil || n != 224 {
		t.Fatalf("FCALL after failover = %d, %v; want 224", n, err)
	}
	if d := c.Commands() - before; d != 1 {
		t.Fatalf("FCALL after failover took %d commands, want 1 (the library already there)", d)
	}
}
