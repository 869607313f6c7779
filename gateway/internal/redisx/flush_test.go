package redisx

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestFlushDelaySharesWrites: commands sent while others are in flight
// wait up to FlushDelay and go out together. Behind a proxy that delays
// every chunk 5 ms (so commands stay in flight), 30 commands sent 200 µs
// apart from their own goroutines reach the proxy in a few writes with a
// 2 ms FlushDelay, where without it each goes out alone. (The keys share
// a hash slot, as a tenant's do, so they share a connection.)
func TestFlushDelaySharesWrites(t *testing.T) {
	srv := redistest.Start(t)
	const n = 30
	writes := func(flush time.Duration) int64 {
		p := faultnet.Start(t, srv.Addr())
		c := connect(t, Options{Addrs: []string{p.Addr()}, Timeout: 5 * time.Second, FlushDelay: flush, Connections: 1})
		ctx := context.Background()
		if err := c.Exec(ctx, incr, []string{"{t}warm"}, []string{"1"}).Error(); err != nil {
			t.Fatal(err)
		}
		if err := p.SetDelay(5 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		before := p.Stats().ClientReads
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- c.Exec(ctx, incr, []string{"{t}k" + strconv.Itoa(i)}, []string{"1"}).Error()
			}()
			time.Sleep(200 * time.Microsecond)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		return p.Stats().ClientReads - before
	}
	alone := writes(0)
	shared := writes(2 * time.Millisecond)
	t.Logf("%d commands: %d writes without a flush delay, %d with 2ms", n, alone, shared)
	// 30 commands over about 6 ms, in batches at most 2 ms apart: about
	// 4 writes; half of n leaves room for a slow machine's timers.
	if shared > n/2 {
		t.Fatalf("%d commands went out in %d writes with a 2ms flush delay, want at most %d", n, shared, n/2)
	}
}

// TestConnections: the commands of requests in flight share as many
// connections as Options.Connections says (one by default), whatever
// their keys.
func TestConnections(t *testing.T) {
	srv := redistest.Start(t)
	for _, n := range []int{0, 1, 4} {
		p := faultnet.Start(t, srv.Addr())
		c := connect(t, Options{Addrs: []string{p.Addr()}, Timeout: 5 * time.Second, Connections: n})
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Exec(context.Background(), incr, []string{"k" + strconv.Itoa(i)}, []string{"1"}).Error(); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		want := int64(max(n, 1))
		if got := p.Stats().Accepted; got != want {
			t.Errorf("Connections %d: %d connections made, want %d", n, got, want)
		}
	}
}
