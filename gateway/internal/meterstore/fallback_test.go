package meterstore_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestRedisHungOneWait: with Redis partitioned (nothing answers, nothing
// is refused), a fail_open admission with a hold waits for one timeout,
// not two: the hold is not asked for again alone on a Redis that has just
// not answered; it is unavailable, as a call of its own would have been.
func TestRedisHungOneWait(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	px := faultnet.Start(t, srv.Addr())
	const timeout = 300 * time.Millisecond
	m, c := oneTrip(t, px.Addr(), timeout)
	ctx := context.Background()
	hold := &meterstore.Hold{Tenant: "acme", RequestID: "r", Scopes: []budget.Scope{tenantScope(1000)}, Amount: 1, Lease: time.Minute}
	lr := &limiter.Request{Tenant: "acme", Limits: []limiter.Limit{{Key: "t", RPM: 3}}, OnError: limiter.FailOpen}
	// Warm: the script loaded, the counter seeded.
	if a := m.AdmitReserve(ctx, lr, hold); a.AdmitErr != nil || !a.Decision.Allowed || a.ReserveErr != nil {
		t.Fatalf("warm: %+v", a)
	}
	px.Partition()
	hold.RequestID = "r2"
	failures := c.Failures()
	start := time.Now()
	a := m.AdmitReserve(ctx, lr, hold)
	took := time.Since(start)
	if a.AdmitErr != nil || !a.Decision.Allowed || !a.Decision.Fallback || !a.Reserved || !isBudgetUnavailable(a.ReserveErr) {
		t.Fatalf("%+v, want a fallback admission and an unavailable hold", a)
	}
	if n := c.Failures() - failures; n != 1 {
		t.Errorf("%d Redis calls failed, want 1 (the admission and the hold together)", n)
	}
	if took >= 2*timeout {
		t.Errorf("took %v, want less than two timeouts (%v)", took, 2*timeout)
	}
}

// TestFallbackCorrectionStaysInProcess: the token correction of a request
// the in-process fallback admitted goes to the fallback, never to Redis,
// which did not count its tokens: with Redis back, giving them back there
// would let it admit more than its limit. Another request's correction
// still goes to Redis.
func TestFallbackCorrectionStaysInProcess(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	m, _ := oneTrip(t, srv.Addr(), time.Second)
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", TPM: 1000}}
	// rateKeys are the rate limiter's keys of tenant in Redis.
	rateKeys := func(tenant string) []string {
		t.Helper()
		keys, err := srv.Do("KEYS", "*{"+tenant+"}*")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, k := range strings.Fields(keys) {
			if !strings.Contains(k, ":budget:") {
				out = append(out, k)
			}
		}
		return out
	}
	for _, tt := range []struct {
		tenant   string
		fallback bool
	}{
		{"fb", true},
		{"rd", false},
	} {
		// More tokens than the estimate: the correction charges 400.
		corr := &meterstore.Correction{Tenant: tt.tenant, Limits: limits, Delta: 400, Mode: limiter.FailOpen, Fallback: tt.fallback}
		if out := m.AdjustSettle(ctx, corr, nil); out.AdjustErr != nil {
			t.Fatalf("%s: AdjustSettle: %v", tt.tenant, out.AdjustErr)
		}
		// And at a request's end, with a settle.
		st := &meterstore.Settlement{Tenant: tt.tenant, RequestID: "r", Scopes: []budget.Scope{tenantScope(1000)}, Actual: 1}
		if out, _ := m.End(corr, st, 0); out.AdjustErr != nil || out.SettleErr != nil {
			t.Fatalf("%s End: %+v", tt.tenant, out)
		}
		switch keys := rateKeys(tt.tenant); {
		case tt.fallback && len(keys) > 0:
			t.Errorf("the fallback's corrections reached Redis: %v", keys)
		case !tt.fallback && len(keys) == 0:
			t.Errorf("Redis's corrections did not reach it: no rate key of %q", tt.tenant)
		}
	}
}

// oneTrip returns a one-trip Store on the Redis at addr with the command
// timeout given, and its client, connected and closed when t ends.
func oneTrip(t *testing.T, addr string, timeout time.Duration) (*meterstore.Store, *redisx.Client) {
	t.Helper()
	c, err := redisx.New(redisx.Options{Addrs: []string{addr}, Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), budget.NewRedis(c, nil, budget.RedisOptions{})), c
}
