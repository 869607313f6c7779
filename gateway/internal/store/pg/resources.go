package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Reads, updates and deletes of the admin API's resources. Lists are pages
// in id order (keyset: a page starts after the last id of the previous one,
// so rows created or deleted between pages neither repeat nor shift the
// others). Every write here is audited (audited: the row before and after,
// in the write's transaction) and fires the tables' NOTIFY triggers
// (migration 00005, for DELETE as for INSERT and UPDATE).

// ErrInUse is returned when deleting a row others still refer to, such as a
// plan with tenants.
var ErrInUse = errors.New("in use")

// pricesImage is every stored price of a model (null: none), for the
// audit of a delete (the other images are in audit.go).
const pricesImage = `SELECT jsonb_agg(to_jsonb(m) ORDER BY effective_from)
FROM (SELECT * FROM model_prices WHERE model = $1 FOR UPDATE) m HAVING count(*) > 0`

// PlanInfo is a plan as the admin API lists it.
type PlanInfo struct {
	tenant.Plan
	Tenants   int64 // tenants on the plan
	CreatedAt time.Time
	UpdatedAt time.Time
}

const planInfoSQL = `
SELECT p.id, p.monthly_budget_micros, p.rpm, p.tpm, p.max_tokens, p.allowed_models, p.budgets, p.plugins,
       p.created_at, p.updated_at, (SELECT count(*) FROM tenants t WHERE t.plan_id = p.id)
FROM plans p`

func scanPlan(row pgx.Row) (PlanInfo, error) {
	var (
		p                PlanInfo
		budgets, plugins []byte
	)
	err := row.Scan(&p.ID, &p.MonthlyBudgetMicros, &p.RPM, &p.TPM, &p.MaxTokens, &p.AllowedModels, &budgets, &plugins,
		&p.CreatedAt, &p.UpdatedAt, &p.Tenants)
	if err != nil {
		return p, err
	}
	if len(p.AllowedModels) == 0 {
		p.AllowedModels = nil
	}
	if p.Budgets, err = decodeBudgets(budgets, p.MonthlyBudgetMicros); err != nil {
		return p, err
	}
	if p.Plugins, err = decodePlugins(plugins); err != nil {
		return p, err
	}
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	return p, nil
}

// ListPlans returns up to limit plans with ids after after, in id order.
func (s *Store) ListPlans(ctx context.Context, after string, limit int) ([]PlanInfo, error) {
	rows, err := s.pool.Query(ctx, planInfoSQL+` WHERE p.id > $1 ORDER BY p.id LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("listing plans: %w", err)
	}
	out, err := collect(rows, scanPlan)
	if err != nil {
		return nil, fmt.Errorf("listing plans: %w", err)
	}
	return out, nil
}

// GetPlan returns plan id, or an error wrapping tenant.ErrNotFound.
func (s *Store) GetPlan(ctx context.Context, id string) (PlanInfo, error) {
	p, err := scanPlan(s.pool.QueryRow(ctx, planInfoSQL+` WHERE p.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("plan %q: %w", id, tenant.ErrNotFound)
	}
	if err != nil {
		return p, fmt.Errorf("reading plan %q: %w", id, err)
	}
	return p, nil
}

