package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// keyResolver is what the tenant service needs: the cache in front of a
// tenant.Store.
type keyResolver interface {
	Key(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error)
}

// services serves plugins' host calls (`call`). See sdk/ABI.md, "Services".
type services struct {
	log     *slog.Logger
	tenants keyResolver // nil: no tenant store configured
	prices  priceReader // nil: no prices
	acct    *accounting
	now     func() time.Time
}

// priceReader is what the budget services need: the cache's prices.
type priceReader interface {
	Price(ctx context.Context, model string) (*tenant.Price, error)
}

var _ wasm.Services = (*services)(nil)

// Call implements wasm.Services.
func (sv *services) Call(r *wasm.Request, name string, req []byte) ([]byte, error) {
	switch name {
	case "tenant.resolve":
		return sv.resolve(r, req)
	case "ratelimit.admit":
		return sv.rateAdmit(r, req)
	case "budget.reserve":
		return sv.budgetReserve(r, req)
	case "budget.extend":
		return sv.budgetExtend(r, req)
	}
	return nil, wasm.ErrNoService
}

// resolve is the tenant.resolve service. The request is the API key as the
// client presented it; the answer is a status line — "ok", "invalid"
// (unknown, revoked and expired keys alike) or "suspended" — followed for
// "ok" by the plan's allowed model patterns, one per line. On "ok" the
// request's tenant snapshot is set for every later plugin. The key is
// hashed at once and never logged or kept.
func (sv *services) resolve(r *wasm.Request, key []byte) ([]byte, error) {
	if sv.tenants == nil {
		return nil, wasm.ErrNoService
	}
	h := tenant.KeyHash(sha256.Sum256(key))
	// No per-call deadline: a hit needs none, and the cache bounds its
	// store reads itself (CacheOptions.LoadTimeout).
	snap, err := sv.tenants.Key(context.Background(), h)
	switch {
	case errors.Is(err, tenant.ErrNotFound):
		return []byte("invalid"), nil
	case err != nil:
		sv.log.Error("tenant lookup failed", "err", err)
		return nil, err
	}
	// The lookup matched on the hash; compare it again in constant time so
	// no code path compares key material byte by byte.
	if subtle.ConstantTimeCompare(snap.Key.Hash[:], h[:]) != 1 {
		return []byte("invalid"), nil
	}
	now := sv.now()
	if !snap.Usable(now) {
		if snap.Tenant.Status != tenant.StatusActive && snap.Key.Status == tenant.StatusActive &&
			(snap.Key.ExpiresAt.IsZero() || now.Before(snap.Key.ExpiresAt)) {
			return []byte("suspended"), nil
		}
		return []byte("invalid"), nil
	}
	lim := snap.Effective()
	r.Tenant = &wasm.Tenant{
		ID: snap.Tenant.ID, KeyID: snap.Key.ID, Plan: snap.Plan.ID, Status: snap.Tenant.Status,
		RPM: orMinus1(lim.RPM), TPM: orMinus1(lim.TPM), BudgetMicros: orMinus1(snap.Plan.MonthlyBudgetMicros), MaxTokens: orMinus1(lim.MaxTokens),
		PlanRPM: orMinus1(snap.Plan.RPM), PlanTPM: orMinus1(snap.Plan.TPM), KeyRPM: orMinus1(snap.Key.Limits.RPM), KeyTPM: orMinus1(snap.Key.Limits.TPM),
	}
	out := make([]byte, 0, 16+16*len(snap.Plan.AllowedModels))
	out = append(out, "ok"...)
	for _, m := range snap.Plan.AllowedModels {
		out = append(out, '\n')
		out = append(out, m...)
	}
	return out, nil
}

func orMinus1(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}
