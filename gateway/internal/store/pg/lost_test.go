package pg_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// TestReadsSurviveLostConnections: when the server ends every connection of
// the pool (a restart, a failover, pg_terminate_backend) while they sit
// idle, the next KeyByHash, Price and admin write are answered, not failed. The pool
// checks a connection only once it has been idle for a second, so a
// gateway under load would otherwise fail one lookup per dead connection.
func TestReadsSurviveLostConnections(t *testing.T) {
	const conns = 4
	s, dsn := open(t, pg.Options{MaxConns: conns})
	f := seed(t, s)
	other := connect(t, dsn)
	killAll := func(t *testing.T) {
		t.Helper()
		must(t, s.FillPool(t.Context(), conns))
		var killed int
		must(t, other.QueryRow(t.Context(), `
SELECT count(*) FROM (
  SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
) AS k`).Scan(&killed))
		if killed < conns {
			t.Fatalf("terminated %d backends, want at least %d", killed, conns)
		}
		// Wait until they are gone, so that the reads below meet dead
		// connections rather than racing their end.
		deadline := time.Now().Add(5 * time.Second)
		for {
			var left int
			must(t, other.QueryRow(t.Context(), `
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&left))
			if left == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d backends still there 5 s after pg_terminate_backend", left)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	killAll(t)
	snap, err := s.KeyByHash(t.Context(), tenant.HashKey(f.active))
	if err != nil {
		t.Fatalf("KeyByHash after the pool's connections were ended: %v", err)
	}
	if snap.Tenant.ID != "acme" {
		t.Fatalf("KeyByHash: tenant %q, want acme", snap.Tenant.ID)
	}
	// Every connection of the pool was dead, not just the first one tried:
	// the first lost one reset the pool, and the next reads find none.
	for i := range 2 * conns {
		if _, err := s.KeyByHash(t.Context(), tenant.HashKey(f.active)); err != nil {
			t.Fatalf("KeyByHash %d: %v", i, err)
		}
	}
	if n := s.LostConnections(); n != 1 {
		t.Fatalf("%d reads found their connection lost, want 1 (the pool is reset after the first)", n)
	}

	// An admin write's transaction begins on a new connection too.
	killAll(t)
	must(t, s.SetPrice(t.Context(), tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 2_500_000, OutputMicrosPerMTok: 10_000_000, EffectiveFrom: time.Now().Add(-time.Minute)}))
	killAll(t)
	if _, err := s.Price(t.Context(), "gpt-4o", time.Now()); err != nil {
		t.Fatalf("Price after the pool's connections were ended: %v", err)
	}
}
