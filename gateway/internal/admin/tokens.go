package admin

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
)

// tokenRequest is the body of POST /v1/admin/tokens.
type tokenRequest struct {
	Name      string     `json:"name"`
	Scopes    []string   `json:"scopes"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// tokenJSON is an admin token's record as shown: never its hash. Token is
// set only in the answer to its creation.
type tokenJSON struct {
	ID        string     `json:"id"`
	Token     string     `json:"token,omitempty"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
	RevokedAt *time.Time `json:"revoked_at"` // null: not revoked
}

func tokenOut(t pg.AdminToken) tokenJSON {
	out := tokenJSON{ID: t.ID, Name: t.Name, Prefix: t.Prefix, Scopes: t.Scopes, CreatedAt: t.CreatedAt.UTC(), CreatedBy: t.CreatedBy}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt.UTC()
		out.ExpiresAt = &e
	}
	if !t.RevokedAt.IsZero() {
		rv := t.RevokedAt.UTC()
		out.RevokedAt = &rv
	}
	return out
}

// noTokenStore answers a token write on a handler without a token store.
func (h *handler) noTokenStore(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, &openai.Error{Status: http.StatusNotImplemented, Type: openai.TypeInvalidRequest, Code: "read_only_store",
		Message: "admin tokens are stored in Postgres; with this store only the environment's token exists"})
}

// listTokens serves GET /v1/admin/tokens: every token, oldest first,
// revoked and expired ones included.
func (h *handler) listTokens(w http.ResponseWriter, r *http.Request) {
	q, ok := h.parseList(w, r)
	if !ok {
		return
	}
	var all []pg.AdminToken
	if h.tokens != nil {
		var err error
		if all, err = h.tokens.ListAdminTokens(r.Context()); err != nil {
			h.storeError(w, r, err)
			return
		}
	}
	start := 0
	if q.cursor != "" {
		i := slices.IndexFunc(all, func(t pg.AdminToken) bool { return t.ID == q.cursor })
		if i < 0 {
			h.badCursor(w, r)
			return
		}
		start = i + 1
	}
	replyPage(h, w, all[start:], q.limit, tokenOut, func(t pg.AdminToken) string { return t.ID })
}

// createToken serves POST /v1/admin/tokens. A token grants only scopes
// its creator holds.
func (h *handler) createToken(w http.ResponseWriter, r *http.Request) {
	var in tokenRequest
	if !h.decode(w, r, &in, false) {
		return
	}
	scopes, err := pg.CanonicalScopes(in.Scopes)
	if err != nil {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value", Param: "scopes",
			Message: err.Error()})
		return
	}
	p := principalOf(r)
	for _, sc := range scopes {
		if !p.has(sc) {
			h.fail(w, r, &openai.Error{Status: http.StatusForbidden, Type: openai.TypeInvalidRequest, Code: "insufficient_scope", Param: "scopes",
				Message: fmt.Sprintf("this admin token lacks the %q scope, so it cannot grant it", sc)})
			return
		}
	}
	if h.tokens == nil {
		h.noTokenStore(w, r)
		return
	}
	opts := pg.AdminTokenOptions{Name: in.Name, Scopes: scopes}
	if in.ExpiresAt != nil {
		opts.ExpiresAt = in.ExpiresAt.UTC()
	}
	plaintext, tok, err := h.tokens.CreateAdminToken(r.Context(), opts)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	out := tokenOut(*tok)
	out.Token = plaintext
	h.log.Info("created admin token", "token_id", tok.ID, "name", tok.Name, "prefix", tok.Prefix, "scopes", tok.Scopes, "by", p.actor)
	h.reply(w, http.StatusCreated, out)
}

// revokeToken serves POST /v1/admin/tokens/{id}/revoke: the token fails
// from the next call on, on every replica (tokens are looked up per call).
func (h *handler) revokeToken(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !h.decode(w, r, &empty, true) {
		return
	}
	if h.tokens == nil {
		h.noTokenStore(w, r)
		return
	}
	id := r.PathValue("id")
	tok, err := h.tokens.RevokeAdminToken(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.log.Info("revoked admin token", "token_id", id, "by", principalOf(r).actor)
	h.reply(w, http.StatusOK, tokenOut(*tok))
}
