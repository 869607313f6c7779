package admin

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// Usage over time, from the call log: GET /v1/admin/usage.
const (
	defaultUsageDays = 30
	maxUsageDays     = 366
)

// usageRowJSON is one group of the usage answer. Day is absent unless
// grouped by day, tenant_id and model unless grouped by them.
type usageRowJSON struct {
	Day              string `json:"day,omitempty"` // YYYY-MM-DD, UTC
	TenantID         string `json:"tenant_id,omitempty"`
	Model            string `json:"model,omitempty"`
	Requests         int64  `json:"requests"`
	Errors           int64  `json:"errors"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	CostUSD          usd    `json:"cost_usd"`
	CostMicros       int64  `json:"cost_micros"`
	GuardActions     int64  `json:"guard_actions"`
}

func (h *handler) usageOver(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "from", "to", "tenant_id", "group_by")
	if !ok {
		return
	}
	bad := func(param, msg string) {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: param, Message: msg})
	}
	now := h.now().UTC()
	q := pg.UsageQuery{To: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC), TenantID: l.get("tenant_id"), Limit: l.limit + 1}
	if s := l.get("to"); s != "" {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			bad("to", fmt.Sprintf("to %q: want a day, YYYY-MM-DD", s))
			return
		}
		q.To = d
	}
	q.From = q.To.AddDate(0, 0, -(defaultUsageDays - 1))
	if s := l.get("from"); s != "" {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			bad("from", fmt.Sprintf("from %q: want a day, YYYY-MM-DD", s))
			return
		}
		q.From = d
	}
	if q.From.After(q.To) {
		bad("from", "from is after to")
		return
	}
	if days := int(q.To.Sub(q.From).Hours()/24) + 1; days > maxUsageDays {
		bad("from", fmt.Sprintf("%d days from from to to; at most %d", days, maxUsageDays))
		return
	}
	groups := "day"
	if s, has := l.q["group_by"]; has {
		groups = s
	}
	if groups != "" {
		for g := range strings.SplitSeq(groups, ",") {
			switch g {
			case "day":
				q.ByDay = true
			case "model":
				q.ByModel = true
			case "tenant":
				q.ByTenant = true
			default:
				bad("group_by", fmt.Sprintf("group_by %q: want a comma-separated list of day, model and tenant", g))
				return
			}
		}
	}
	if l.cursor != "" {
		n, err := strconv.Atoi(l.cursor)
		if err != nil || n < 0 {
			bad("cursor", "cursor is not one this API handed out (use next_cursor as it is)")
			return
		}
		q.Offset = n
	}
	rows, err := h.store.UsageOver(r.Context(), q)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	end := q.Offset + min(len(rows), l.limit)
	replyPage(h, w, rows, l.limit, func(u pg.UsageRow) usageRowJSON {
		out := usageRowJSON{TenantID: u.TenantID, Model: u.Model, Requests: u.Requests, Errors: u.Errors,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CostUSD: usd(u.CostMicros), CostMicros: u.CostMicros,
			GuardActions: u.GuardActions}
		if q.ByDay {
			out.Day = u.Day.Format(time.DateOnly)
		}
		return out
	}, func(pg.UsageRow) string { return strconv.Itoa(end) })
}

// guardActionJSON is one guard action of the call log.
type guardActionJSON struct {
	RequestID   string    `json:"request_id"`
	TenantID    string    `json:"tenant_id"`
	Model       string    `json:"model"`
	StartedAt   time.Time `json:"started_at"`
	GuardAction string    `json:"guard_action"`
	Status      int       `json:"status"`
}

func (h *handler) guardActions(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "tenant_id")
	if !ok {
		return
	}
	var at time.Time
	var id string
	if l.cursor != "" {
		ts, rid, found := strings.Cut(l.cursor, " ")
		t, err := time.Parse(time.RFC3339Nano, ts)
		if !found || err != nil {
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "cursor",
				Message: "cursor is not one this API handed out (use next_cursor as it is)"})
			return
		}
		at, id = t, rid
	}
	gs, err := h.store.GuardActions(r.Context(), l.get("tenant_id"), at, id, l.limit+1)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	replyPage(h, w, gs, l.limit, func(g pg.GuardAction) guardActionJSON {
		return guardActionJSON{RequestID: g.RequestID, TenantID: g.TenantID, Model: g.Model, StartedAt: g.StartedAt, GuardAction: g.Action, Status: g.Status}
	}, func(g pg.GuardAction) string { return g.StartedAt.Format(time.RFC3339Nano) + " " + g.RequestID })
}
