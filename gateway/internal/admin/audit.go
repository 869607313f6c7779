package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// AuditReader reads the audit log (the Postgres store). A handler without
// one answers an empty log.
type AuditReader interface {
	ListAudit(ctx context.Context, f pg.AuditFilter) ([]pg.AuditEntry, error)
}

var _ AuditReader = (*pg.Store)(nil)

// WithAudit reads the audit log from a. Without this option the handler
// uses its Store if that is an AuditReader (the Postgres store is).
func WithAudit(a AuditReader) Option { return func(h *handler) { h.audit = a } }

// Paging of list routes.
const (
	defaultListLimit = 50
	maxListLimit     = 500
)

// authList is a list answer.
type authList struct {
	Object     string `json:"object"` // "list"
	Data       any    `json:"data"`
	HasMore    bool   `json:"has_more"`
	NextCursor string `json:"next_cursor,omitempty"` // set when HasMore
}

// authListParams are a list route's query: limit, the decoded cursor
// ("" for the first page) and the route's filters.
type authListParams struct {
	limit   int
	cursor  string
	filters map[string]string
}

// authListQuery reads limit, cursor and the named filters from r's query;
// anything else, or a parameter given twice, is 400 invalid_query. It
// answers the error itself and reports whether to go on.
func (h *handler) authListQuery(w http.ResponseWriter, r *http.Request, filters ...string) (authListParams, bool) {
	q := authListParams{limit: defaultListLimit, filters: map[string]string{}}
	allowed := map[string]bool{"limit": true, "cursor": true}
	for _, f := range filters {
		allowed[f] = true
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query",
			Message: "malformed query string: " + err.Error()})
		return q, false
	}
	for name, vals := range query {
		if !allowed[name] || len(vals) != 1 {
			h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_query", Param: name,
				Message: "unknown or repeated query parameter " + strconv.Quote(name)})
			return q, false
		}
		v := vals[0]
		switch name {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > maxListLimit {
				h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "limit",
					Message: "limit " + strconv.Quote(v) + ": want an integer from 1 to " + strconv.Itoa(maxListLimit)})
				return q, false
			}
			q.limit = n
		case "cursor":
			b, err := base64.RawURLEncoding.DecodeString(v)
			if err != nil || len(b) == 0 {
				h.badCursor(w, r)
				return q, false
			}
			q.cursor = string(b)
		default:
			q.filters[name] = v
		}
	}
	return q, true
}

func encodeCursor(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func (h *handler) badCursor(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "cursor",
		Message: "cursor: not one this list handed out (pass next_cursor as given)"})
}

// auditJSON is one audit entry as shown.
type auditJSON struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Resource   string          `json:"resource"`
	ResourceID string          `json:"resource_id"`
	Before     json.RawMessage `json:"before"` // null: none (a creation)
	After      json.RawMessage `json:"after"`  // null: none (a deletion)
}

// listAudit serves GET /v1/admin/audit?resource=&resource_id=&actor=:
// newest first, paged by id.
func (h *handler) listAudit(w http.ResponseWriter, r *http.Request) {
	q, ok := h.authListQuery(w, r, "resource", "resource_id", "actor")
	if !ok {
		return
	}
	f := pg.AuditFilter{Resource: q.filters["resource"], ResourceID: q.filters["resource_id"], Actor: q.filters["actor"], Limit: q.limit + 1}
	if q.cursor != "" {
		id, err := strconv.ParseInt(q.cursor, 10, 64)
		if err != nil || id < 1 {
			h.badCursor(w, r)
			return
		}
		f.BeforeID = id
	}
	var entries []pg.AuditEntry
	if h.audit != nil {
		var err error
		if entries, err = h.audit.ListAudit(r.Context(), f); err != nil {
			h.storeError(w, r, err)
			return
		}
	}
	out := authList{Object: "list"}
	if len(entries) > q.limit {
		entries = entries[:q.limit]
		out.HasMore, out.NextCursor = true, encodeCursor(strconv.FormatInt(entries[len(entries)-1].ID, 10))
	}
	data := make([]auditJSON, len(entries))
	for i, e := range entries {
		data[i] = auditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Resource: e.Resource, ResourceID: e.ResourceID,
			Before: nullRaw(e.Before), After: nullRaw(e.After)}
	}
	out.Data = data
	h.reply(w, http.StatusOK, out)
}

// nullRaw is b, or JSON null when empty.
func nullRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
