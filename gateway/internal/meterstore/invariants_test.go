package meterstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestOneSlot checks that a combined call's keys all carry one hash tag,
// for tenant ids that must be hashed into the tag too, and runs the calls
// on a one-node Redis Cluster, which refuses keys of two slots.
func TestOneSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--cluster-enabled", "yes")
	if _, err := srv.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := srv.Do("CLUSTER", "INFO")
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the one-node cluster did not become ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := newClient(t, srv)
	b := budget.NewRedis(c, nil, budget.RedisOptions{})
	l := limiter.NewRedis(c, limiter.RedisOptions{})
	m := meterstore.New(l, b)
	limits := []limiter.Limit{{Key: "t", RPM: 5, TPM: 1000}, {Key: "k:key-1", RPM: 5}, {Key: "m:gpt-*", TPM: 500}}
	scopes := []budget.Scope{tenantScope(10_000), {Kind: budget.ScopeUser, ID: "u:{1}", Window: budget.Day, Period: month + "-01", Limit: 500}}
	ctx := context.Background()
	for _, tenant := range []string{"acme", "{acme}", "a}b{c", "#x", "t:1"} {
		lr := &limiter.Request{Tenant: tenant, Limits: limits, Tokens: 10}
		a, err := l.PrepareAdmit(lr)
		if err != nil {
			t.Fatal(err)
		}
		h, err := b.PrepareReserve(tenant, "r1", scopes, 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		st, err := b.PrepareSettle(tenant, "r1", scopes, 100)
		if err != nil {
			t.Fatal(err)
		}
		adj, err := l.PrepareAdjust(tenant, limits, 5, limiter.FailClosed, 1)
		if err != nil {
			t.Fatal(err)
		}
		keys := append(append(append(append([]string(nil), a.Keys()...), h.Keys()...), adj.Keys()...), st.Keys()...)
		want := "{" + redisx.TenantTag(tenant) + "}"
		for _, k := range keys {
			if tag := hashTag(k); tag != want {
				t.Errorf("tenant %q: key %q has hash tag %q, want %q", tenant, k, tag, want)
			}
		}
		a.Release()
		adj.Release()
		for i, wantHeld := range []bool{true, true, false} { // the user's 500 refuses the third
			res := m.AdmitReserve(ctx, lr, &meterstore.Hold{Tenant: tenant, RequestID: fmt.Sprint("r", i), Scopes: scopes, Amount: 200, Lease: time.Minute})
			if res.AdmitErr != nil || res.ReserveErr != nil || res.Reservation.Admitted != wantHeld {
				t.Fatalf("tenant %q request %d: %+v, want held=%v", tenant, i, res, wantHeld)
			}
		}
		out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: tenant, Limits: limits, Delta: -5},
			&meterstore.Settlement{Tenant: tenant, RequestID: "r0", Scopes: scopes, Actual: 150})
		if out.AdjustErr != nil || out.SettleErr != nil {
			t.Fatalf("tenant %q: %+v", tenant, out)
		}
	}
}

// hashTag is the part of key Redis Cluster hashes, braces included: from
// the first '{' to the next '}', when that is not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i : i+j+2]
}

// TestReserveFailureKeepsAdmission breaks the budget's keys (a hash
// where a string belongs): the admission stays charged and the hold
// fails, as with two calls.
func TestReserveFailureKeepsAdmission(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStores(t, srv, nil)
	ctx := context.Background()
	for _, p := range []string{"one", "two"} {
		if _, err := srv.Do("HSET", p+":budget:{acme}:tenant::"+month+":spent", "x", "1"); err != nil {
			t.Fatal(err)
		}
	}
	limits := []limiter.Limit{{Key: "t", RPM: 3}}
	for j, m := range []*meterstore.Store{s.one, s.two} {
		for i := range 2 {
			a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits},
				&meterstore.Hold{Tenant: "acme", RequestID: fmt.Sprint("w", i), Scopes: []budget.Scope{tenantScope(1000)}, Amount: 1, Lease: time.Minute})
			if a.AdmitErr != nil || !a.Decision.Allowed || !a.Reserved || a.ReserveErr == nil ||
				!strings.Contains(a.ReserveErr.Error(), "WRONGTYPE") || a.Decision.RemainingRequests != int64(2-i) {
				t.Fatalf("store %d request %d: %+v, want admitted (%d left) and a WRONGTYPE hold", j, i, a, 2-i)
			}
		}
	}
}

