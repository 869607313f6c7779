package pg_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// TestTunePool: the gateway bounds a pool's liveness ping and its
// connection attempts unless the DSN sets them itself.
func TestTunePool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dsn           string
		ping, connect time.Duration
	}{
		{"postgres://u@h:5432/db", pg.PingTimeout, pg.ConnectTimeout},
		{"postgres://u@h:5432/db?pool_ping_timeout=250ms&connect_timeout=7", 250 * time.Millisecond, 7 * time.Second},
	} {
		cfg, err := pgxpool.ParseConfig(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		pg.TunePool(cfg)
		if cfg.PingTimeout != c.ping || cfg.ConnConfig.ConnectTimeout != c.connect {
			t.Errorf("%s: ping timeout %v, connect timeout %v; want %v, %v", c.dsn, cfg.PingTimeout, cfg.ConnConfig.ConnectTimeout, c.ping, c.connect)
		}
	}
	if pg.PingTimeout <= 0 || pg.ConnectTimeout <= 0 {
		t.Fatal("the defaults must bound something")
	}
}
