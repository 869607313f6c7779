//go:build linux

package pg_test

import (
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/sockio"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// TestTunePoolRawSockets: a tuned pool dials sockio connections (what the
// DSN's dial makes, wrapped), so a query made when the process was idle
// does not wake the runtime's monitor thread.
func TestTunePoolRawSockets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg, err := pgxpool.ParseConfig("postgres://u@" + ln.Addr().String() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	pg.TunePool(cfg)
	nc, err := cfg.ConnConfig.DialFunc(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, ok := nc.(*sockio.Conn); !ok {
		t.Fatalf("the pool dials %T, want a *sockio.Conn", nc)
	}
	if _, err := cfg.ConnConfig.DialFunc(t.Context(), "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("dialing a closed port succeeded")
	}
}
