package limiter

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// fakeFleet is a Fleet whose count the test sets.
type fakeFleet struct{ n atomic.Int64 }

func (f *fakeFleet) Live() int { return int(f.n.Load()) }

// deadRedis is a client of a Redis that is never there: every call is
// unavailable, so FailOpen decides with the fallback.
func deadRedis(t *testing.T) *redisx.Client {
	t.Helper()
	c, err := redisx.New(redisx.Options{Addrs: []string{"127.0.0.1:1"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestFailOpenFollowsFleet: the fallback divides every limit by the live
// replica count, or by the request's Replicas when that is larger (a
// floor), or by 1 when neither is set; the adjustment divides the same.
// Checked with 16 goroutines racing on one cell of a frozen clock: the
// admissions are exactly the divided limit, never more.
func TestFailOpenFollowsFleet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		live, floor int
		want        int64 // the divided RPM of 100
	}{
		{0, 0, 100}, // never counted, no floor: the whole limit
		{0, 4, 25},  // never counted: the floor
		{4, 0, 25},  // the live count
		{4, 1, 25},  // 1 is no floor
		{4, 10, 10}, // a floor above the count
		{10, 4, 10}, // a count above the floor
		{3, 0, 34},  // rounded up
		{200, 0, 1}, // never below one request
	} {
		t.Run(fmt.Sprintf("live=%d,floor=%d", tc.live, tc.floor), func(t *testing.T) {
			t.Parallel()
			fl := &fakeFleet{}
			fl.n.Store(int64(tc.live))
			l := NewRedis(deadRedis(t), RedisOptions{Now: newTestClock().Now, Fleet: fl})
			var admitted, limit atomic.Int64
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					r := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 100}}, OnError: FailOpen, Replicas: tc.floor}
					for range 20 {
						d, err := l.Admit(context.Background(), r)
						if err != nil || !d.Fallback {
							t.Errorf("%+v, %v: want a fallback decision", d, err)
							return
						}
						limit.Store(d.LimitRequests)
						if d.Allowed {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if admitted.Load() != tc.want || limit.Load() != tc.want {
				t.Fatalf("admitted %d of 320 with limit %d; want %d", admitted.Load(), limit.Load(), tc.want)
			}
			// Tokens: a TPM of 1000 is divided the same, and a correction
			// lands on the same divided cell: giving back one token of a
			// full cell makes room for exactly one more.
			tok := &Request{Tenant: "acme", Limits: []Limit{{Key: "k", TPM: 1000}}, Tokens: 1, OnError: FailOpen, Replicas: tc.floor}
			wantTPM := (1000 + int64(max(tc.live, tc.floor, 1)) - 1) / int64(max(tc.live, tc.floor, 1))
			d := admitOK(t, l, tok)
			if d.LimitTokens != wantTPM {
				t.Fatalf("token limit %d, want %d", d.LimitTokens, wantTPM)
			}
			tok.Tokens = d.RemainingTokens
			if d := admitOK(t, l, tok); !d.Allowed || d.RemainingTokens != 0 {
				t.Fatalf("filling the cell: %+v", d)
			}
			if err := l.Adjust(context.Background(), "acme", tok.Limits, -1, FailOpen, tc.floor); err != nil {
				t.Fatal(err)
			}
			tok.Tokens = 1
			if d := admitOK(t, l, tok); !d.Allowed {
				t.Fatalf("after giving one token back: %+v", d)
			}
			if d := admitOK(t, l, tok); d.Allowed {
				t.Fatalf("a second token after giving one back: %+v", d)
			}
		})
	}
}

// TestFailOpenReadsFleetConcurrently: the count changing while admissions
// read it (the heartbeat's goroutine against the requests') is safe, and
// each decision uses one of the counts it could have read.
func TestFailOpenReadsFleetConcurrently(t *testing.T) {
	t.Parallel()
	fl := &fakeFleet{}
	l := NewRedis(deadRedis(t), RedisOptions{Now: newTestClock().Now, Fleet: fl})
	stop := make(chan struct{})
	var writer, wg sync.WaitGroup
	writer.Go(func() {
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			fl.n.Store(1 + i%4) // 1..4
		}
	})
	for g := range 8 {
		wg.Go(func() {
			r := &Request{Tenant: fmt.Sprint("t", g), Limits: []Limit{{Key: "t", RPM: 1200}}, OnError: FailOpen}
			for range 200 {
				d, err := l.Admit(context.Background(), r)
				if err != nil {
					t.Error(err)
					return
				}
				switch d.LimitRequests {
				case 1200, 600, 400, 300:
				default:
					t.Errorf("limit %d: not 1200 divided by a count of 1 to 4", d.LimitRequests)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	writer.Wait()
}
