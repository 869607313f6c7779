package pgtest

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EndConnections fills pool with as many connections as it may hold, hands
// them back just used and idle, ends each with pg_terminate_backend from a
// connection of its own, and waits until the server has let them all go:
// the pool's next statements meet dead connections, as after a restart or
// a failover. It returns how many connections it ended.
func EndConnections(t testing.TB, pool *pgxpool.Pool) int {
	t.Helper()
	ctx := t.Context()
	conns := make([]*pgxpool.Conn, pool.Config().MaxConns)
	for i := range conns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	pids := make([]uint32, len(conns))
	for i, c := range conns {
		pids[i] = c.Conn().PgConn().PID()
		c.Release()
	}
	other, err := pgx.Connect(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var left int
		if err := other.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1::int[])`, pids).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return len(pids)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still there 5 s after pg_terminate_backend", left)
		}
	}
}
