package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Key format: KeyPrefix, then the base62 digits of 32 random bytes, padded
// to KeyDigits.
const (
	KeyPrefix = "tg_"
	// KeyDigits is the length of 2^256-1 in base62.
	KeyDigits = 43
	// displayDigits is how many random digits the stored display prefix
	// keeps (about 48 of the 256 bits).
	displayDigits = 8
)

// keyByHashSQL reads everything a Snapshot needs in one statement.
const keyByHashSQL = `
SELECT k.id, k.tenant_id, k.prefix, k.status, k.expires_at,
       coalesce(k.rpm, 0), coalesce(k.tpm, 0), coalesce(k.max_tokens, 0),
       coalesce(k.budget_micros, 0), coalesce(k.budget_window, ''),
       t.status, t.plan_id, t.plugins,
       p.monthly_budget_micros, p.rpm, p.tpm, p.max_tokens, p.allowed_models, p.budgets, p.plugins
FROM api_keys k
JOIN tenants t ON t.id = k.tenant_id
JOIN plans p ON p.id = t.plan_id
WHERE k.key_hash = $1`

// KeyByHash returns the snapshot of the key with hash h, its tenant and
// plan, read with one statement, or an error wrapping tenant.ErrNotFound.
// Revoked and expired keys and suspended tenants are returned too, with
// their status: Snapshot.Usable decides. LoadedAt is when the read began, so
// a change notified after LoadedAt may be missing from the snapshot but one
// notified before it is not.
func (s *Store) KeyByHash(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	snap := &tenant.Snapshot{LoadedAt: time.Now()}
	var (
		expires                     *time.Time
		budgets, tPlugins, pPlugins []byte
	)
	k, t, p := &snap.Key, &snap.Tenant, &snap.Plan
	err := s.read(ctx, func() error {
		return s.pool.QueryRow(ctx, keyByHashSQL, h[:]).Scan(
			&k.ID, &k.TenantID, &k.Prefix, &k.Status, &expires,
			&k.Limits.RPM, &k.Limits.TPM, &k.Limits.MaxTokens,
			&k.Budget.LimitMicros, &k.Budget.Window,
			&t.Status, &t.PlanID, &tPlugins,
			&p.MonthlyBudgetMicros, &p.RPM, &p.TPM, &p.MaxTokens, &p.AllowedModels, &budgets, &pPlugins,
		)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("key %x…: %w", h[:4], tenant.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading key %x…: %w", h[:4], err)
	}
	k.Hash = h
	if expires != nil {
		k.ExpiresAt = expires.UTC()
	}
	t.ID = k.TenantID
	p.ID = t.PlanID
	if len(p.AllowedModels) == 0 {
		p.AllowedModels = nil
	}
	if p.Budgets, err = decodeBudgets(budgets, p.MonthlyBudgetMicros); err != nil {
		return nil, fmt.Errorf("reading key %x… of plan %q: %w", h[:4], p.ID, err)
	}
	if p.Plugins, err = decodePlugins(pPlugins); err != nil {
		return nil, fmt.Errorf("reading key %x… of plan %q: %w", h[:4], p.ID, err)
	}
	if t.Plugins, err = decodePlugins(tPlugins); err != nil {
		return nil, fmt.Errorf("reading key %x… of tenant %q: %w", h[:4], t.ID, err)
	}
	snap.Plugins = tenant.NewPluginSet(p.ID, p.Plugins, t.ID, t.Plugins)
	return snap, nil
}

// KeyOptions are the optional settings of a new key. The zero value is a
// key that never expires and inherits every limit from the plan.
type KeyOptions struct {
	// ExpiresAt is when the key stops working; zero means never.
	ExpiresAt time.Time
	// Limits override the plan's; zero fields inherit them.
	Limits tenant.Limits
	// Budget is the key's own budget; zero: the plan's key budgets.
	Budget tenant.KeyBudget
}

// CreateKey creates an active key for tenant tenantID and returns the key
// itself, which is stored nowhere (only its SHA-256 and display prefix are),
// so this is the one chance to hand it out; and its record. An unknown
// tenant is an error wrapping tenant.ErrNotFound.
func (s *Store) CreateKey(ctx context.Context, tenantID string, opts KeyOptions) (string, *tenant.Key, error) {
	if err := checkID("tenant", tenantID); err != nil {
		return "", nil, fmt.Errorf("creating a key: %w", err)
	}
	if err := checkLimits(opts.Limits); err != nil {
		return "", nil, fmt.Errorf("creating a key for tenant %q: %w", tenantID, err)
	}
	if err := opts.Budget.Check(); err != nil {
		return "", nil, fmt.Errorf("creating a key for tenant %q: budget: %v: %w", tenantID, err, ErrInvalid)
	}
	plaintext, err := newKey()
	if err != nil {
		return "", nil, err
	}
	id, err := newKeyID()
	if err != nil {
		return "", nil, err
	}
	k := &tenant.Key{
		ID:        id,
		TenantID:  tenantID,
		Hash:      tenant.HashKey(plaintext),
		Prefix:    plaintext[:len(KeyPrefix)+displayDigits],
		Status:    tenant.StatusActive,
		ExpiresAt: opts.ExpiresAt,
		Limits:    opts.Limits,
		Budget:    opts.Budget,
	}
	budget, window := keyBudgetColumns(k.Budget)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "key.create", "key", k.ID, keyImage, []any{k.ID}, func() error {
			_, err := tx.Exec(ctx, `
INSERT INTO api_keys (id, tenant_id, key_hash, prefix, status, expires_at, rpm, tpm, max_tokens, budget_micros, budget_window)
VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8, $9, $10)`,
				k.ID, k.TenantID, k.Hash[:], k.Prefix, nullTime(k.ExpiresAt),
				nullPositive(k.Limits.RPM), nullPositive(k.Limits.TPM), nullPositive(k.Limits.MaxTokens), budget, window)
			return err
		})
	})
	if err != nil {
		return "", nil, fmt.Errorf("creating a key for tenant %q: %w", tenantID, classify(err))
	}
	return plaintext, k, nil
}

