package admin

import (
	"errors"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// A browser session is the admin token itself in an HttpOnly cookie: any
// replica accepts it with the same lookup as a Bearer token, and revoking
// the token ends every session made with it on the next request. Writes
// with the cookie need the CSRF token derived from the token (auth.go).

// sessionRequest is the body of POST /v1/admin/session.
type sessionRequest struct {
	Token string `json:"token"`
}

// sessionJSON is the answer of the session routes.
type sessionJSON struct {
	Actor     string     `json:"actor"`
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
	CSRFToken string     `json:"csrf_token"`
	ReadOnly  bool       `json:"read_only"`
}

func (h *handler) sessionOut(p *principal) sessionJSON {
	out := sessionJSON{Actor: p.actor, Name: p.name, Scopes: p.scopes, CSRFToken: p.csrf, ReadOnly: h.readOnly}
	if !p.expiresAt.IsZero() {
		t := p.expiresAt.UTC()
		out.ExpiresAt = &t
	}
	return out
}

// createSession serves POST /v1/admin/session: the token in the body is
// checked like a Bearer token; the answer sets the cookie, for at most
// MaxSession and never past the token's expiry. It needs no credential
// beforehand, but a cross-site Origin is refused (no logging a browser in
// from another site).
func (h *handler) createSession(w http.ResponseWriter, r *http.Request) {
	if !originOK(r) {
		h.fail(w, r, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "csrf_failed",
			Message: "the request's Origin is not this admin API's"})
		return
	}
	var in sessionRequest
	if !h.decode(w, r, &in, false) {
		return
	}
	if in.Token == "" {
		h.refuse(w, r, false)
		return
	}
	p, err := h.resolve(r.Context(), in.Token)
	if errors.Is(err, errUnauthorized) {
		h.refuse(w, r, false)
		return
	}
	if err != nil {
		h.log.Error("admin token lookup failed", "method", r.Method, "path", r.URL.Path, "err", err)
		h.fail(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer, Code: "auth_unavailable",
			Message: "the admin token could not be checked right now; retry shortly"})
		return
	}
	if !cookieSafe(in.Token) {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "token",
			Message: "this token has characters a cookie cannot carry; use it as a Bearer token, or make a stored admin token for the console"})
		return
	}
	life := MaxSession
	if !p.expiresAt.IsZero() {
		life = min(life, p.expiresAt.Sub(h.now()))
	}
	secs := int(life / time.Second) // rounded down: the cookie never outlives the token
	if secs < 1 {
		h.refuse(w, r, false)
		return
	}
	http.SetCookie(w, sessionCookie(r, in.Token, secs))
	h.log.Info("admin session opened", "actor", p.actor, "max_age_s", secs)
	h.reply(w, http.StatusOK, h.sessionOut(p))
}

// getSession serves GET /v1/admin/session: who the credential is.
func (h *handler) getSession(w http.ResponseWriter, r *http.Request) {
	h.reply(w, http.StatusOK, h.sessionOut(principalOf(r)))
}

// deleteSession serves DELETE /v1/admin/session: the cookie is cleared.
// The token stays valid (revoke it to end it everywhere).
func (h *handler) deleteSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, sessionCookie(r, "", -1))
	w.WriteHeader(http.StatusNoContent)
}

// cookieSafe reports whether every byte of v may stand in a cookie value
// unquoted (RFC 6265 cookie-octet).
func cookieSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}
