package redisx

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

var incr = rueidis.NewLuaScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)

func TestExecCountsAndSurvivesRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := connected(t, srv)
	ctx := context.Background()
	n, err := c.Exec(ctx, incr, []string{"k"}, []string{"2"}).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("first exec = %d, %v", n, err)
	}
	before := c.Commands()
	if n, err = c.Exec(ctx, incr, []string{"k"}, []string{"3"}).AsInt64(); err != nil || n != 5 {
		t.Fatalf("second exec = %d, %v", n, err)
	}
	if d := c.Commands() - before; d != 1 {
		t.Fatalf("a warm script call sent %d commands, want 1", d)
	}

	// Redis dies: calls fail fast with an unavailable error, then work again
	// once it is back (scripts are reloaded after NOSCRIPT).
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.Exec(ctx, incr, []string{"k"}, []string{"1"}).Error()
	if err == nil || !IsUnavailable(err) {
		t.Fatalf("exec with Redis down: %v, want an unavailable error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("exec with Redis down took %v", d)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err = c.Exec(ctx, incr, []string{"k"}, []string{"7"}).AsInt64()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no recovery after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n != 7 {
		t.Fatalf("after restart = %d, want 7 (a fresh server)", n)
	}
}

func TestStartsWhileRedisIsDown(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Exec(context.Background(), incr, []string{"k"}, []string{"1"}).Error(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("exec before any connection: %v, want ErrUnavailable", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(ctxTimeout(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := c.Exec(context.Background(), incr, []string{"k"}, []string{"1"}).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestBadAddress(t *testing.T) {
	if _, err := New(Options{Addrs: []string{"localhost"}}); err == nil {
		t.Fatal("an address without a port was accepted")
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// connected is a client of srv, connected, closed when t ends. Its command
// timeout is 500 ms, not the default 100 ms: these tests count commands and
// replies, not time, and on a loaded 2-core machine a reply can take more
// than 100 ms.
func connected(t *testing.T, srv *redistest.Server) *Client {
	t.Helper()
	return connect(t, Options{Addrs: []string{srv.Addr()}, Timeout: 500 * time.Millisecond})
}

// connect returns a client made with opts and connected, closed when the
// test ends.
func connect(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Connect(ctxTimeout(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPartitionHeals: with the client's connections hung by a partition
// (nothing refused, nothing reset) and used concurrently, commands fail
// within the timeout; once the network heals, the client gives up the
// hung connections by itself and works again within PingInterval plus
// the dial timeout (ConnWriteTimeout), though those connections stay hung.
func TestPartitionHeals(t *testing.T) {
	srv := redistest.Start(t)
	px := faultnet.Start(t, srv.Addr())
	const timeout = 100 * time.Millisecond
	c := connect(t, Options{Addrs: []string{px.Addr()}, Timeout: timeout, DialTimeout: time.Second})
	ctx := context.Background()
	if err := c.Exec(ctx, incr, []string{"k"}, []string{"1"}).Error(); err != nil {
		t.Fatal(err)
	}
	// Concurrent callers, as a gateway's requests are: the client then
	// pipelines on its connections, whose reads have no deadline.
	hammer := func(d time.Duration) (ok, failed int64, slowest time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					start := time.Now()
					err := c.Exec(ctx, incr, []string{"k"}, []string{"1"}).Error()
					took := time.Since(start)
					mu.Lock()
					if err == nil {
						ok++
					} else {
						failed++
					}
					slowest = max(slowest, took)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return ok, failed, slowest
	}
	hammer(200 * time.Millisecond)
	px.Partition()
	_, failed, slowest := hammer(500 * time.Millisecond)
	if failed == 0 {
		t.Fatal("no command failed during the partition")
	}
	// The timeout bounds every command; a loaded machine adds to it.
	if slowest > timeout+time.Second {
		t.Errorf("a command took %v during the partition; the timeout is %v", slowest, timeout)
	}
	px.Heal()
	healed := time.Now()
	for {
		if err := c.Exec(ctx, incr, []string{"k"}, []string{"1"}).Error(); err == nil {
			break
		}
		if time.Since(healed) > 20*time.Second {
			t.Fatal("no command succeeded 20 s after the heal")
		}
		time.Sleep(10 * time.Millisecond)
	}
	const within = PingInterval + time.Second + 2*time.Second // ping gap, ping timeout, a loaded machine
	if back := time.Since(healed); back > within {
		t.Errorf("commands worked again %v after the heal; want ≤ %v", back, within)
	}
	// Every connection the partition hung, used or idle, is given up.
	for st := px.Stats(); st.Hung != 0; st = px.Stats() {
		if time.Since(healed) > 2*within {
			t.Fatalf("%v after the heal the client still holds %d hung connections: %+v", time.Since(healed), st.Hung, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
