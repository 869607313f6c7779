package admin

import (
	"context"
	"net/http"
	"time"
)

// The overview: GET /v1/admin/overview, the fleet's last minutes from the
// call log (every replica's rows that reached the ledger; rows still in a
// replica's queue or spool are not in it yet) and this month's spend.
const (
	overviewWindow = 5 * time.Minute
	overviewTop    = 5
)

type topTenantJSON struct {
	TenantID      string `json:"tenant_id"`
	SpendMonthUSD usd    `json:"spend_month_usd"`
	// SpendMonthMicros is spend_month_usd in micros.
	SpendMonthMicros int64 `json:"spend_month_micros"`
	// Requests in the window.
	Requests int64 `json:"requests"`
}

type overviewJSON struct {
	WindowSeconds     int64           `json:"window_seconds"`
	Requests          int64           `json:"requests"`
	RequestsPerSecond float64         `json:"requests_per_second"`
	Errors            int64           `json:"errors"`
	ErrorRate         float64         `json:"error_rate"` // errors / requests; 0 without requests
	SpendMonthUSD     usd             `json:"spend_month_usd"`
	SpendMonthMicros  int64           `json:"spend_month_micros"`
	TopTenants        []topTenantJSON `json:"top_tenants"`
	GuardActions      int64           `json:"guard_actions"`
	// InFlight counts the requests in flight (every replica's with
	// Redis); null when this gateway cannot list them.
	InFlight *int64 `json:"in_flight"`
	ReadOnly bool   `json:"read_only"`
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	if !h.noQuery(w, r) {
		return
	}
	now := h.now()
	rec, err := h.store.RecentCalls(r.Context(), now.Add(-overviewWindow), overviewTop)
	if err != nil && !h.readOnly {
		h.storeError(w, r, err)
		return
	}
	out := overviewJSON{WindowSeconds: int64(overviewWindow / time.Second), Requests: rec.Requests, Errors: rec.Errors,
		RequestsPerSecond: float64(rec.Requests) / overviewWindow.Seconds(), SpendMonthUSD: usd(rec.SpendMonthMicros),
		SpendMonthMicros: rec.SpendMonthMicros, TopTenants: []topTenantJSON{}, GuardActions: rec.GuardActions, ReadOnly: h.readOnly}
	if rec.Requests > 0 {
		out.ErrorRate = float64(rec.Errors) / float64(rec.Requests)
	}
	for _, t := range rec.Top {
		out.TopTenants = append(out.TopTenants, topTenantJSON{TenantID: t.TenantID, SpendMonthUSD: usd(t.SpendMonthMicros),
			SpendMonthMicros: t.SpendMonthMicros, Requests: t.Requests})
	}
	if h.inflight != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		reqs, err := h.inflight(ctx)
		cancel()
		if err == nil {
			n := int64(len(reqs))
			out.InFlight = &n
		} else {
			h.log.Warn("overview: requests in flight unavailable", "err", err)
		}
	}
	h.reply(w, http.StatusOK, out)
}
