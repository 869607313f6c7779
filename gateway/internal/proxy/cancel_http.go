package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// cancelPath matches /v1/requests/{id}/cancel.
func cancelPath(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("/v1/requests/"))
	if !ok {
		return nil, false
	}
	id, ok := bytes.CutSuffix(rest, []byte("/cancel"))
	return id, ok && validRequestID(id)
}

// cancelRequest serves POST /v1/requests/{id}/cancel on the public
// listener: the caller's API key may cancel its own tenant's requests. A
// request of another tenant reads as unknown (404).
func (s *Server) cancelRequest(ctx *fasthttp.RequestCtx, id []byte) {
	if !ctx.IsPost() {
		writeError(ctx, methodNotAllowed(ctx, "POST"))
		return
	}
	st := s.acquireState()
	if st == nil {
		writeError(ctx, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "The gateway is shutting down; retry the request."})
		return
	}
	tenantID, e := callerTenant(st.tenants, time.Now(), &ctx.Request.Header)
	st.release()
	if e != nil {
		writeError(ctx, e)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	found, err := s.cancels.Cancel(c, string(id), tenantID)
	writeCancelResult(ctx, string(id), found, err, s)
}

func writeCancelResult(ctx *fasthttp.RequestCtx, id string, found bool, err error, s *Server) {
	switch {
	case err != nil:
		s.log.Warn("cancel: Redis unavailable", "request_id", id, "err", err)
		writeError(ctx, &openai.Error{Status: 503, Type: "server_error", Code: "cancel_unavailable",
			Message: "The request could not be cancelled right now (it is not served by this gateway and the shared store is unreachable); retry shortly."})
	case !found:
		writeError(ctx, &openai.Error{Status: 404, Type: "invalid_request_error", Code: "request_not_found",
			Message: fmt.Sprintf("No request %q of yours is in flight.", id)})
	default:
		ctx.SetStatusCode(200)
		ctx.SetContentType("application/json")
		fmt.Fprintf(ctx, `{"id":%q,"object":"request.cancellation","status":"cancelled"}`, id)
	}
}

// keyResolver is what the cancel API needs to check a caller's key: the
// tenant cache.
type keyResolver interface {
	Key(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error)
}

// callerTenant resolves the tenant of the API key in Authorization (Bearer)
// or X-Api-Key, as the preflight plugin does; tenants nil: no key resolves.
func callerTenant(tenants keyResolver, now time.Time, h *fasthttp.RequestHeader) (string, *openai.Error) {
	bad := &openai.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided."}
	var key []byte
	if v := h.Peek("Authorization"); len(v) > 7 && strings.EqualFold(string(v[:7]), "bearer ") {
		key = bytes.TrimSpace(v[7:])
	} else if v := h.Peek("X-Api-Key"); len(v) > 0 {
		key = bytes.TrimSpace(v)
	}
	if len(key) == 0 {
		return "", &openai.Error{Status: 401, Type: "invalid_request_error", Code: "missing_api_key",
			Message: "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."}
	}
	if tenants == nil {
		return "", bad
	}
	hash := tenant.KeyHash(sha256.Sum256(key))
	snap, err := tenants.Key(context.Background(), hash)
	switch {
	case errors.Is(err, tenant.ErrNotFound):
		return "", bad
	case err != nil:
		return "", &openai.Error{Status: 503, Type: "server_error", Code: "tenant_service_unavailable",
			Message: "The gateway cannot check API keys right now; retry shortly."}
	}
	if subtle.ConstantTimeCompare(snap.Key.Hash[:], hash[:]) != 1 || !snap.Usable(now) {
		return "", bad
	}
	return snap.Tenant.ID, nil
}

// AdminCancel cancels any tenant's request, on whichever replica serves
// it: the admin API's POST /v1/admin/requests/{id}/cancel.
func (s *Server) AdminCancel(ctx context.Context, id string) (bool, error) {
	if !validRequestID([]byte(id)) {
		return false, nil
	}
	return s.cancels.Cancel(ctx, id, cancels.AnyTenant)
}