// DeletePlan deletes plan id: an error wrapping tenant.ErrNotFound if there
// is none, ErrInUse while a tenant is on it. The plan's row is locked
// before its tenants are counted, and a tenant's insert or plan change
// locks the plan row it refers to (the foreign key's KEY SHARE lock), so no
// tenant can join the plan between the count and the delete.
func (s *Store) DeletePlan(ctx context.Context, id string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "plan.delete", "plan", id, planImage, []any{id}, func() error {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM tenants WHERE plan_id = $1`, id).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%d tenants are on it: %w", n, ErrInUse)
			}
			tag, err := tx.Exec(ctx, `DELETE FROM plans WHERE id = $1`, id)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("deleting plan %q: %w", id, classifyDelete(err))
	}
	return nil
}

// classifyDelete is classify, but a foreign key violation of a delete means
// the row is referred to.
func classifyDelete(err error) error {
	if pgErrCode(err) == codeForeignKeyViolation {
		return fmt.Errorf("%w (%w)", ErrInUse, err)
	}
	return classify(err)
}

// TenantInfo is a tenant as the admin API lists it.
type TenantInfo struct {
	tenant.Tenant
	CreatedAt  time.Time
	KeysActive int64 // keys neither revoked nor expired
	// SpendMonthMicros is the ledger's spend in the current UTC month.
	SpendMonthMicros int64
}

// TenantFilter selects tenants; empty fields select all.
type TenantFilter struct {
	PlanID, Status string
	IDPrefix       string
}

const tenantInfoSQL = `
SELECT t.id, t.plan_id, t.status, t.plugins, t.created_at,
       (SELECT count(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.status = 'active'
            AND (k.expires_at IS NULL OR k.expires_at > now())),
       coalesce((SELECT s.cost_micros FROM spend_month s WHERE s.tenant_id = t.id AND s.month = $1), 0)
FROM tenants t`

func scanTenant(row pgx.Row) (TenantInfo, error) {
	var (
		t       TenantInfo
		plugins []byte
	)
	err := row.Scan(&t.ID, &t.PlanID, &t.Status, &plugins, &t.CreatedAt, &t.KeysActive, &t.SpendMonthMicros)
	if err != nil {
		return t, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	t.Plugins, err = decodePlugins(plugins)
	return t, err
}

// ListTenants returns up to limit tenants matching f with ids after after,
// in id order; now picks the month of SpendMonthMicros.
func (s *Store) ListTenants(ctx context.Context, f TenantFilter, now time.Time, after string, limit int) ([]TenantInfo, error) {
	rows, err := s.pool.Query(ctx, tenantInfoSQL+`
WHERE t.id > $2 AND ($3 = '' OR t.plan_id = $3) AND ($4 = '' OR t.status = $4)
  AND ($5 = '' OR starts_with(t.id, $5))
ORDER BY t.id LIMIT $6`, MonthStart(now), after, f.PlanID, f.Status, f.IDPrefix, limit)
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	out, err := collect(rows, scanTenant)
	if err != nil {
		return nil, fmt.Errorf("listing tenants: %w", err)
	}
	return out, nil
}

// GetTenant returns tenant id, or an error wrapping tenant.ErrNotFound.
func (s *Store) GetTenant(ctx context.Context, id string, now time.Time) (TenantInfo, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, tenantInfoSQL+` WHERE t.id = $2`, MonthStart(now), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fmt.Errorf("tenant %q: %w", id, tenant.ErrNotFound)
	}
	if err != nil {
		return t, fmt.Errorf("reading tenant %q: %w", id, err)
	}
	return t, nil
}

// TenantPatch is a change of a tenant: nil fields stay as they are.
type TenantPatch struct {
	PlanID  *string
	Status  *string
	Plugins *tenant.PluginOverrides // a nil map: none
}

// UpdateTenant changes tenant id's fields set in p, in one transaction. An
// unknown tenant or plan is an error wrapping tenant.ErrNotFound.
func (s *Store) UpdateTenant(ctx context.Context, id string, p TenantPatch) error {
	var err error
	if p.PlanID != nil {
		err = errors.Join(err, checkID("plan", *p.PlanID))
	}
	if p.Status != nil {
		err = errors.Join(err, checkTenantStatus(*p.Status))
	}
	var plugins *string
	if p.Plugins != nil {
		raw, perr := encodePlugins(*p.Plugins)
		err = errors.Join(err, perr)
		plugins = &raw
	}
	if err != nil {
		return fmt.Errorf("updating tenant %q: %w", id, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "tenant.update", "tenant", id, tenantImage, []any{id}, func() error {
			tag, err := tx.Exec(ctx, `
UPDATE tenants SET plan_id = coalesce($2, plan_id), status = coalesce($3, status), plugins = coalesce($4::jsonb, plugins)
WHERE id = $1`, id, p.PlanID, p.Status, plugins)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("updating tenant %q: %w", id, classify(err))
	}
	return nil
}

// DeleteTenant deletes tenant id with its keys and its spend_month rows
// (they refer to it); its call log stays. It returns the hashes of the
// deleted keys, for the caller to evict (other replicas evict on the
// triggers' NOTIFY: key:<hash> for each key, tenant:<id>). An unknown
// tenant is an error wrapping tenant.ErrNotFound. Each key is audited as
// deleted, then the tenant.
func (s *Store) DeleteTenant(ctx context.Context, id string) ([]tenant.KeyHash, error) {
	var hashes []tenant.KeyHash
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		hashes = hashes[:0]
		return audited(ctx, tx, "tenant.delete", "tenant", id, tenantImage, []any{id}, func() error {
			rows, err := tx.Query(ctx, `
DELETE FROM api_keys WHERE tenant_id = $1 RETURNING id, key_hash, to_jsonb(api_keys) - 'key_hash'`, id)
			if err != nil {
				return err
			}
			var keys []Audit
			for rows.Next() {
				var (
					kid      string
					raw, img []byte
				)
				if err := rows.Scan(&kid, &raw, &img); err != nil {
					rows.Close()
					return err
				}
				var h tenant.KeyHash
				copy(h[:], raw)
				hashes = append(hashes, h)
				keys = append(keys, Audit{Action: "key.delete", Resource: "key", ResourceID: kid, Before: img})
			}
			if err := rows.Err(); err != nil {
				return err
			}
			for _, a := range keys {
				if err := insertAudit(ctx, tx, a); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `DELETE FROM spend_month WHERE tenant_id = $1`, id); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, `DELETE FROM tenants WHERE id = $1`, id)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("deleting tenant %q: %w", id, classifyDelete(err))
	}
	return hashes, nil
}

// KeyInfo is a key as the admin API lists it.
type KeyInfo struct {
	tenant.Key
	CreatedAt time.Time
	RevokedAt time.Time // zero: not revoked
}

// KeyFilter selects keys; empty fields select all. Status is "active" (not
// revoked; expired keys included), "revoked" or "expired".
type KeyFilter struct {
	TenantID, Status string
}

const keyInfoSQL = `
SELECT id, tenant_id, key_hash, prefix, status, expires_at,
       coalesce(rpm, 0), coalesce(tpm, 0), coalesce(max_tokens, 0),
       coalesce(budget_micros, 0), coalesce(budget_window, ''), created_at, revoked_at
FROM api_keys`

func scanKey(row pgx.Row) (KeyInfo, error) {
	var (
		k                  KeyInfo
		hash               []byte
		expires, revokedAt *time.Time
	)
	err := row.Scan(&k.ID, &k.TenantID, &hash, &k.Prefix, &k.Status, &expires,
		&k.Limits.RPM, &k.Limits.TPM, &k.Limits.MaxTokens, &k.Budget.LimitMicros, &k.Budget.Window, &k.CreatedAt, &revokedAt)
	if err != nil {
		return k, err
	}
	copy(k.Hash[:], hash)
	if expires != nil {
		k.ExpiresAt = expires.UTC()
	}
	if revokedAt != nil {
		k.RevokedAt = revokedAt.UTC()
	}
	k.CreatedAt = k.CreatedAt.UTC()
	return k, nil
}

// ListAllKeys returns up to limit keys matching f with ids after after, in
// id order.
func (s *Store) ListAllKeys(ctx context.Context, f KeyFilter, after string, limit int) ([]KeyInfo, error) {
	switch f.Status {
	case "", tenant.StatusActive, tenant.StatusRevoked, "expired":
	default:
		return nil, fmt.Errorf("listing keys: status %q: want active, revoked or expired: %w", f.Status, ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, keyInfoSQL+`
WHERE id > $1 AND ($2 = '' OR tenant_id = $2)
  AND ($3 = '' OR ($3 = 'expired' AND status = 'active' AND expires_at <= now()) OR ($3 <> 'expired' AND status = $3))
ORDER BY id LIMIT $4`, after, f.TenantID, f.Status, limit)
	if err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	out, err := collect(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	return out, nil
}

// GetKey returns key id's record, or an error wrapping tenant.ErrNotFound.
func (s *Store) GetKey(ctx context.Context, id string) (KeyInfo, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, keyInfoSQL+` WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return k, fmt.Errorf("key %q: %w", id, tenant.ErrNotFound)
	}
	if err != nil {
		return k, fmt.Errorf("reading key %q: %w", id, err)
	}
	return k, nil
}

// KeyPatch is a change of a key: nil fields stay as they are. A zero
// ExpiresAt means never, zero limits inherit the plan's, a zero Budget the
// plan's key budgets.
type KeyPatch struct {
	ExpiresAt *time.Time
	RPM       *int64
	TPM       *int64
	MaxTokens *int64
	Budget    *tenant.KeyBudget
}

// UpdateKey changes key id's fields set in p and returns the key as it is
// now (its hash for the caller's eviction). An unknown key is an error
// wrapping tenant.ErrNotFound.
func (s *Store) UpdateKey(ctx context.Context, id string, p KeyPatch) (KeyInfo, error) {
	var err error
	for _, v := range []*int64{p.RPM, p.TPM, p.MaxTokens} {
		if v != nil && *v < 0 {
			err = fmt.Errorf("negative limit %d: %w", *v, ErrInvalid)
		}
	}
	if p.Budget != nil {
		if berr := p.Budget.Check(); berr != nil {
			err = errors.Join(err, fmt.Errorf("budget: %v: %w", berr, ErrInvalid))
		}
	}
	if err != nil {
		return KeyInfo{}, fmt.Errorf("updating key %q: %w", id, err)
	}
	// Each column: $n is whether to set it, $n+1 the value (NULL: unset).
	set := func(v *int64) (bool, *int64) {
		if v == nil {
			return false, nil
		}
		return true, nullPositive(*v)
	}
	setRPM, rpm := set(p.RPM)
	setTPM, tpm := set(p.TPM)
	setMax, maxTok := set(p.MaxTokens)
	var expires *time.Time
	if p.ExpiresAt != nil {
		expires = nullTime(*p.ExpiresAt)
	}
	var budget *int64
	var window *string
	if p.Budget != nil {
		budget, window = keyBudgetColumns(*p.Budget)
	}
	var k KeyInfo
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "key.update", "key", id, keyImage, []any{id}, func() error {
			var err error
			k, err = scanKey(tx.QueryRow(ctx, `
UPDATE api_keys SET
    expires_at = CASE WHEN $2 THEN $3 ELSE expires_at END,
    rpm = CASE WHEN $4 THEN $5 ELSE rpm END,
    tpm = CASE WHEN $6 THEN $7 ELSE tpm END,
    max_tokens = CASE WHEN $8 THEN $9 ELSE max_tokens END,
    budget_micros = CASE WHEN $10 THEN $11 ELSE budget_micros END,
    budget_window = CASE WHEN $10 THEN $12 ELSE budget_window END
WHERE id = $1
RETURNING id, tenant_id, key_hash, prefix, status, expires_at,
       coalesce(rpm, 0), coalesce(tpm, 0), coalesce(max_tokens, 0),
       coalesce(budget_micros, 0), coalesce(budget_window, ''), created_at, revoked_at`,
				id, p.ExpiresAt != nil, expires, setRPM, rpm, setTPM, tpm, setMax, maxTok, p.Budget != nil, budget, window))
			if errors.Is(err, pgx.ErrNoRows) {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return KeyInfo{}, fmt.Errorf("updating key %q: %w", id, classify(err))
	}
	return k, nil
}

// DeleteKey deletes key id and returns its hash, for the caller to evict
// (other replicas evict on the trigger's NOTIFY key:<hash>). An unknown key
// is an error wrapping tenant.ErrNotFound.
func (s *Store) DeleteKey(ctx context.Context, id string) (tenant.KeyHash, error) {
	var h tenant.KeyHash
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "key.delete", "key", id, keyImage, []any{id}, func() error {
			var raw []byte
			err := tx.QueryRow(ctx, `DELETE FROM api_keys WHERE id = $1 RETURNING key_hash`, id).Scan(&raw)
			if errors.Is(err, pgx.ErrNoRows) {
				return tenant.ErrNotFound
			}
			copy(h[:], raw)
			return err
		})
	})
	if err != nil {
		return h, fmt.Errorf("deleting key %q: %w", id, classifyDelete(err))
	}
	return h, nil
}