// TestRedisDown stops Redis: fail_closed admissions are unavailable and
// no hold is asked for; fail_open ones are decided by the fallback and
// the hold, asked for alone, is unavailable.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	m, _ := oneTrip(t, srv.Addr(), 200*time.Millisecond)
	ctx := context.Background()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	hold := &meterstore.Hold{Tenant: "acme", RequestID: "r", Scopes: []budget.Scope{tenantScope(1000)}, Amount: 1, Lease: time.Minute}
	limits := []limiter.Limit{{Key: "t", RPM: 3}}
	a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, OnError: limiter.FailClosed}, hold)
	if a.Reserved || a.AdmitErr == nil || !isUnavailable(a.AdmitErr) {
		t.Fatalf("fail_closed: %+v, want unavailable and no hold", a)
	}
	a = m.AdmitReserve(ctx, &limiter.Request{Tenant: "acme", Limits: limits, OnError: limiter.FailOpen}, hold)
	if a.AdmitErr != nil || !a.Decision.Allowed || !a.Decision.Fallback || !a.Reserved || !isBudgetUnavailable(a.ReserveErr) {
		t.Fatalf("fail_open: %+v, want a fallback admission and an unavailable hold", a)
	}
	out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "acme", Limits: []limiter.Limit{{Key: "t", TPM: 10}}, Delta: 5},
		&meterstore.Settlement{Tenant: "acme", RequestID: "r", Scopes: hold.Scopes, Actual: 1})
	if !isUnavailable(out.AdjustErr) || !isBudgetUnavailable(out.SettleErr) {
		t.Fatalf("settle: %+v, want both unavailable", out)
	}
}

func isUnavailable(err error) bool       { return errors.Is(err, limiter.ErrUnavailable) }
func isBudgetUnavailable(err error) bool { return errors.Is(err, budget.ErrUnavailable) }

// TestUnderContention has 64 goroutines admit, hold and settle against
// rate limits and budgets that refuse most of them, with the budget's
// scopes cold at the start, on the one-trip Store and on the in-process
// counters: at most RPM requests are admitted, the settled cost stays
// within every budget, and no request the rate limiter refused has a hold
// — with the admissions and the ends that arrive together sharing calls.
func TestUnderContention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	seed := func(_ context.Context, tenant string, s budget.Scope) (int64, error) {
		time.Sleep(2 * time.Millisecond) // a Postgres read, for the seed race
		switch {
		case s.Kind == budget.ScopeTenant:
			return 1_000, nil
		case s.ID == "k:0":
			return 500, nil
		}
		return 0, nil
	}
	c := newClient(t, srv)
	rb := budget.NewRedis(c, seed, budget.RedisOptions{})
	backends := []struct {
		name string
		m    *meterstore.Store
		b    budget.Counter
	}{
		{"redis", meterstore.New(limiter.NewRedis(c, limiter.RedisOptions{}), rb), rb},
		{"memory", nil, nil},
	}
	mb := budget.NewMemory(seed, nil)
	backends[1].m, backends[1].b = meterstore.New(limiter.NewMemory(nil), mb), mb
	var shared, ends meterstore.SharedCounts
	backends[0].m.CountShared(&shared, &ends)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			contend(t, be.m, be.b, c, be.name == "redis")
		})
	}
	// The limits hold with admissions sharing calls (admit_reserve_many).
	t.Logf("shared calls: admissions %d in %d calls, ends %d in %d", shared.Shared.Load(), shared.Calls.Load(), ends.Shared.Load(), ends.Calls.Load())
	if shared.Calls.Load() == 0 || ends.Calls.Load() == 0 {
		t.Error("no admissions or no ends shared a call: the contention must make some")
	}
}

