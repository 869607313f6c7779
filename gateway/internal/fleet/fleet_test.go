package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

func client(t *testing.T, srv *redistest.Server) *redisx.Client {
	t.Helper()
	return redisxtest.Connect(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: time.Second})
}

func start(t *testing.T, c *redisx.Client, opts Options) *Heartbeat {
	t.Helper()
	h, err := Start(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Stop(context.Background()) })
	return h
}

// eventually waits (generously: the machine may be loaded) until cond
// holds and returns when it first saw it hold.
func eventually(t *testing.T, what string, cond func() bool) time.Time {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if cond() {
			return time.Now()
		}
		if time.Now().After(end) {
			t.Fatalf("waited 20s for %s", what)
		}
	}
}

func lives(hs ...*Heartbeat) []int {
	out := make([]int, len(hs))
	for i, h := range hs {
		out[i] = h.Live()
	}
	return out
}

func all(n int, hs ...*Heartbeat) func() bool {
	return func() bool {
		for _, h := range hs {
			if h.Live() != n {
				return false
			}
		}
		return true
	}
}

// serverMillis is the Redis server's clock (TIME), in ms.
func serverMillis(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	out, err := srv.Do("TIME")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	sec, err1 := strconv.ParseInt(f[0], 10, 64)
	usec, err2 := strconv.ParseInt(f[1], 10, 64)
	if len(f) != 2 || err1 != nil || err2 != nil {
		t.Fatalf("TIME = %q", out)
	}
	return sec*1000 + usec/1000
}

// TestFleetJoinLeaveExpire: the count rises as replicas join, falls at
// once when one leaves (Stop) and, for one that vanishes without leaving,
// not before its registration's deadline on the server's clock; a
// replica that cannot reach Redis keeps its last count.
func TestFleetJoinLeaveExpire(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const interval, stale = 50 * time.Millisecond, 600 * time.Millisecond
	opts := Options{Interval: interval, Stale: stale}
	c1, c2, c3 := client(t, srv), client(t, srv), client(t, srv)
	h1 := start(t, c1, opts)
	eventually(t, "the first replica to count itself", all(1, h1))

	h2, h3 := start(t, c2, opts), start(t, c3, opts)
	if h1.ID() == h2.ID() || h2.ID() == h3.ID() || h1.ID() == h3.ID() {
		t.Fatalf("instance ids not unique: %s %s %s", h1.ID(), h2.ID(), h3.ID())
	}
	eventually(t, "three replicas counting three", all(3, h1, h2, h3))

	// A graceful leave drops it at the others' next heartbeat.
	if err := h3.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "two replicas counting two after a leave", all(2, h1, h2))
	m, err := Members(context.Background(), c1, "")
	if err != nil || len(m) != 2 || m[h3.ID()] != 0 || m[h1.ID()] == 0 || m[h2.ID()] == 0 {
		t.Fatalf("members after h3 left: %v, %v", m, err)
	}

	// h2 vanishes (its connection closed, as in a crash): registered
	// until its last deadline, then dropped.
	before := time.Now()
	if _, err := h2.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	dropped := eventually(t, "the vanished replica to be dropped", all(1, h1))
	// Its deadline is at least the server's clock at that heartbeat (not
	// before `before`, in ms) plus stale.
	if gone := dropped.Sub(before); gone < stale-2*time.Millisecond {
		t.Fatalf("a replica last heard from %v ago was dropped; its registration lasts %v", gone, stale)
	}
	if err := h2.Stop(context.Background()); err == nil {
		t.Fatal("Stop without Redis returned nil; want the error that the registration lapses on its own")
	}

	// Redis away: h1 keeps its last count through failing heartbeats.
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	fails := h1.Stats().Failures
	eventually(t, "heartbeats failing", func() bool { return h1.Stats().Failures >= fails+3 })
	if n := h1.Live(); n != 1 {
		t.Fatalf("count during the outage = %d, want the last one seen (1)", n)
	}
	if err := srv.Start(); err != nil { // empty: no persistence
		t.Fatal(err)
	}
	beats := h1.Stats().Beats
	eventually(t, "heartbeats answered again", func() bool { return h1.Stats().Beats > beats+1 })
	if n := h1.Live(); n != 1 {
		t.Fatalf("count after the outage = %d, want 1", n)
	}
	t.Logf("counts %v; dropped %v after the last heartbeat (stale %v)", lives(h1), dropped.Sub(before), stale)
}

