package hostsvc

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// KeyResolver is what tenant.resolve needs: the cache in front of a
// tenant.Store.
type KeyResolver interface {
	Key(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error)
}

// PluginCompiler compiles a snapshot's plugin overrides for the policy
// state's pipeline (chains.Compiler), keeping the result with the
// snapshot so that a warm request compiles nothing.
type PluginCompiler interface {
	Compile(ps *tenant.PluginSet) (*wasmhost.Override, error)
}

// Tenants is the tenant.resolve service.
type Tenants struct {
	log     *slog.Logger
	keys    KeyResolver
	now     func() time.Time
	plugins PluginCompiler // nil: overrides are not applied
}

// Serve is tenant.resolve. The request is the API key as the client
// presented it; the answer is a status line — "ok", "invalid" (unknown,
// revoked and expired keys alike) or "suspended" — followed for "ok" by
// the plan's allowed model patterns, one per line. On "ok" the request's
// tenant snapshot is set for every later plugin. The key is hashed at once
// and never logged or kept.
func (t *Tenants) Serve(c *Session, r *wasmhost.Request, key []byte) ([]byte, error) {
	h := tenant.KeyHash(sha256.Sum256(key))
	// No per-call deadline: a hit needs none, and the cache bounds its
	// store reads itself (CacheOptions.LoadTimeout).
	snap, err := t.keys.Key(context.Background(), h)
	switch {
	case errors.Is(err, tenant.ErrNotFound):
		return []byte("invalid"), nil
	case err != nil:
		t.log.Error("tenant lookup failed", "err", err)
		return nil, err
	}
	// The lookup matched on the hash; compare it again in constant time so
	// no code path compares key material byte by byte.
	if subtle.ConstantTimeCompare(snap.Key.Hash[:], h[:]) != 1 {
		return []byte("invalid"), nil
	}
	now := t.now()
	if !snap.Usable(now) {
		if snap.Tenant.Status != tenant.StatusActive && snap.Key.Status == tenant.StatusActive &&
			(snap.Key.ExpiresAt.IsZero() || now.Before(snap.Key.ExpiresAt)) {
			return []byte("suspended"), nil
		}
		return []byte("invalid"), nil
	}
	var plugins *wasmhost.Override
	if snap.Plugins != nil && t.plugins != nil {
		if plugins, err = t.plugins.Compile(snap.Plugins); err != nil {
			// A config the plugin refuses (the admin API checks them;
			// a plugin upgrade may not): the request fails rather than
			// running the guard with the policy's config.
			t.log.Error("tenant's plugin settings cannot be applied", "tenant", snap.Tenant.ID, "plan", snap.Plan.ID, "err", err)
			return nil, err
		}
	}
	lim := snap.Effective()
	if c != nil {
		c.meter.snap = snap // the request's budgets, for budget.reserve
	}
	r.Tenant = &wasmhost.Tenant{
		ID: snap.Tenant.ID, KeyID: snap.Key.ID, Plan: snap.Plan.ID, Status: snap.Tenant.Status,
		RPM: orMinus1(lim.RPM), TPM: orMinus1(lim.TPM), BudgetMicros: orMinus1(snap.Plan.MonthlyBudgetMicros), MaxTokens: orMinus1(lim.MaxTokens),
		PlanRPM: orMinus1(snap.Plan.RPM), PlanTPM: orMinus1(snap.Plan.TPM), KeyRPM: orMinus1(snap.Key.Limits.RPM), KeyTPM: orMinus1(snap.Key.Limits.TPM),
		Plugins: plugins,
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
