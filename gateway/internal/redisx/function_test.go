package redisx

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

var counterLib = NewLibrary("tollgate_test", `
register('incr', function(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end)
`)

var incrFn = counterLib.Function("incr")

// TestFCallLoadsAndReloads drives a function through every way Redis can
// lose it — never loaded, FUNCTION FLUSH, FLUSHALL, a restart — and wants
// each next call to load the library again and answer, with the commands
// it took counted.
func TestFCallLoadsAndReloads(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	ctx := context.Background()
	call := func(step string, by string, want int64, wantCommands int64) {
		t.Helper()
		before := c.Commands()
		n, err := c.FCall(ctx, incrFn, []string{"k"}, []string{by}).AsInt64()
		if err != nil || n != want {
			t.Fatalf("%s: FCALL = %d, %v; want %d", step, n, err, want)
		}
		if d := c.Commands() - before; d != wantCommands {
			t.Fatalf("%s: %d commands, want %d", step, d, wantCommands)
		}
	}
	// Missing, loaded, called again: FCALL, FUNCTION LOAD, FCALL.
	call("first call", "2", 2, 3)
	call("warm call", "3", 5, 1)
	out, err := srv.Do("FUNCTION", "LIST")
	if err != nil || !strings.Contains(out, counterLib.Name()) {
		t.Fatalf("FUNCTION LIST = %q, %v; want the library %s", out, err, counterLib.Name())
	}

	if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	call("after FUNCTION FLUSH", "1", 6, 3)
	if _, err := srv.Do("FLUSHALL"); err != nil { // keys go; Redis 7 keeps functions
		t.Fatal(err)
	}
	call("after FLUSHALL", "4", 4, 1)

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := c.FCall(ctx, incrFn, []string{"k"}, []string{"1"}).Error(); !IsUnavailable(err) {
		t.Fatalf("FCALL with Redis down: %v, want an unavailable error", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	redistest.WaitReconnected(t, c, "k")
	call("after restart (a fresh server)", "7", 7, 3)
	call("warm after restart", "1", 8, 1)
}

// TestLoadBeforeFirstCall loads the library ahead: the first call is then
// one FCALL.
func TestLoadBeforeFirstCall(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	if err := c.Load(context.Background(), counterLib); err != nil {
		t.Fatal(err)
	}
	before := c.Commands()
	if n, err := c.FCall(context.Background(), incrFn, []string{"k"}, []string{"5"}).AsInt64(); err != nil || n != 5 {
		t.Fatalf("FCALL = %d, %v; want 5", n, err)
	}
	if d := c.Commands() - before; d != 1 {
		t.Fatalf("first call after Load: %d commands, want 1", d)
	}
}

// TestFCallConcurrentMiss has many callers miss the function at once:
// every one must get its answer, and the counter must hold every step.
func TestFCallConcurrentMiss(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	const callers = 32
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.FCall(context.Background(), incrFn, []string{"k"}, []string{"1"}).Error()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a caller failed: %v", err)
		}
	}
	if got, err := srv.Do("GET", "k"); err != nil || got != "32" {
		t.Fatalf("GET k = %q, %v; want 32", got, err)
	}
}

// TestLibraryNames wants names that differ with the code (gateways of two
// versions on one Redis keep their own) and are stable for the same code.
func TestLibraryNames(t *testing.T) {
	a := NewLibrary("lib", "register('f', function() return 1 end)")
	b := NewLibrary("lib", "register('f', function() return 2 end)")
	a2 := NewLibrary("lib", "register('f', function() return 1 end)")
	tests := []struct {
		name      string
		got, want string
		same      bool
	}{
		{"same code, same library", a.Name(), a2.Name(), true},
		{"same code, same function", a.Function("f").Name(), a2.Function("f").Name(), true},
		{"other code, other library", a.Name(), b.Name(), false},
		{"other code, other function", a.Function("f").Name(), b.Function("f").Name(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if (tt.got == tt.want) != tt.same {
				t.Fatalf("%q vs %q: same = %v, want %v", tt.got, tt.want, tt.got == tt.want, tt.same)
			}
		})
	}
	if !strings.HasPrefix(a.Code(), "#!lua name="+a.Name()+"\n") {
		t.Fatalf("code starts %q", a.Code()[:40])
	}
	if !strings.HasPrefix(a.Function("f").Name(), "f_") || len(a.Function("f").Name()) != len("f_")+12 {
		t.Fatalf("function name %q, want f_ and 12 hex digits", a.Function("f").Name())
	}
}

// TestFCallMulti sends calls in one write and wants their replies in
// order, Redis's order being theirs (each reply sees the ones before);
// with the library missing, every call is loaded and sent again, in order.
func TestFCallMulti(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	ctx := context.Background()
	calls := []Call{{incrFn, []string{"k"}, []string{"1"}}, {incrFn, []string{"k"}, []string{"10"}}, {incrFn, []string{"k"}, []string{"100"}}}
	check := func(step string, want ...int64) {
		t.Helper()
		res := c.FCallMulti(ctx, calls, nil)
		if len(res) != len(want) {
			t.Fatalf("%s: %d replies, want %d", step, len(res), len(want))
		}
		for i, r := range res {
			if n, err := r.AsInt64(); err != nil || n != want[i] {
				t.Fatalf("%s: reply %d = %d, %v; want %d", step, i, n, err, want[i])
			}
		}
	}
	check("missing library", 1, 11, 111)
	before := c.Commands()
	check("warm", 112, 122, 222)
	if d := c.Commands() - before; d != 3 {
		t.Errorf("warm: %d commands, want 3", d)
	}
	if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	check("after FUNCTION FLUSH", 223, 233, 333)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for i, r := range c.FCallMulti(ctx, calls, nil) {
		if !IsUnavailable(r.Error()) {
			t.Fatalf("Redis down: reply %d: %v, want unavailable", i, r.Error())
		}
	}
}
