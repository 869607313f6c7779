package admin

import (
	"context"
	"encoding/json"
	"net/http"
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

// badCursor answers a cursor that decodes but names nothing of the list.
func (h *handler) badCursor(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "cursor",
		Message: "cursor is not one this API handed out (use next_cursor as it is)"})
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
	q, ok := h.parseList(w, r, "resource", "resource_id", "actor")
	if !ok {
		return
	}
	f := pg.AuditFilter{Resource: q.get("resource"), ResourceID: q.get("resource_id"), Actor: q.get("actor"), Limit: q.limit + 1}
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
	replyPage(h, w, entries, q.limit, func(e pg.AuditEntry) auditJSON {
		return auditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Resource: e.Resource, ResourceID: e.ResourceID,
			Before: nullRaw(e.Before), After: nullRaw(e.After)}
	}, func(e pg.AuditEntry) string { return strconv.FormatInt(e.ID, 10) })
}

// nullRaw is b, or JSON null when empty.
func nullRaw(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
