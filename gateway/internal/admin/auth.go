package admin

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// TokenStore holds the stored admin tokens (the Postgres store). A handler
// without one accepts the environment's token only.
type TokenStore interface {
	AdminTokenByHash(ctx context.Context, h [sha256.Size]byte) (*pg.AdminToken, error)
	CreateAdminToken(ctx context.Context, opts pg.AdminTokenOptions) (string, *pg.AdminToken, error)
	ListAdminTokens(ctx context.Context) ([]pg.AdminToken, error)
	RevokeAdminToken(ctx context.Context, id string) (*pg.AdminToken, error)
}

var _ TokenStore = (*pg.Store)(nil)

// WithTokens serves stored admin tokens from ts. Without this option the
// handler uses its Store if that is a TokenStore (the Postgres store is).
func WithTokens(ts TokenStore) Option { return func(h *handler) { h.tokens = ts } }

// WithReadOnly says the store takes no writes (the memory store): every
// write route answers 501 read_only_store before reading its body, and the
// session and overview answers say read_only.
func WithReadOnly(ro bool) Option { return func(h *handler) { h.readOnly = ro } }

// ActorBootstrap is the actor of the environment's token.
const ActorBootstrap = "bootstrap"

// Session cookie and CSRF.
const (
	// SessionCookie carries the admin token of a browser session.
	SessionCookie = "tollgate_admin"
	// CSRFHeader carries the session's csrf_token on every non-GET
	// request authenticated by the cookie.
	CSRFHeader = "X-CSRF-Token"
	// MaxSession caps a session cookie's Max-Age.
	MaxSession = 12 * time.Hour
	// csrfLabel is the HMAC message of the CSRF token.
	csrfLabel = "tollgate-admin-csrf"
)

// principal is who makes an admin request.
type principal struct {
	actor     string // the token's id, or ActorBootstrap
	name      string // the token's name, or ActorBootstrap
	scopes    []string
	expiresAt time.Time // zero: never
	// csrf is the CSRF token of the credential: HMAC-SHA256 keyed with the
	// credential's SHA-256. Kept instead of the credential itself.
	csrf string
	// cookie: the credential came in the session cookie.
	cookie bool
}

func (p *principal) has(scope string) bool { return slices.Contains(p.scopes, scope) }

type principalKey struct{}

// principalOf returns the principal ServeHTTP put in r's context.
func principalOf(r *http.Request) *principal {
	p, _ := r.Context().Value(principalKey{}).(*principal)
	return p
}

// csrfToken is hex HMAC-SHA256(key = SHA-256(token), csrfLabel): derived
// from the credential alone, so every replica computes the same one, and
// it reveals nothing of the token (HMAC is a PRF under a secret key).
func csrfToken(token string) string {
	key := sha256.Sum256([]byte(token))
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(csrfLabel))
	return hex.EncodeToString(m.Sum(nil))
}

// errUnauthorized is the one refusal of a credential: missing, malformed,
// unknown, wrong, expired and revoked look the same.
var errUnauthorized = &openai.Error{Status: http.StatusUnauthorized, Type: openai.TypeInvalidRequest,
	Code: "invalid_admin_token", Message: "missing or wrong admin token (Authorization: Bearer <token>)"}

// credential returns the token r presents and whether it came in the
// session cookie. An Authorization header wins over the cookie; a header
// that is not "Bearer <token>" is a refusal, not a fall back to the cookie.
func credential(r *http.Request) (token string, cookie, ok bool) {
	if auth, present := r.Header["Authorization"]; present {
		if len(auth) != 1 {
			return "", false, false
		}
		tok, ok := strings.CutPrefix(auth[0], "Bearer ")
		return tok, false, ok && tok != ""
	}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return "", false, false
	}
	return c.Value, true, true
}

