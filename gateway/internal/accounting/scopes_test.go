package accounting

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

var migrated = &pgtest.Template{Name: "accounting", Prepare: pgtest.Migrate}

// ledgerWithScopes is a ledger with plan team (key budgets per day, user
// budgets per month, tenant budget per day, 5 USD a month), tenant acme on
// it with keys k1 and k2, and call_log rows of today: k1 30 micros (10 of
// them by end user u1), k2 40 (by u1), and spend_month 5000 for acme.
func ledgerWithScopes(t *testing.T, now time.Time) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), pgtest.SharedFrom(t, migrated).DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`INSERT INTO plans (id, monthly_budget_micros, budgets) VALUES ('team', 5000000, '[{"scope":"key","window":"day","limit_micros":5},
			{"scope":"user","window":"month","limit_micros":9},{"scope":"tenant","window":"day","limit_micros":7}]')`,
		`INSERT INTO tenants (id, plan_id) VALUES ('acme', 'team')`,
		`INSERT INTO api_keys (id, tenant_id, key_hash, prefix) VALUES ('k1', 'acme', sha256('1'), 'p'), ('k2', 'acme', sha256('2'), 'p')`,
		`INSERT INTO spend_month VALUES ('acme', date_trunc('month', now() AT TIME ZONE 'UTC')::date, 5000)`,
	} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(t.Context(), `INSERT INTO call_log (request_id, tenant_id, key_id, end_user, model, status, started_at, cost_micros) VALUES
		('a', 'acme', 'k1', 'u1', 'm', 200, $1, 10), ('b', 'acme', 'k1', NULL, 'm', 200, $1, 20),
		('c', 'acme', 'k2', 'u1', 'm', 200, $1, 40)`, day.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	return pool
}

// The seeder answers each kind of scope from the ledger.
func TestSeeder(t *testing.T) {
	now := time.Now().UTC()
	pool := ledgerWithScopes(t, now)
	seed := seeder(pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	day, month := budget.Day.Period(now), budget.Month.Period(now)
	tests := []struct {
		scope budget.Scope
		want  int64
	}{
		{budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: month}, 5000}, // spend_month, not the rows
		{budget.Scope{Kind: budget.ScopeTenant, Window: budget.Day, Period: day}, 70},
		{budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: day}, 30},
		{budget.Scope{Kind: budget.ScopeKey, ID: "k2", Window: budget.Month, Period: month}, 40},
		{budget.Scope{Kind: budget.ScopeUser, ID: "u1", Window: budget.Day, Period: day}, 50},
		{budget.Scope{Kind: budget.ScopeUser, ID: "u2", Window: budget.Day, Period: day}, 0},
		{budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: "1999-01-01"}, 0},
	}
	for _, tt := range tests {
		got, err := seed(t.Context(), "acme", tt.scope)
		if err != nil || got != tt.want {
			t.Errorf("seed(%s) = %d, %v; want %d", tt.scope, got, err, tt.want)
		}
	}
	if _, err := seed(t.Context(), "acme", budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: "2026-12"}); err == nil {
		t.Error("a day scope with a month's period was seeded")
	}
}

// Reconcile corrects the counters of the active scopes that drifted from
// the ledger and leaves the others alone.
func TestReconcileScopes(t *testing.T) {
	now := time.Now().UTC()
	pool := ledgerWithScopes(t, now)
	counter := budget.NewMemory(seeder(pool, slog.New(slog.NewTextHandler(io.Discard, nil))), nil)
	ctx := context.Background()
	day, month := budget.Day.Period(now), budget.Month.Period(now)
	k1 := budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: day}
	u1 := budget.Scope{Kind: budget.ScopeUser, ID: "u1", Window: budget.Month, Period: month}
	// k1's counter says 1000 (drift 970); u1's is right after a seed.
	if err := counter.Correct(ctx, "acme", k1, 1000); err != nil {
		t.Fatal(err)
	}
	if _, _, err := counter.Status(ctx, "acme", u1); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	checked, drift, err := reconcileScopes(ctx, pool, counter, now, log)
	if err != nil {
		t.Fatal(err)
	}
	// tenant/day, k1/day, k2/day, u1/month.
	if checked != 4 || drift != 970 {
		t.Errorf("checked %d, drift %d; want 4, 970", checked, drift)
	}
	for _, tt := range []struct {
		s    budget.Scope
		want int64
	}{
		{k1, 30}, {u1, 50},
		{budget.Scope{Kind: budget.ScopeKey, ID: "k2", Window: budget.Day, Period: day}, 40},
		{budget.Scope{Kind: budget.ScopeTenant, Window: budget.Day, Period: day}, 70},
	} {
		if spent, _, err := counter.Status(ctx, "acme", tt.s); err != nil || spent != tt.want {
			t.Errorf("%s spent %d, %v; want %d", tt.s, spent, err, tt.want)
		}
	}
	if _, drift, _ := reconcileScopes(ctx, pool, counter, now, log); drift != 0 {
		t.Errorf("second run corrected %d micros, want 0", drift)
	}
}

// TestSeederPartitioned: with the Postgres connection hung by a network
// partition (nothing refused, nothing reset) and a caller with no
// deadline, as the budget's callers are, a seed fails within its bound
// instead of waiting forever.
func TestSeederPartitioned(t *testing.T) {
	now := time.Now().UTC()
	dsn := pgtest.SharedFrom(t, migrated).DSN()
	addr := regexp.MustCompile(`127\.0\.0\.1:\d+`).FindString(dsn)
	if addr == "" {
		t.Fatalf("no 127.0.0.1:port in %q", dsn)
	}
	px := faultnet.Start(t, addr)
	pool, err := pgxpool.New(t.Context(), strings.Replace(dsn, addr, px.Addr(), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close(); pool.Close() })
	seed := seeder(pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	scope := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(now)}
	if _, err := seed(context.Background(), "acme", scope); err != nil {
		t.Fatal(err) // the pool's connection is open and was just used
	}
	old := seedTimeout
	seedTimeout = 300 * time.Millisecond
	t.Cleanup(func() { seedTimeout = old })
	px.Partition()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := seed(context.Background(), "acme", scope)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a seed through a partition succeeded")
		}
		if took := time.Since(start); took > seedTimeout+2*time.Second {
			t.Errorf("the seed failed after %v; its bound is %v", took, seedTimeout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a seed through a partition still waits after 10 s")
	}
}

// TestSeederAfterLostConnections: when Postgres ends every connection of
// the pool (a restart) while they sit idle, the next seeds are answered,
// not failed: the first read that finds its connection gone resets the
// pool and reads again.
func TestSeederAfterLostConnections(t *testing.T) {
	now := time.Now().UTC()
	pool := ledgerWithScopes(t, now)
	var logs strings.Builder
	seed := seeder(pool, slog.New(slog.NewTextHandler(&logs, nil)))
	month := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(now)}
	key := budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: budget.Day.Period(now)}

	n := pgtest.EndConnections(t, pool)

	if got, err := seed(t.Context(), "acme", month); err != nil || got != 5000 {
		t.Fatalf("seed(%s) after the pool's connections were ended = %d, %v; want 5000", month, got, err)
	}
	for i := range 2 * n {
		if got, err := seed(t.Context(), "acme", key); err != nil || got != 30 {
			t.Fatalf("seed %d (%s) = %d, %v; want 30", i, key, got, err)
		}
	}
	if c := strings.Count(logs.String(), "the seed read again"); c != 1 {
		t.Fatalf("%d seeds found their connection lost, want 1 (the pool is reset after the first):\n%s", c, logs.String())
	}
}