// TestFleetServerClock: deadlines are on the Redis server's clock. A
// member whose deadline has passed on it is pruned by the next heartbeat
// of anyone, one whose deadline is ahead stays; the key expires when the
// latest deadline passes; Stop removes the replica's own member only.
func TestFleetServerClock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := client(t, srv)
	now := serverMillis(t, srv)
	if _, err := srv.Do("ZADD", DefaultKey, strconv.FormatInt(now-1, 10), "gone", strconv.FormatInt(now+60_000, 10), "alive"); err != nil {
		t.Fatal(err)
	}
	const stale = 2 * time.Hour
	h := start(t, c, Options{Interval: time.Hour, Stale: stale}) // one heartbeat, at start
	eventually(t, "the first heartbeat", func() bool { return h.Live() != 0 })
	if n := h.Live(); n != 2 {
		t.Fatalf("live = %d, want 2 (itself and the member whose deadline is ahead)", n)
	}
	m, err := Members(context.Background(), c, "")
	if err != nil {
		t.Fatal(err)
	}
	after := serverMillis(t, srv)
	if _, ok := m["gone"]; ok || m["alive"] != now+60_000 {
		t.Fatalf("members %v: want the passed deadline pruned, the other kept", m)
	}
	if d := m[h.ID()]; d < now+stale.Milliseconds() || d > after+stale.Milliseconds() {
		t.Fatalf("own deadline %d, want server time at the heartbeat (%d..%d) + %d", d, now, after, stale.Milliseconds())
	}
	pttl, err := srv.Do("PTTL", DefaultKey)
	if ms, _ := strconv.ParseInt(pttl, 10, 64); err != nil || ms < stale.Milliseconds()-10_000 || ms > stale.Milliseconds() {
		t.Fatalf("PTTL = %q, %v; want the latest deadline's (%v)", pttl, err, stale)
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if m, err := Members(context.Background(), c, ""); err != nil || len(m) != 1 || m["alive"] == 0 {
		t.Fatalf("members after Stop: %v, %v; want only the other", m, err)
	}
	// The key now expires with the remaining member's deadline.
	if pttl, err := srv.Do("PTTL", DefaultKey); err != nil {
		t.Fatal(err)
	} else if ms, _ := strconv.ParseInt(pttl, 10, 64); ms < 50_000 || ms > 60_000 {
		t.Fatalf("PTTL after Stop = %s; want the remaining deadline's (about 60 s)", pttl)
	}
	// The last member leaving deletes the set (Redis removes an empty one).
	if _, err := srv.Do("ZREM", DefaultKey, "alive"); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.Do("EXISTS", DefaultKey); err != nil || n != "0" {
		t.Fatalf("EXISTS = %q, %v", n, err)
	}
}

// TestFleetChurn: eight replicas joining and leaving at once, each
// checking that every count it sees is between those known to be
// registered throughout and all that ever were.
func TestFleetChurn(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := client(t, srv) // one connection may carry many replicas
	opts := Options{Interval: 20 * time.Millisecond, Stale: time.Minute}
	stayers := []*Heartbeat{start(t, c, opts), start(t, c, opts)}
	eventually(t, "two", all(2, stayers...))
	const churners = 6
	done := make(chan error, churners)
	for range churners {
		go func() {
			h, err := Start(c, opts)
			if err != nil {
				done <- err
				return
			}
			for range 5 {
				n, err := h.Beat(context.Background())
				if err != nil {
					done <- err
					return
				}
				if n < 3 || n > 2+churners {
					done <- errorf("a churner counted %d; want 3..%d", n, 2+churners)
					return
				}
			}
			done <- h.Stop(context.Background())
		}()
	}
	for range churners {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Every churner left: the stayers are all that remain, though no
	// registration has gone stale.
	eventually(t, "the stayers alone", all(2, stayers...))
}

func errorf(format string, args ...any) error {
	return fmt.Errorf(format, args...)
}

func TestFleetOptions(t *testing.T) {
	t.Parallel()
	if _, err := Start(nil, Options{}); err == nil {
		t.Error("Start without a client: nil error")
	}
	c, err := redisx.New(redisx.Options{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := Start(c, Options{Interval: time.Second, Stale: time.Second}); err == nil || !strings.Contains(err.Error(), "must exceed") {
		t.Errorf("stale = interval: %v", err)
	}
	// Redis never reached: the count stays 0, and Stop reports it.
	h, err := Start(c, Options{Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "failed heartbeats", func() bool { return h.Stats().Failures >= 2 })
	if h.Live() != 0 {
		t.Errorf("live = %d without Redis, want 0", h.Live())
	}
	if err := h.Stop(context.Background()); err == nil {
		t.Error("Stop without Redis: nil error")
	}
	if err := h.Stop(context.Background()); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
