package observe

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/accounting"
	"github.com/tollgate/tollgate/gateway/internal/alerts"
	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
)

// The alert dispatcher's counters are scraped, fired ones by threshold.
func TestAlertMetrics(t *testing.T) {
	d, err := alerts.New(alerts.Options{URL: "http://127.0.0.1:1/hook", Secret: []byte("0123456789abcdef"),
		Outbox: alerts.NewMemory(0, nil), NoWorker: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(context.Background())
	s := budget.Scope{Kind: budget.ScopeTenant, Period: "2026-12", Limit: 10}
	d.Crossed(t.Context(), []budget.Crossing{
		{Tenant: "a", Scope: s, Threshold: 80}, {Tenant: "b", Scope: s, Threshold: 80}, {Tenant: "a", Scope: s, Threshold: 100},
		{Tenant: "a", Scope: s, Threshold: 80}, // a repeat: not fired again
	})
	for deadline := time.Now().Add(5 * time.Second); d.Stats().Fired[100] == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	o := NewMetrics(nil, nil, 100)
	var inflight, reloads atomic.Int64
	o.SetSources(Sources{Inflight: &inflight, Reloads: &reloads, Accounting: &accounting.Accounting{AlertDispatcher: d},
		Cancels: &cancels.Registry{}, Services: &hostsvc.Counts{}})
	have := map[string]bool{}
	for _, l := range scrape(t, o) {
		have[l] = true
	}
	for _, want := range []string{
		`tollgate_budget_alerts_total{threshold="80"} 2`,
		`tollgate_budget_alerts_total{threshold="100"} 1`,
		`tollgate_budget_alert_deliveries_total{outcome="delivered"} 0`,
		`tollgate_budget_alert_deliveries_total{outcome="gave_up"} 0`,
		`tollgate_budget_alert_local_queue_depth 0`,
		`tollgate_budget_alert_enqueue_waits_total 0`,
		`# TYPE tollgate_budget_alert_queue_depth gauge`,
	} {
		if !have[want] {
			t.Errorf("missing %s", want)
		}
	}
}