// RevokeKey revokes the key with id keyID. Revoking a revoked key succeeds
// and keeps its revocation time; an unknown id is an error wrapping
// tenant.ErrNotFound.
func (s *Store) RevokeKey(ctx context.Context, keyID string) error {
	_, err := s.RevokeKeyHash(ctx, keyID)
	return err
}

// RevokeKeyHash is RevokeKey returning the revoked key's hash, so the caller
// can evict it from its own cache at once (other replicas evict on the
// NOTIFY).
func (s *Store) RevokeKeyHash(ctx context.Context, keyID string) (tenant.KeyHash, error) {
	var h tenant.KeyHash
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "key.revoke", "key", keyID, keyImage, []any{keyID}, func() error {
			var raw []byte
			err := tx.QueryRow(ctx, `
UPDATE api_keys SET status = 'revoked', revoked_at = coalesce(revoked_at, now())
WHERE id = $1 RETURNING key_hash`, keyID).Scan(&raw)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return tenant.ErrNotFound
			case err != nil:
				return err
			case len(raw) != len(h):
				return fmt.Errorf("key_hash has %d bytes", len(raw))
			}
			copy(h[:], raw)
			return nil
		})
	})
	if err != nil {
		return h, fmt.Errorf("revoking key %q: %w", keyID, err)
	}
	return h, nil
}

// ListKeys returns the keys of tenant tenantID, oldest first: their records,
// with the hash and display prefix (the keys themselves are stored nowhere).
// An unknown tenant is an error wrapping tenant.ErrNotFound; a tenant without
// keys gives an empty slice.
func (s *Store) ListKeys(ctx context.Context, tenantID string) ([]tenant.Key, error) {
	// From tenants, so an unknown tenant (no row) and a tenant without keys
	// (one row of NULLs) differ in one statement.
	rows, err := s.pool.Query(ctx, `
SELECT k.id, k.key_hash, k.prefix, k.status, k.expires_at,
       coalesce(k.rpm, 0), coalesce(k.tpm, 0), coalesce(k.max_tokens, 0),
       coalesce(k.budget_micros, 0), coalesce(k.budget_window, '')
FROM tenants t
LEFT JOIN api_keys k ON k.tenant_id = t.id
WHERE t.id = $1
ORDER BY k.created_at, k.id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("listing keys of tenant %q: %w", tenantID, err)
	}
	keys := []tenant.Key{}
	found := false
	for rows.Next() {
		found = true
		var (
			id, prefix, status *string
			hash               []byte
			expires            *time.Time
			l                  tenant.Limits
			b                  tenant.KeyBudget
		)
		if err := rows.Scan(&id, &hash, &prefix, &status, &expires, &l.RPM, &l.TPM, &l.MaxTokens, &b.LimitMicros, &b.Window); err != nil {
			return nil, fmt.Errorf("listing keys of tenant %q: %w", tenantID, err)
		}
		if id == nil {
			continue // the tenant's row, no keys
		}
		k := tenant.Key{ID: *id, TenantID: tenantID, Prefix: *prefix, Status: *status, Limits: l, Budget: b}
		copy(k.Hash[:], hash)
		if expires != nil {
			k.ExpiresAt = expires.UTC()
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing keys of tenant %q: %w", tenantID, err)
	}
	if !found {
		return nil, fmt.Errorf("listing keys of tenant %q: %w", tenantID, tenant.ErrNotFound)
	}
	return keys, nil
}

// newKey returns a new API key: KeyPrefix and 32 random bytes in base62.
func newKey() (string, error) { return newSecret(KeyPrefix) }

// newKeyID returns a new key id, "key_" and 16 random characters. Ids are
// not secret; they name keys in the admin API and the call log.
func newKeyID() (string, error) { return newID("key_") }

// nullTime maps the zero time to NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// nullPositive maps 0 ("inherit") to NULL.
func nullPositive(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}
