package meterstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// endResults records what OnEnd got, by request id.
type endResults struct {
	mu  sync.Mutex
	got map[string][]meterstore.Settled
}

func (r *endResults) on(_ *meterstore.Correction, st *meterstore.Settlement, out meterstore.Settled) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]meterstore.Settled{}
	}
	r.got[st.RequestID] = append(r.got[st.RequestID], out)
}

func (r *endResults) of(id string) []meterstore.Settled {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got[id])
}

// newEndStore is a one-trip Store on a server of its own, its ends'
// results recorded.
func newEndStore(t *testing.T) (*meterstore.Store, *budget.Redis, *endResults) {
	c := newClient(t, redistest.Start(t))
	b := budget.NewRedis(c, nil, budget.RedisOptions{Prefix: "b:"})
	m := meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{Prefix: "rl:"}), b)
	res := new(endResults)
	m.OnEnd(res.on)
	return m, b, res
}

// TestEndCarriedByNextAdmission holds a deferred end's own call back and
// wants the tenant's next admission to run it first, in its own round
// trip: the next hold fits only in the budget the end gives back, the
// tokens the correction gives back are there, the result reaches OnEnd
// once, and the end's own call, let go, changes nothing more.
func TestEndCarriedByNextAdmission(t *testing.T) {
	t.Parallel()
	m, b, res := newEndStore(t)
	release := make(chan struct{})
	m.SetBeforeSend(func() { <-release })
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 100, TPM: 1_000}}
	scopes := []budget.Scope{tenantScope(1_000)}
	first := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 900},
		&meterstore.Hold{Tenant: "acme", RequestID: "r1", Scopes: scopes, Amount: 800, Lease: time.Minute})
	if !first.Decision.Allowed || !first.Reservation.Admitted {
		t.Fatalf("first: %+v", first)
	}
	// It used 100 tokens of the 900 charged and 600 µ$ of the 800 held,
	// crossing the 50% alert.
	out, deferred := m.End(&meterstore.Correction{Tenant: "acme", Limits: limits, Delta: -800, Mode: limiter.FailClosed},
		&meterstore.Settlement{Tenant: "acme", RequestID: "r1", Scopes: scopes, Actual: 600}, first.Seq)
	if !deferred || m.Pending() != 1 {
		t.Fatalf("End: %+v, deferred %v, pending %d; want deferred and pending", out, deferred, m.Pending())
	}
	// Not yet run: the hold is there.
	if spent, reserved, err := b.Status(ctx, "acme", scopes[0]); err != nil || spent != 0 || reserved != 800 {
		t.Fatalf("before the next admission: spent %d reserved %d (%v), want 0 and 800", spent, reserved, err)
	}
	// 800 tokens and 300 µ$ fit only once r1's end has run (1000 - 100,
	// 1000 - 600).
	next := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 800},
		&meterstore.Hold{Tenant: "acme", RequestID: "r2", Scopes: scopes, Amount: 300, Lease: time.Minute})
	if next.AdmitErr != nil || next.ReserveErr != nil || !next.Decision.Allowed || !next.Reservation.Admitted {
		t.Fatalf("next: %+v, want allowed and held (the end carried)", next)
	}
	if m.Pending() != 0 {
		t.Errorf("pending after the carrying admission: %d, want 0", m.Pending())
	}
	got := res.of("r1")
	if len(got) != 1 || got[0].AdjustErr != nil || got[0].SettleErr != nil || len(got[0].Crossed) != 1 || got[0].Crossed[0].Threshold != 50 {
		t.Fatalf("OnEnd got %+v, want one result crossing 50%%", got)
	}
	close(release)
	m.Wait()
	if got := res.of("r1"); len(got) != 1 {
		t.Errorf("OnEnd got %d results after the end's own call, want 1", len(got))
	}
	if spent, reserved, err := b.Status(ctx, "acme", scopes[0]); err != nil || spent != 600 || reserved != 300 {
		t.Errorf("after both calls: spent %d reserved %d (%v), want 600 and 300 (the end ran once)", spent, reserved, err)
	}
	// The token correction ran once: 100 + 800 used, 100 left.
	d, err := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits}, &meterstore.Hold{Tenant: "acme", RequestID: "r3", Scopes: scopes, Amount: 1, Lease: time.Minute}), error(nil)
	if err != nil || d.Decision.RemainingTokens < 100 || d.Decision.RemainingTokens > 120 {
		t.Errorf("remaining tokens %d, want 100 (and what came back since)", d.Decision.RemainingTokens)
	}
}

