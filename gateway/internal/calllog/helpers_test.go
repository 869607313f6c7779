package calllog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/syncbuf"
)

// tenants exist in every test database; spend_month references tenants.
var tenants = []string{"acme", "globex", "initech", "umbrella"}

// migrated is a database with the schema and the tenants, copied per test.
var migrated = &pgtest.Template{Name: "calllog", Prepare: prepare}

func prepare(ctx context.Context, dsn string) error {
	if err := pgtest.Migrate(ctx, dsn); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `INSERT INTO plans (id) VALUES ('free')`); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `INSERT INTO tenants (id, plan_id) SELECT unnest($1::text[]), 'free'`, tenants)
	return err
}

// newDB returns a pool on a fresh migrated database of the shared server.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return newPool(t, pgtest.SharedFrom(t, migrated).DSN())
}

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// startServer starts a Postgres of the test's own, migrated with the
// tenants, for tests that stop or kill it.
func startServer(t *testing.T) *pgtest.Server {
	t.Helper()
	srv := pgtest.Start(t)
	if err := prepare(t.Context(), srv.DSN()); err != nil {
		t.Fatal(err)
	}
	return srv
}

// newWriter starts a Writer with a spool in a temporary directory unless
// opts names one, and closes it when the test ends if the test did not.
func newWriter(t testing.TB, pool *pgxpool.Pool, opts Options) *Writer {
	t.Helper()
	if opts.SpoolDir == "" {
		opts.SpoolDir = t.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t, nil)
	}
	w, err := New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

// testLogger logs through t, and into buf if not nil.
func testLogger(t testing.TB, buf *syncBuffer) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})
	if buf != nil {
		h = slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})
	}
	return slog.New(h)
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// syncBuffer collects output that goroutines write at once.
type syncBuffer = syncbuf.Buffer

// thisMonth is a time in the current UTC month, whose partition the
// migration created.
var thisMonth = MonthStart(time.Now()).Add(36 * time.Hour)

// row returns a complete valid row.
func row(id, tenant string, cost int64) Row {
	return Row{
		RequestID: id, TenantID: tenant, KeyID: "key-" + tenant, Model: "gpt-4o",
		Upstream: "openai", Status: 200, StartedAt: thisMonth,
		FirstByte: 120 * time.Millisecond, Total: 900 * time.Millisecond,
		PromptTokens: 11, CompletionTokens: 22, CostMicros: cost, Attempts: 1,
	}
}

func write(t *testing.T, w *Writer, rows ...Row) {
	t.Helper()
	for _, r := range rows {
		if err := w.Write(t.Context(), r); err != nil {
			t.Fatalf("Write(%s): %v", r.RequestID, err)
		}
	}
}

func closeWriter(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := w.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// queryInt returns the one integer sql selects.
func queryInt(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// counter returns spend_month of tenant in month's month, -1 if missing.
func counter(t *testing.T, pool *pgxpool.Pool, tenant string, month time.Time) int64 {
	t.Helper()
	return queryInt(t, pool, `SELECT coalesce((SELECT cost_micros FROM spend_month WHERE tenant_id = $1 AND month = $2), -1)`,
		tenant, MonthStart(month))
}

// logSum returns the cost of tenant's call_log rows in month's month.
func logSum(t *testing.T, pool *pgxpool.Pool, tenant string, month time.Time) int64 {
	t.Helper()
	m := MonthStart(month)
	return queryInt(t, pool, sumSQL, tenant, m, m.AddDate(0, 1, 0))
}

func countRows(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	return queryInt(t, pool, `SELECT count(*) FROM call_log`)
}

// checkLedger fails unless every tenant's counter of month equals both
// want[tenant] and the sum of its call_log rows.
func checkLedger(t *testing.T, pool *pgxpool.Pool, month time.Time, want map[string]int64) {
	t.Helper()
	for tenant, cost := range want {
		c, s := counter(t, pool, tenant, month), logSum(t, pool, tenant, month)
		if c != cost || s != cost {
			t.Errorf("tenant %s: spend_month %d, SUM(call_log) %d; want both %d", tenant, c, s, cost)
		}
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// plug makes the writer goroutine wait: it locks tenant's counter of this
// month from another session, then writes a row of tenant, and returns
// once the writer's transaction waits for the lock. The writer resumes
// when the returned function is called.
func plug(t *testing.T, pool *pgxpool.Pool, w *Writer, tenant string) (release func()) {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `INSERT INTO spend_month (tenant_id, month) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		tenant, MonthStart(thisMonth)); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT FROM spend_month WHERE tenant_id = $1 AND month = $2 FOR UPDATE`,
		tenant, MonthStart(thisMonth)); err != nil {
		t.Fatal(err)
	}
	write(t, w, row(fmt.Sprintf("plug-%s-%d", tenant, time.Now().UnixNano()), tenant, 1))
	waitFor(t, 10*time.Second, "the writer to wait for the plug's lock", func() bool {
		return w.Stats().QueueDepth == 0 && queryInt(t, pool,
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
	})
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := tx.Rollback(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}
