package admin

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// InflightRequest is a request in flight on some replica.
type InflightRequest struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"tenant_id"` // "" before its key was resolved
	Model     string    `json:"model"`
	StartedAt time.Time `json:"started_at"`
	Stream    bool      `json:"stream"`
	Replica   string    `json:"replica"`
}

// InflightLister lists the requests in flight: every replica's when they
// share Redis, else this one's.
type InflightLister func(ctx context.Context) ([]InflightRequest, error)

// WithInflight serves GET /v1/admin/requests (and the overview's
// in_flight) from list.
func WithInflight(list InflightLister) Option { return func(h *handler) { h.inflight = list } }

// listRequests answers the requests in flight, oldest first, filtered by
// tenant_id; the cursor is the last one's start and id.
func (h *handler) listRequests(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "tenant_id")
	if !ok {
		return
	}
	if h.inflight == nil {
		h.fail(w, r, &openai.Error{Status: http.StatusNotImplemented, Type: openai.TypeInvalidRequest, Code: "not_available",
			Message: "listing requests in flight is not available on this gateway"})
		return
	}
	reqs, err := h.inflight(r.Context())
	if err != nil {
		h.log.Warn("requests in flight: unavailable", "err", err)
		h.fail(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer, Code: "requests_unavailable",
			Message: "the requests in flight cannot be listed right now; retry shortly"})
		return
	}
	key := func(q InflightRequest) string {
		return q.StartedAt.UTC().Format("2006-01-02T15:04:05.000000000Z") + " " + q.ID + " " + q.Replica
	}
	slices.SortFunc(reqs, func(a, b InflightRequest) int { return strings.Compare(key(a), key(b)) })
	tenant := l.get("tenant_id")
	reqs = slices.DeleteFunc(reqs, func(q InflightRequest) bool {
		return (tenant != "" && q.TenantID != tenant) || (l.cursor != "" && key(q) <= l.cursor)
	})
	if len(reqs) > l.limit+1 {
		reqs = reqs[:l.limit+1]
	}
	replyPage(h, w, reqs, l.limit, func(q InflightRequest) InflightRequest { q.StartedAt = q.StartedAt.UTC(); return q }, key)
}

// noQuery refuses any query parameter (400 invalid_query).
func (h *handler) noQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	param := ""
	if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
		for name := range q {
			param = name
			break
		}
	}
	h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query", Param: param,
		Message: "this route takes no query parameters"})
	return false
}
