package budget_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

const month = "2026-11"

// ledger stands in for Postgres: a month-to-date spend per tenant, and a
// count of Seeder calls.
type ledger struct {
	calls atomic.Int64
	mu    sync.Mutex
	spent map[string]int64
	err   error
}

func newLedger(spent map[string]int64) *ledger {
	if spent == nil {
		spent = map[string]int64{}
	}
	return &ledger{spent: spent}
}

// seed answers the spend of a tenant's month under the tenant's id, and of
// any other scope under ledgerKey.
func (l *ledger) seed(_ context.Context, tenant string, s budget.Scope) (int64, error) {
	l.calls.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if s.Kind == budget.ScopeTenant && s.Window == budget.Month {
		return l.spent[tenant], nil
	}
	return l.spent[ledgerKey(tenant, s)], nil
}

func ledgerKey(tenant string, s budget.Scope) string { return tenant + " " + s.String() }

func (l *ledger) set(tenant string, spent int64) {
	l.mu.Lock()
	l.spent[tenant] = spent
	l.mu.Unlock()
}

func (l *ledger) fail(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

// fakeClock is a settable clock for Memory.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newClient connects a redisx.Client to srv and closes it when the test
// ends. Its command timeout is 1s, not the default 100ms: a first script
// call (EVAL compiles it) under -race on a busy 2-core machine has taken
// longer. TestRedisUnavailable uses the default.
func newClient(t testing.TB, srv *redistest.Server) *redisx.Client {
	t.Helper()
	return newClientWith(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: time.Second})
}

func newClientWith(t testing.TB, opts redisx.Options) *redisx.Client {
	t.Helper()
	return redisxtest.Connect(t, opts)
}

// backend makes a fresh counter of one kind.
type backend struct {
	name string
	new  func(t *testing.T, seed budget.Seeder) budget.Counter
}

// tenantMonth is a tenant's monthly budget: the one scope of every request
// before budgets had scopes.
func tenantMonth(month string, limit int64) budget.Scope {
	return budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month, Limit: limit}
}

// monthly drives a Counter through the tenant's monthly scope alone, the
// way the counter was used before scopes, so that the single-scope tests
// keep their arithmetic. Settle answers spent afterwards (read with one
// Status), and a refusal must name the one scope.
type monthly struct{ c budget.Counter }

func (m monthly) Reserve(ctx context.Context, tenant, month, id string, amount, limit int64, lease time.Duration) (budget.Reservation, error) {
	return oneScope(m.c.Reserve(ctx, tenant, id, []budget.Scope{tenantMonth(month, limit)}, amount, lease))
}

func (m monthly) Extend(ctx context.Context, tenant, month, id string, more, limit int64, lease time.Duration) (budget.Reservation, error) {
	return oneScope(m.c.Extend(ctx, tenant, id, []budget.Scope{tenantMonth(month, limit)}, more, lease))
}

func (m monthly) Shrink(ctx context.Context, tenant, month, id string, to int64) error {
	return m.c.Shrink(ctx, tenant, id, []budget.Scope{tenantMonth(month, 0)}, to)
}

func (m monthly) Settle(ctx context.Context, tenant, month, id string, actual int64) (int64, error) {
	if _, err := m.c.Settle(ctx, tenant, id, []budget.Scope{tenantMonth(month, 0)}, actual); err != nil {
		return 0, err
	}
	spent, _, err := m.Status(ctx, tenant, month)
	return spent, err
}

func (m monthly) Status(ctx context.Context, tenant, month string) (spent, reserved int64, err error) {
	return m.c.Status(ctx, tenant, tenantMonth(month, 0))
}

func (m monthly) Correct(ctx context.Context, tenant, month string, spent int64) error {
	return m.c.Correct(ctx, tenant, tenantMonth(month, 0), spent)
}

func oneScope(res budget.Reservation, err error) (budget.Reservation, error) {
	if err != nil || res.Admitted {
		if res.Refused != nil {
			return res, fmt.Errorf("admitted, yet refused by %s", res.Refused)
		}
		return res, err
	}
	if res.Refused == nil || res.Refused.Kind != budget.ScopeTenant {
		return res, fmt.Errorf("refused by %v, want the tenant's scope", res.Refused)
	}
	res.Refused = nil
	return res, nil
}

// backends returns Memory and a Redis counter on a server started for the
// calling test (subtests use distinct tenants, so they can share it).
func backends(t *testing.T) []backend {
	srv := redistest.Start(t)
	return []backend{
		{"memory", func(t *testing.T, seed budget.Seeder) budget.Counter {
			return budget.NewMemory(seed, nil)
		}},
		{"redis", func(t *testing.T, seed budget.Seeder) budget.Counter {
			return budget.NewRedis(newClient(t, srv), seed, budget.RedisOptions{})
		}},
	}
}

// commandStats returns the calls per command from INFO commandstats
// (commands run by scripts are counted too).
func commandStats(t *testing.T, srv *redistest.Server) map[string]int64 {
	t.Helper()
	out, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(out, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return stats
}

func resetStats(t *testing.T, srv *redistest.Server) {
	t.Helper()
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
}
