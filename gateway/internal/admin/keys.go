package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// keyOutFull is a key as read: keyJSON with its times.
type keyOutFull struct {
	keyJSON
	// CreatedAt is null for a key of the memory store.
	CreatedAt *time.Time `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"` // null: not revoked
}

func keyInfoOut(k pg.KeyInfo) keyOutFull {
	out := keyOutFull{keyJSON: keyOut(k.Key)}
	if !k.CreatedAt.IsZero() {
		c := k.CreatedAt
		out.CreatedAt = &c
	}
	if !k.RevokedAt.IsZero() {
		rv := k.RevokedAt
		out.RevokedAt = &rv
	}
	return out
}

func (h *handler) listAllKeys(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "tenant_id", "status")
	if !ok {
		return
	}
	ks, err := h.store.ListAllKeys(r.Context(), pg.KeyFilter{TenantID: l.get("tenant_id"), Status: l.get("status")}, l.cursor, l.limit+1)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	replyPage(h, w, ks, l.limit, keyInfoOut, func(k pg.KeyInfo) string { return k.ID })
}

func (h *handler) getKey(w http.ResponseWriter, r *http.Request) {
	k, err := h.store.GetKey(r.Context(), r.PathValue("id"))
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, keyInfoOut(k))
}

// keyPatch is the body of PATCH /v1/admin/keys/{id}: fields left out stay.
// expires_at null: never; a limit 0: the plan's; budget_usd 0: the plan's
// key budgets (budget_window without budget_usd keeps the amount).
type keyPatch struct {
	ExpiresAt    json.RawMessage `json:"expires_at"`
	RPM          *int64          `json:"rpm"`
	TPM          *int64          `json:"tpm"`
	MaxTokens    *int64          `json:"max_tokens"`
	BudgetUSD    *usd            `json:"budget_usd"`
	BudgetWindow *string         `json:"budget_window"`
}

func (h *handler) patchKey(w http.ResponseWriter, r *http.Request) {
	var in keyPatch
	if !h.decode(w, r, &in, false) {
		return
	}
	id := r.PathValue("id")
	p := pg.KeyPatch{RPM: in.RPM, TPM: in.TPM, MaxTokens: in.MaxTokens}
	if in.ExpiresAt != nil {
		var t *time.Time
		if err := json.Unmarshal(in.ExpiresAt, &t); err != nil {
			h.storeError(w, r, invalidField("expires_at", err))
			return
		}
		var at time.Time
		if t != nil {
			at = t.UTC()
		}
		p.ExpiresAt = &at
	}
	if in.BudgetUSD != nil || in.BudgetWindow != nil {
		amount, window := usd(0), ""
		if in.BudgetUSD == nil || in.BudgetWindow == nil {
			cur, err := h.store.GetKey(r.Context(), id)
			if err != nil {
				h.storeError(w, r, err)
				return
			}
			amount, window = usd(cur.Budget.LimitMicros), cur.Budget.Window
		}
		if in.BudgetUSD != nil {
			amount = *in.BudgetUSD
		}
		if in.BudgetWindow != nil {
			window = *in.BudgetWindow
		}
		b := keyBudget(amount, window) // the month by default
		if amount == 0 {
			b = tenant.KeyBudget{} // the plan's key budgets
		}
		p.Budget = &b
	}
	k, err := h.store.UpdateKey(r.Context(), id, p)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictKey(k.Hash)
	h.reply(w, http.StatusOK, keyInfoOut(k))
}

// deleteKey deletes a key: it stops working at once on this replica (the
// hash is evicted before the answer) and on the others at the trigger's
// NOTIFY. Its call log rows keep its id.
func (h *handler) deleteKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	hash, err := h.store.DeleteKey(r.Context(), id)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictKey(hash)
	h.log.Info("deleted key", "key_id", id)
	h.reply(w, http.StatusOK, deletedJSON{ID: id, Object: "key", Deleted: true})
}

// invalidField is a body field that does not parse, as a store error
// wrapping pg.ErrInvalid (400 invalid_value).
func invalidField(name string, err error) error {
	return fmt.Errorf("field %q: %v: %w", name, err, pg.ErrInvalid)
}
