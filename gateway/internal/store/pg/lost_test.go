package pg_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/syncbuf"
)

// TestReadsSurviveLostConnections: when the server ends every connection of
// the pool (a restart, a failover, pg_terminate_backend) while they sit
// idle, the next KeyByHash, Price and admin write are answered, not failed. The pool
// checks a connection only once it has been idle for a second, so a
// gateway under load would otherwise fail one lookup per dead connection.
func TestReadsSurviveLostConnections(t *testing.T) {
	const conns = 4
	var logs syncbuf.Buffer
	s, _ := open(t, pg.Options{MaxConns: conns, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	f := seed(t, s)
	killAll := func(t *testing.T) {
		t.Helper()
		if n := pgtest.EndConnections(t, s.Pool()); n != conns {
			t.Fatalf("ended %d connections, want %d", n, conns)
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
	if n := strings.Count(logs.String(), "run again on a new connection"); n != 1 {
		t.Fatalf("%d reads found their connection lost, want 1 (the pool is reset after the first):\n%s", n, logs.String())
	}

	// An admin write's transaction begins on a new connection too.
	killAll(t)
	must(t, s.SetPrice(t.Context(), tenant.Price{Model: "gpt-4o", InputMicrosPerMTok: 2_500_000, OutputMicrosPerMTok: 10_000_000, EffectiveFrom: time.Now().Add(-time.Minute)}))
	killAll(t)
	if _, err := s.Price(t.Context(), "gpt-4o", time.Now()); err != nil {
		t.Fatalf("Price after the pool's connections were ended: %v", err)
	}
}