// TestEndOwnCall: an end no admission carries is made by its own call,
// whose result reaches OnEnd; a second end of the tenant while one is
// pending, and an end after which another admission started, are made at
// once (AdjustSettle), not deferred.
func TestEndOwnCall(t *testing.T) {
	t.Parallel()
	m, b, res := newEndStore(t)
	release := make(chan struct{})
	m.SetBeforeSend(func() { <-release })
	ctx := context.Background()
	scopes := []budget.Scope{tenantScope(1_000)}
	seq := map[string]uint64{}
	for _, id := range []string{"a", "b", "c"} {
		r := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: []limiter.Limit{{Key: "t", RPM: 10}}},
			&meterstore.Hold{Tenant: "acme", RequestID: id, Scopes: scopes, Amount: 100, Lease: time.Minute})
		if !r.Reservation.Admitted {
			t.Fatalf("%s: %+v", id, r)
		}
		seq[id] = r.Seq
	}
	out, deferred := m.End(nil, &meterstore.Settlement{Tenant: "acme", RequestID: "a", Scopes: scopes, Actual: 5}, seq["a"])
	if deferred || out.SettleErr != nil {
		t.Fatalf("a, ended after b's and c's admissions: deferred %v, %+v; want made at once", deferred, out)
	}
	if _, deferred := m.End(nil, &meterstore.Settlement{Tenant: "acme", RequestID: "c", Scopes: scopes, Actual: 40}, seq["c"]); !deferred {
		t.Fatal("c, alone since its admission, was not deferred")
	}
	out, deferred = m.End(nil, &meterstore.Settlement{Tenant: "acme", RequestID: "b", Scopes: scopes, Actual: 70}, m.LastSeq())
	if deferred || out.SettleErr != nil {
		t.Fatalf("b, with c's end pending: deferred %v, %+v; want made at once", deferred, out)
	}
	close(release)
	m.Wait()
	if got := res.of("c"); len(got) != 1 || got[0].SettleErr != nil {
		t.Errorf("OnEnd for c: %+v", got)
	}
	if got := append(res.of("a"), res.of("b")...); len(got) != 0 {
		t.Errorf("OnEnd for a or b, made at once: %+v", got)
	}
	if spent, reserved, err := b.Status(ctx, "acme", scopes[0]); err != nil || spent != 115 || reserved != 0 || m.Pending() != 0 {
		t.Errorf("spent %d reserved %d (%v), pending %d; want 115, 0, 0", spent, reserved, err, m.Pending())
	}
}