// ListPrices returns up to limit admin prices in force at at (per model the
// one with the latest EffectiveFrom not after at), of models after after in
// name order; model, if not empty, selects that model alone. Source is
// "admin".
func (s *Store) ListPrices(ctx context.Context, model string, at time.Time, after string, limit int) ([]tenant.Price, error) {
	rows, err := s.pool.Query(ctx, `
SELECT DISTINCT ON (model) model, input_micros_per_mtok, output_micros_per_mtok, effective_from, `+priceExtraColumns+`, reasoning
FROM model_prices
WHERE effective_from <= $1 AND model > $2 AND ($3 = '' OR model = $3)
ORDER BY model, effective_from DESC
LIMIT $4`, at, after, model, limit)
	if err != nil {
		return nil, fmt.Errorf("listing prices: %w", err)
	}
	out, err := collect(rows, func(row pgx.Row) (tenant.Price, error) {
		p := tenant.Price{Source: "admin"}
		var extras [10]*int64
		var reasoning *bool
		dst := []any{&p.Model, &p.InputMicrosPerMTok, &p.OutputMicrosPerMTok, &p.EffectiveFrom}
		for i := range extras {
			dst = append(dst, &extras[i])
		}
		dst = append(dst, &reasoning)
		if err := row.Scan(dst...); err != nil {
			return p, err
		}
		for i, v := range priceExtras(&p) {
			if extras[i] != nil {
				*v = *extras[i]
			}
		}
		p.Reasoning = reasoning != nil && *reasoning
		p.EffectiveFrom = p.EffectiveFrom.UTC()
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing prices: %w", err)
	}
	return out, nil
}

// DeletePrice deletes every admin price of model (past, present and
// scheduled); the price catalog's, if it has one, applies again. None is an
// error wrapping tenant.ErrNotFound.
func (s *Store) DeletePrice(ctx context.Context, model string) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "price.delete", "price", model, pricesImage, []any{model}, func() error {
			tag, err := tx.Exec(ctx, `DELETE FROM model_prices WHERE model = $1`, model)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("deleting the prices of %q: %w", model, classifyDelete(err))
	}
	return nil
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// pgErrCode is the SQLSTATE of err, or "".
func pgErrCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