// resolve returns the principal of token, or errUnauthorized, or another
// error when the token store cannot answer. The environment's token is
// compared by SHA-256 digest in constant time; a stored token is looked up
// by its SHA-256 on every call (no cache: a revocation holds from the next
// call on).
func (h *handler) resolve(ctx context.Context, token string) (*principal, error) {
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], h.token[:]) == 1 && !h.noAuth {
		return &principal{actor: ActorBootstrap, name: ActorBootstrap, scopes: pg.Scopes, csrf: csrfToken(token)}, nil
	}
	if h.tokens == nil || !strings.HasPrefix(token, pg.AdminTokenPrefix) {
		return nil, errUnauthorized
	}
	tok, err := h.tokens.AdminTokenByHash(ctx, sum)
	if errors.Is(err, tenant.ErrNotFound) {
		return nil, errUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if !tok.Usable(h.now()) {
		return nil, errUnauthorized
	}
	return &principal{actor: tok.ID, name: tok.Name, scopes: tok.Scopes, expiresAt: tok.ExpiresAt, csrf: csrfToken(token)}, nil
}

// cancelRoutes are the routes of the cancel scope, as ServeMux patterns.
var cancelRoutes = map[string]bool{"POST /v1/admin/requests/{id}/cancel": true}

// requiredScope is the scope r's route needs: read for GET (and HEAD),
// cancel for cancelling a request, write for every other. The route is the
// pattern mux would serve r with, so an escaped path ("a%2Fb" as an id)
// gets the scope of the handler it reaches.
func requiredScope(mux *http.ServeMux, r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return pg.ScopeRead
	}
	if _, pattern := mux.Handler(r); cancelRoutes[pattern] {
		return pg.ScopeCancel
	}
	return pg.ScopeWrite
}

// sessionPath is the route of the session itself, which any valid
// credential may read and end whatever its scopes.
const sessionPath = "/v1/admin/session"

// authenticate finds who makes r and checks that they may: their
// credential, the scope of the route, and for a cookie the CSRF token and
// origin of a non-GET. It answers a refusal itself and returns nil then.
func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) *principal {
	token, cookie, ok := credential(r)
	if !ok {
		h.refuse(w, r, false)
		return nil
	}
	p, err := h.resolve(r.Context(), token)
	if errors.Is(err, errUnauthorized) {
		h.refuse(w, r, cookie)
		return nil
	}
	if err != nil {
		h.log.Error("admin token lookup failed", "method", r.Method, "path", r.URL.Path, "err", err)
		h.fail(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: openai.TypeServer, Code: "auth_unavailable",
			Message: "the admin token could not be checked right now; retry shortly"})
		return nil
	}
	p.cookie = cookie
	if cookie && r.Method != http.MethodGet && r.Method != http.MethodHead && !h.csrfOK(w, r, p) {
		return nil
	}
	if r.URL.Path != sessionPath {
		if sc := requiredScope(h.mux, r); !p.has(sc) {
			h.fail(w, r, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "insufficient_scope",
				Message: fmt.Sprintf("this admin token lacks the %q scope that %s %s needs", sc, r.Method, r.URL.Path)})
			return nil
		}
	}
	return p
}

// refuse answers 401; a refused cookie is cleared.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, cookie bool) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
	if cookie {
		http.SetCookie(w, sessionCookie(r, "", -1))
	}
	h.fail(w, r, errUnauthorized)
}

// csrfOK checks a cookie-authenticated write: X-CSRF-Token must be the
// session's CSRF token (compared in constant time), and an Origin header,
// if present, must name the request's host.
func (h *handler) csrfOK(w http.ResponseWriter, r *http.Request, p *principal) bool {
	if !originOK(r) {
		h.fail(w, r, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "csrf_failed",
			Message: "the request's Origin is not this admin API's"})
		return false
	}
	got := r.Header.Get(CSRFHeader)
	if subtle.ConstantTimeCompare([]byte(got), []byte(p.csrf)) != 1 {
		h.fail(w, r, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "csrf_failed",
			Message: fmt.Sprintf("a write with the session cookie needs the %s header from the session's csrf_token", CSRFHeader)})
		return false
	}
	return true
}

// originOK reports whether r has no Origin header or one whose host is
// r's Host (case-insensitively). "null" and malformed origins fail.
func originOK(r *http.Request) bool {
	origins := r.Header.Values("Origin")
	if len(origins) == 0 {
		return true
	}
	if len(origins) != 1 {
		return false
	}
	u, err := url.Parse(origins[0])
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// sessionCookie is the session cookie holding token for maxAge seconds
// (negative: clear it). Secure when r came over TLS.
func sessionCookie(r *http.Request, token string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: token, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}
