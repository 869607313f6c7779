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
// every chunk 5 ms (so commands stay in flight), 30 commands sent about
// 200 µs apart from their own goroutines reach the proxy in a handful of
// writes with a 40 ms FlushDelay. (The keys share a hash slot, as a
// tenant's do, so they share a connection.)
//
// The bound is taken from the spread the sends really had, not the one
// asked for: on a loaded machine 200 µs sleeps last milliseconds. Each
// FlushDelay window ends in one write, and a gap longer than the delay
// can add one more, so the writes are at most 2 + 2·⌈spread/delay⌉ (the
// first command, sent while nothing else is in flight, goes out alone);
// the test allows one more for a write the kernel splits.
// Without the delay the same sends take a write each whenever the writer
// keeps up with them (logged for comparison, not asserted: how many a
// machine coalesces on its own depends on its load).
func TestFlushDelaySharesWrites(t *testing.T) {
	srv := redistest.Start(t)
	const n = 30
	const delay = 40 * time.Millisecond
	writes := func(flush time.Duration) (int64, time.Duration) {
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
		start := time.Now()
		var spread time.Duration
		for i := range n {
			wg.Add(1)
			spread = time.Since(start)
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
		return p.Stats().ClientReads - before, spread
	}
	alone, aloneSpread := writes(0)
	t.Logf("%d commands: %d writes without a flush delay (sent over %v)", n, alone, aloneSpread.Round(time.Microsecond))
	// A machine too loaded to send the commands within a few delays
	// cannot show the sharing; try again, three times at most.
	for attempt := 1; ; attempt++ {
		shared, spread := writes(delay)
		t.Logf("%d commands: %d writes with a %v flush delay (sent over %v)", n, shared, delay, spread.Round(time.Microsecond))
		bound := 3 + 2*int64((spread+delay-1)/delay)
		if bound >= n/2 {
			if attempt < 3 {
				continue
			}
			t.Fatalf("sending %d commands took %v, three times: too long for a %v flush delay to be seen", n, spread, delay)
		}
		if shared > bound {
			t.Fatalf("%d commands sent over %v went out in %d writes with a %v flush delay, want at most %d",
				n, spread, shared, delay, bound)
		}
		return
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
