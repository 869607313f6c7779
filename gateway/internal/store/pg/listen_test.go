package pg_test

import (
	"context"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

// notification is one call of Listen's callback.
type notification struct {
	payload string
	at      time.Time
}

// listen runs s.Listen until the test ends and returns its notifications.
func listen(t *testing.T, s *pg.Store) <-chan notification {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan notification, 1000)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(payload string) {
			select {
			case ch <- notification{payload, time.Now()}:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Listen returned %v, want context.Canceled", err)
		}
	})
	return ch
}

// next returns the next notification, failing the test after timeout.
func next(t *testing.T, ch <-chan notification, timeout time.Duration) notification {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(timeout):
		t.Fatalf("no notification within %v", timeout)
		return notification{}
	}
}

// expect reads the next notifications and fails unless they are want, in
// order, with nothing else in between.
func expect(t *testing.T, ch <-chan notification, timeout time.Duration, want ...string) notification {
	t.Helper()
	var n notification
	for _, w := range want {
		if n = next(t, ch, timeout); n.payload != w {
			t.Fatalf("notification %q, want %q", n.payload, w)
		}
	}
	return n
}

// quiet fails if a notification arrives within d.
func quiet(t *testing.T, ch <-chan notification, d time.Duration) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notification %q", n.payload)
	case <-time.After(d):
	}
}

func keyPayload(h tenant.KeyHash) string { return "key:" + hex.EncodeToString(h[:]) }

// TestListen: a revoke through the Store and direct SQL by another client
// reach the listener, each within 100 ms of the write.
func TestListen(t *testing.T) {
	s, dsn := open(t)
	f := seed(t, s)
	ch := listen(t, s)
	expect(t, ch, 10*time.Second, pg.PayloadAll) // LISTEN is in effect

	begin := time.Now()
	must(t, s.RevokeKey(t.Context(), f.activeKey.ID))
	n := expect(t, ch, 5*time.Second, keyPayload(f.activeKey.Hash))
	t.Logf("RevokeKey → notification: %v", n.at.Sub(begin))

	other := connect(t, dsn)
	begin = time.Now()
	_, err := other.Exec(t.Context(), `UPDATE tenants SET status = 'suspended' WHERE id = 'acme'`)
	must(t, err)
	n = expect(t, ch, 5*time.Second, "tenant:acme")
	latency := n.at.Sub(begin)
	t.Logf("direct UPDATE by another connection → notification: %v", latency)
	if latency > 100*time.Millisecond {
		t.Errorf("notification took %v, want ≤ 100ms", latency)
	}

	// A rolled-back write notifies nothing.
	tx, err := other.Begin(t.Context())
	must(t, err)
	_, err = tx.Exec(t.Context(), `UPDATE plans SET rpm = 1`)
	must(t, err)
	must(t, tx.Rollback(t.Context()))
	quiet(t, ch, 200*time.Millisecond)
}