func contend(t *testing.T, m *meterstore.Store, b budget.Counter, c *redisx.Client, redis bool) {
	const (
		workers  = 64
		perEach  = 6
		rpm      = 150
		tpm      = 200_000
		tenantLB = 60_000
		keyLB    = 20_000
	)
	limits := []limiter.Limit{{Key: "t", RPM: rpm, TPM: tpm}, {Key: "k:0", RPM: rpm * 2}}
	tenant := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: tenantLB}
	keys := []budget.Scope{
		{Kind: budget.ScopeKey, ID: "k:0", Window: budget.Day, Period: month + "-03", Limit: keyLB},
		{Kind: budget.ScopeKey, ID: "k:1", Window: budget.Day, Period: month + "-03", Limit: 1 << 60},
	}
	var admitted, refusedRate, held, refusedBudget atomic.Int64
	var served [2]atomic.Int64 // settled cost by key
	var mu sync.Mutex
	var rateRefused []string
	ctx := context.Background()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perEach {
				id := fmt.Sprintf("w%d-%d", w, i)
				k := (w + i) % 2
				scopes := []budget.Scope{tenant, keys[k]}
				amount := int64(200 + (w*37+i*101)%900) // 200..1099
				tokens := int64(100 + (w*13+i*7)%1500)
				a := m.AdmitReserve(ctx, &limiter.Request{Tenant: "race", Limits: limits, Tokens: tokens},
					&meterstore.Hold{Tenant: "race", RequestID: id, Scopes: scopes, Amount: amount, Lease: time.Minute})
				if a.AdmitErr != nil || a.ReserveErr != nil {
					t.Errorf("%s: %v %v", id, a.AdmitErr, a.ReserveErr)
					return
				}
				if !a.Decision.Allowed {
					refusedRate.Add(1)
					if a.Reserved {
						t.Errorf("%s: refused by the rate limit, yet a hold was asked for", id)
					}
					mu.Lock()
					rateRefused = append(rateRefused, id)
					mu.Unlock()
					continue
				}
				admitted.Add(1)
				if !a.Reservation.Admitted {
					refusedBudget.Add(1)
					continue
				}
				held.Add(1)
				actual := amount - int64(i*w%150) // a cost within the hold
				out := m.AdjustSettle(ctx, &meterstore.Correction{Tenant: "race", Limits: limits, Delta: -tokens / 3},
					&meterstore.Settlement{Tenant: "race", RequestID: id, Scopes: scopes, Actual: actual})
				if out.AdjustErr != nil || out.SettleErr != nil {
					t.Errorf("%s: settle %+v", id, out)
					return
				}
				served[k].Add(actual)
			}
		})
	}
	wg.Wait()
	total := served[0].Load() + served[1].Load()
	t.Logf("attempts=%d admitted=%d rate_refused=%d held=%d budget_refused=%d served=%d (key0 %d)",
		workers*perEach, admitted.Load(), refusedRate.Load(), held.Load(), refusedBudget.Load(), total, served[0].Load())
	// The limit admits rpm at once, and one more every 60s/rpm since.
	if limit := rpm + int64(time.Since(start)*rpm/time.Minute); admitted.Load() > limit {
		t.Errorf("admitted %d, above the limit of %d (%d a minute)", admitted.Load(), limit, rpm)
	}
	if refusedRate.Load() == 0 || refusedBudget.Load() == 0 {
		t.Errorf("rate refusals %d, budget refusals %d: the inputs must make both refuse", refusedRate.Load(), refusedBudget.Load())
	}
	spent, reserved, err := b.Status(ctx, "race", tenant)
	if err != nil || spent != 1_000+total || spent > tenantLB || reserved != 0 {
		t.Errorf("tenant: spent %d reserved %d (%v), want %d ≤ %d and 0", spent, reserved, err, 1_000+total, tenantLB)
	}
	spent, reserved, err = b.Status(ctx, "race", keys[0])
	if err != nil || spent != 500+served[0].Load() || spent > keyLB || reserved != 0 {
		t.Errorf("key 0: spent %d reserved %d (%v), want %d ≤ %d and 0", spent, reserved, err, 500+served[0].Load(), keyLB)
	}
	if !redis {
		return
	}
	raw, err := c.Raw()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		holds := "tollgate:budget:{race}:key:" + strings.ReplaceAll(k.ID, ":", "%3A") + ":" + k.Period + ":holds"
		for _, id := range rateRefused {
			n, err := raw.Do(ctx, raw.B().Hexists().Key(holds).Field(id).Build()).AsInt64()
			if err != nil || n != 0 {
				t.Fatalf("%s: refused by the rate limit, yet held in %s (%v)", id, holds, err)
			}
		}
		if n, err := raw.Do(ctx, raw.B().Hlen().Key(holds).Build()).AsInt64(); err != nil || n > 1 {
			t.Errorf("%s: %d fields (%v), want only the sum", holds, n, err)
		}
	}
}
