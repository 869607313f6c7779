package accounting

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

// The alerts section starts a dispatcher on the store's outbox, whose
// alerts reach the webhook; without a webhook there is none.
func TestAlertsWiring(t *testing.T) {
	var hits atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Tollgate-Signature") != "" {
			hits.Add(1)
		}
	}))
	defer hook.Close()
	tests := []struct {
		name, store string
		webhook     bool
		outboxRows  int // -1: not on Postgres
	}{
		{name: "off", store: "memory"},
		{name: "memory store", store: "memory", webhook: true, outboxRows: -1},
		{name: "postgres store", store: "postgres", webhook: true, outboxRows: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			env := map[string]string{"TOLLGATE_ALERTS_SECRET": "0123456789abcdef"}
			yaml := "version: 1\nupstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\"}]\nroutes: [{models: [m], upstream: a}]\n" +
				"call_log: {enabled: false}\nstore: {kind: " + tt.store + "}\n"
			if tt.webhook {
				yaml += "alerts: {webhook_url: \"" + hook.URL + "\"}\n"
			}
			var dsn string
			if tt.store == "postgres" {
				dsn = pgtest.SharedFrom(t, migrated).DSN()
				env["TOLLGATE_DATABASE_URL"] = dsn
			}
			p, err := config.Parse([]byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(p, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close(context.Background())
			if (a.AlertDispatcher != nil) != tt.webhook {
				t.Fatalf("dispatcher %v, want %v", a.AlertDispatcher != nil, tt.webhook)
			}
			if !tt.webhook {
				return
			}
			s := budget.Scope{Kind: budget.ScopeTenant, Period: "2026-12", Limit: 100, Alerts: []int{80}}
			a.AlertDispatcher.Crossed(t.Context(), []budget.Crossing{{Tenant: "acme", Scope: s, Threshold: 80, Before: 79, After: 81, At: time.Now()}})
			for deadline := time.Now().Add(10 * time.Second); a.Stats().Alerts.Delivered == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if st := a.Stats().Alerts; st.Delivered != 1 || st.Fired[80] != 1 || hits.Load() != 1 {
				t.Errorf("stats %+v, webhook hits %d; want one alert fired and delivered", st, hits.Load())
			}
			if tt.outboxRows >= 0 {
				conn := newConn(t, dsn)
				var n int
				if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM budget_alerts WHERE delivered_at IS NOT NULL`).Scan(&n); err != nil || n != tt.outboxRows {
					t.Errorf("%d delivered rows (%v), want %d", n, err, tt.outboxRows)
				}
			}
		})
	}
}

func newConn(t *testing.T, dsn string) interface {
	QueryRow(context.Context, string, ...any) pgx.Row
} {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