// TestEndsExactUnderConcurrency: tenants' requests run concurrently, each
// admitted and held together, then ended with End as if alone on the Store
// (so that as many as the cap allows are deferred and carried); every
// end's cost is added once and every hold released, and every deferred
// result reaches OnEnd once.
func TestEndsExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	m, b, res := newEndStore(t)
	var deferredN atomic.Int64
	ctx := context.Background()
	scopes := []budget.Scope{tenantScope(1 << 40)}
	limits := []limiter.Limit{{Key: "t", RPM: 1 << 20, TPM: 1 << 30}}
	const tenants, workers, each = 3, 8, 60
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				tenant := fmt.Sprint("t", (w+i)%tenants)
				id := fmt.Sprintf("w%d-%d", w, i)
				r := m.AdmitReserve(ctx, &limiter.Request{Tenant: tenant, Limits: limits, Tokens: 50},
					&meterstore.Hold{Tenant: tenant, RequestID: id, Scopes: scopes, Amount: 1_000, Lease: time.Minute})
				if !r.Reservation.Admitted {
					t.Errorf("%s: %+v", id, r)
					return
				}
				_, d := m.End(&meterstore.Correction{Tenant: tenant, Limits: limits, Delta: -20, Mode: limiter.FailClosed},
					&meterstore.Settlement{Tenant: tenant, RequestID: id, Scopes: scopes, Actual: int64(1 + i%7)}, m.LastSeq())
				if d {
					deferredN.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	m.Wait()
	var want [tenants]int64
	for w := range workers {
		for i := range each {
			want[(w+i)%tenants] += int64(1 + i%7)
		}
	}
	for k := range tenants {
		spent, reserved, err := b.Status(ctx, fmt.Sprint("t", k), scopes[0])
		if err != nil || spent != want[k] || reserved != 0 {
			t.Errorf("t%d: spent %d reserved %d (%v), want %d and 0", k, spent, reserved, err, want[k])
		}
	}
	n := int64(0)
	res.mu.Lock()
	for id, got := range res.got {
		if len(got) != 1 {
			t.Errorf("%s: OnEnd %d times", id, len(got))
		}
		n++
	}
	res.mu.Unlock()
	if n != deferredN.Load() || n == 0 || m.Pending() != 0 {
		t.Errorf("OnEnd for %d requests, %d deferred, %d pending", n, deferredN.Load(), m.Pending())
	}
}

// TestEndCarriedAfterItRan: an admission that carries an end its own call
// has run already (answered, not yet off pending) changes nothing of it:
// the correction is not made twice, the cost not added twice.
func TestEndCarriedAfterItRan(t *testing.T) {
	t.Parallel()
	m, b, res := newEndStore(t)
	answered, release := make(chan struct{}), make(chan struct{})
	m.SetBeforeAck(func() { close(answered); <-release })
	ctx := context.Background()
	limits := []limiter.Limit{{Key: "t", RPM: 100, TPM: 1_000}}
	scopes := []budget.Scope{tenantScope(1_000)}
	m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, Tokens: 900},
		&meterstore.Hold{Tenant: "acme", RequestID: "r1", Scopes: scopes, Amount: 800, Lease: time.Minute})
	// 300 tokens debt on top of the 900 charged: 1,200 used.
	if _, deferred := m.End(&meterstore.Correction{Tenant: "acme", Limits: limits, Delta: 300, Mode: limiter.FailClosed},
		&meterstore.Settlement{Tenant: "acme", RequestID: "r1", Scopes: scopes, Actual: 600}, m.LastSeq()); !deferred {
		t.Fatal("not deferred")
	}
	<-answered
	if m.Pending() != 1 {
		t.Fatalf("pending %d, want 1", m.Pending())
	}
	next := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits},
		&meterstore.Hold{Tenant: "acme", RequestID: "r2", Scopes: scopes, Amount: 1, Lease: time.Minute})
	close(release)
	m.Wait()
	// 1,200 tokens used of 1,000 a minute: 200 in debt, not 500.
	if next.AdmitErr != nil || next.Decision.Allowed || next.Decision.RetryAfter < 11*time.Second || next.Decision.RetryAfter > 13*time.Second {
		t.Errorf("next: %+v, want limited for ~12 s (the debt made once; twice is 30 s)", next.Decision)
	}
	if spent, _, err := b.Status(ctx, "acme", scopes[0]); err != nil || spent != 600 {
		t.Errorf("spent %d (%v), want 600", spent, err)
	}
	if got := res.of("r1"); len(got) != 1 {
		t.Errorf("OnEnd %d times, want 1", len(got))
	}
}