// TestEvictPayloads: what each kind of write, by any client, notifies.
func TestEvictPayloads(t *testing.T) {
	s, dsn := open(t)
	f := seed(t, s)
	ch := listen(t, s)
	expect(t, ch, 10*time.Second, pg.PayloadAll)
	other := connect(t, dsn)
	h := f.activeKey.Hash
	tests := []struct {
		name string
		sql  string
		want []string
	}{
		{"plan insert", `INSERT INTO plans (id) VALUES ('team')`, []string{"plan:team"}},
		{"plan update", `UPDATE plans SET rpm = 5 WHERE id = 'team'`, []string{"plan:team"}},
		{"plan rename", `UPDATE plans SET id = 'team2' WHERE id = 'team'`, []string{"plan:team", "plan:team2"}},
		{"plan delete", `DELETE FROM plans WHERE id = 'team2'`, []string{"plan:team2"}},
		{"tenant id with colons", `INSERT INTO tenants (id, plan_id) VALUES ('a:b:c', 'free')`, []string{"tenant:a:b:c"}},
		{"tenant plan change", `UPDATE tenants SET plan_id = 'pro' WHERE id = 'a:b:c'`, []string{"tenant:a:b:c"}},
		{"key limit", `UPDATE api_keys SET rpm = 7 WHERE id = '` + f.activeKey.ID + `'`, []string{keyPayload(h)}},
		{"key delete", `DELETE FROM api_keys WHERE id = '` + f.activeKey.ID + `'`, []string{keyPayload(h)}},
		{"price insert", `INSERT INTO model_prices VALUES ('m', 1, 2, now())`, []string{"price:m"}},
		{"price update", `UPDATE model_prices SET input_micros_per_mtok = 3 WHERE model = 'm'`, []string{"price:m"}},
		{"two rows, one transaction", `BEGIN; UPDATE model_prices SET output_micros_per_mtok = 4; INSERT INTO model_prices VALUES ('m', 1, 1, now() + interval '1 day'); COMMIT`, []string{"price:m"}},
		{"truncate", `TRUNCATE model_prices`, []string{pg.PayloadAll}},
		{"spend is not cached", `INSERT INTO spend_month VALUES ('acme', '2026-01-01', 5)`, nil},
	}
	for _, tt := range tests {
		_, err := other.Exec(t.Context(), tt.sql)
		must(t, err)
		for _, w := range tt.want {
			if n := next(t, ch, 5*time.Second); n.payload != w {
				t.Fatalf("%s: notification %q, want %q", tt.name, n.payload, w)
			}
		}
	}
	quiet(t, ch, 200*time.Millisecond)
}

// TestListenSurvivesRestart: after Postgres stops and starts again (and
// after a crash), Listen reconnects, sends "all", and sees later writes.
func TestListenSurvivesRestart(t *testing.T) {
	srv := pgtest.Start(t)
	must(t, pgtest.Migrate(t.Context(), srv.DSN()))
	s, err := pg.Open(t.Context(), srv.DSN(), pg.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	must(t, err)
	t.Cleanup(s.Close)
	seed(t, s)
	ch := listen(t, s)
	expect(t, ch, 10*time.Second, pg.PayloadAll)

	drills := []struct {
		name string
		stop func() error
	}{
		{"stop", srv.Stop},
		{"kill", srv.Kill},
	}
	for i, d := range drills {
		must(t, d.stop())
		begin := time.Now()
		must(t, srv.Start())
		n := expect(t, ch, 15*time.Second, pg.PayloadAll)
		t.Logf("%s: Listen reconnected %v after Start began", d.name, n.at.Sub(begin))

		conn, err := pgx.Connect(t.Context(), srv.DSN())
		must(t, err)
		status := []string{tenant.StatusSuspended, tenant.StatusActive}[i%2]
		_, err = conn.Exec(t.Context(), `UPDATE tenants SET status = $1 WHERE id = 'acme'`, status)
		conn.Close(t.Context())
		must(t, err)
		expect(t, ch, 5*time.Second, "tenant:acme")
	}
}

func TestParseEviction(t *testing.T) {
	tests := []struct{ payload, kind, value string }{
		{"key:ab12", pg.EvictKey, "ab12"},
		{"tenant:a:b", pg.EvictTenant, "a:b"},
		{"plan:", pg.EvictPlan, ""},
		{"price:gpt-4o", pg.EvictPrice, "gpt-4o"},
		{"all", pg.PayloadAll, ""},
		{"something new", pg.PayloadAll, ""},
		{"", pg.PayloadAll, ""},
	}
	for _, tt := range tests {
		if kind, value := pg.ParseEviction(tt.payload); kind != tt.kind || value != tt.value {
			t.Errorf("ParseEviction(%q) = %q, %q; want %q, %q", tt.payload, kind, value, tt.kind, tt.value)
		}
	}
}
