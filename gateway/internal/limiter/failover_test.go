package limiter

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestRedisKilledAndRestarted kills Redis under load: FailClosed calls fail
// fast with ErrUnavailable, FailOpen calls are decided by the fallback with
// the limits divided by Replicas, and Redis decides again once it is back.
func TestRedisKilledAndRestarted(t *testing.T) {
	srv := redistest.Start(t)
	c := newRedisClient(t, srv, 0)
	clk := newTestClock() // the fallback's clock, frozen
	l := NewRedis(c, RedisOptions{Now: clk.Now})
	ctx := context.Background()

	// Load in both modes, through the kill and the restart, on the same
	// client; a second limiter keeps l's counters exact.
	load := NewRedis(c, RedisOptions{})
	stop := make(chan struct{})
	var loadRedis, loadFallback, loadUnavailable atomic.Int64
	var wg sync.WaitGroup
	for g := range 4 {
		mode := FailMode(g % 2)
		wg.Go(func() {
			r := &Request{Tenant: "load", Limits: []Limit{{Key: "t", RPM: MaxRPM}}, OnError: mode, Replicas: 2}
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
				d, err := load.Admit(ctx, r)
				switch {
				case err == nil && d.Fallback:
					loadFallback.Add(1)
				case err == nil:
					loadRedis.Add(1)
				case mode == FailClosed && errors.Is(err, ErrUnavailable):
					loadUnavailable.Add(1)
				default:
					t.Errorf("load, %v: %+v, %v", mode, d, err)
					return
				}
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	open := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 100}, {Key: "k", TPM: 1000}}, Tokens: 5, OnError: FailOpen, Replicas: 4}
	closed := *open
	closed.OnError = FailClosed
	if d := admitOK(t, l, open); !d.Allowed || d.Fallback || d.LimitRequests != 100 || d.RemainingRequests != 99 || d.LimitTokens != 1000 {
		t.Fatalf("with Redis up: %+v", d)
	}

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		start := time.Now()
		d, err := l.Admit(ctx, &closed)
		if took := time.Since(start); took >= 200*time.Millisecond {
			t.Fatalf("FailClosed admission %d with Redis down took %v", i, took)
		}
		if !errors.Is(err, ErrUnavailable) || d != (Decision{}) {
			t.Fatalf("FailClosed admission %d with Redis down: %+v, %v; want ErrUnavailable", i, d, err)
		}
	}
	if err := l.Adjust(ctx, "acme", open.Limits, 10, FailClosed, 4); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("FailClosed Adjust with Redis down: %v, want ErrUnavailable", err)
	}

	// FailOpen: 100 RPM over 4 replicas is 25 here, at once (5 tokens of
	// 250 TPM would allow 50), then one every 2.4s.
	allowed := 0
	for i := range 40 {
		d := admitOK(t, l, open)
		if !d.Fallback || d.LimitRequests != 25 || d.LimitTokens != 250 {
			t.Fatalf("FailOpen admission %d with Redis down: %+v, want a fallback decision with limits 25 and 250", i, d)
		}
		if d.Allowed {
			allowed++
		} else if d.RetryAfter != 2400*time.Millisecond {
			t.Fatalf("FailOpen rejection %d: RetryAfter %v, want 2.4s", i, d.RetryAfter)
		}
	}
	if allowed != 25 {
		t.Fatalf("the fallback allowed %d of 40, want 25", allowed)
	}
	// Tokens and Adjust go to the fallback too.
	tok := &Request{Tenant: "acme", Limits: []Limit{{Key: "k2", TPM: 1000}}, Tokens: 500, OnError: FailOpen, Replicas: 2}
	if d := admitOK(t, l, tok); !d.Allowed || !d.Fallback || d.RemainingTokens != 0 {
		t.Fatalf("500 of 500 fallback tokens: %+v", d)
	}
	tok.Tokens = 100
	if d := admitOK(t, l, tok); d.Allowed || d.RetryAfter != 12*time.Second {
		t.Fatalf("100 more fallback tokens: %+v, want a rejection with RetryAfter 12s", d)
	}
	if err := l.Adjust(ctx, "acme", tok.Limits, -100, FailOpen, 2); err != nil {
		t.Fatalf("FailOpen Adjust with Redis down: %v", err)
	}
	if d := admitOK(t, l, tok); !d.Allowed || !d.Fallback {
		t.Fatalf("fallback tokens after a give-back: %+v", d)
	}
	if s := l.Stats(); s != (Stats{Admitted: 1 + 25 + 2, Rejected: 15 + 1, Fallbacks: 40 + 3, Errors: 21}) {
		t.Fatalf("stats with Redis down: %+v", s)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		d, err := l.Admit(ctx, &Request{Tenant: "probe", Limits: []Limit{{Key: "t", RPM: MaxRPM}}})
		if err == nil {
			if d.Fallback {
				t.Fatalf("a FailClosed decision from the fallback: %+v", d)
			}
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("while Redis restarts: %v", err)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("Redis not used again 5s after its restart: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("Redis decides again %v after its restart", time.Since(start))
	// A fresh server (no persistence) with the whole limit.
	if d := admitOK(t, l, open); !d.Allowed || d.Fallback || d.LimitRequests != 100 || d.RemainingRequests != 99 {
		t.Fatalf("after the restart: %+v, want Redis's decision", d)
	}
	time.Sleep(20 * time.Millisecond) // some load against the restarted server
	if loadRedis.Load() == 0 || loadFallback.Load() == 0 || loadUnavailable.Load() == 0 {
		t.Fatalf("load: %d by Redis, %d by the fallback, %d unavailable; want some of each",
			loadRedis.Load(), loadFallback.Load(), loadUnavailable.Load())
	}
}

// TestRedisTimeout blocks Redis (DEBUG SLEEP): calls give up after the
// client's timeout and count as unavailable.
func TestRedisTimeout(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	l := NewRedis(newRedisClient(t, srv, 100*time.Millisecond), RedisOptions{Now: newTestClock().Now})
	r := Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 10}}, Replicas: 2}
	admitOK(t, l, &r)

	slept := make(chan error, 1)
	go func() {
		_, err := srv.Do("DEBUG", "SLEEP", "0.5")
		slept <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the server fall asleep

	start := time.Now()
	_, err := l.Admit(context.Background(), &r)
	if took := time.Since(start); !errors.Is(err, ErrUnavailable) || took < 100*time.Millisecond || took > 300*time.Millisecond {
		t.Fatalf("FailClosed admission to a blocked Redis: %v after %v; want ErrUnavailable after the 100ms timeout", err, took)
	}
	r.OnError = FailOpen
	if d := admitOK(t, l, &r); !d.Allowed || !d.Fallback || d.LimitRequests != 5 || d.RemainingRequests != 4 {
		t.Fatalf("FailOpen admission to a blocked Redis: %+v", d)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	// A call that timed out may still have been run by Redis once it woke
	// (here: either, both or neither of the two): a timeout does not say
	// whether Redis charged the limit.
	d := admitOK(t, l, &r)
	if !d.Allowed || d.Fallback || d.LimitRequests != 10 || d.RemainingRequests < 6 || d.RemainingRequests > 8 {
		t.Fatalf("after the sleep: %+v, want Redis's decision with 6 to 8 remaining", d)
	}
}
