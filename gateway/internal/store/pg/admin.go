package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// maxIDLen is the schema's cap on ids and model names (it keeps NOTIFY
// payloads small).
const maxIDLen = 200

// CreatePlan creates plan p. A taken id is an error wrapping ErrExists.
func (s *Store) CreatePlan(ctx context.Context, p tenant.Plan) error {
	if err := checkPlan(p); err != nil {
		return fmt.Errorf("creating plan: %w", err)
	}
	budgets, monthly, err := encodeBudgets(p)
	if err != nil {
		return fmt.Errorf("creating plan %q: %w", p.ID, err)
	}
	plugins, err := encodePlugins(p.Plugins)
	if err != nil {
		return fmt.Errorf("creating plan %q: %w", p.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "plan.create", "plan", p.ID, planImage, []any{p.ID}, func() error {
			_, err := tx.Exec(ctx, `
INSERT INTO plans (id, monthly_budget_micros, rpm, tpm, max_tokens, allowed_models, budgets, plugins)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
				p.ID, monthly, p.RPM, p.TPM, p.MaxTokens, nonNil(p.AllowedModels), string(budgets), plugins)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("creating plan %q: %w", p.ID, classify(err))
	}
	return nil
}

// UpdatePlan replaces every field of plan p.ID with p's. An unknown id is an
// error wrapping tenant.ErrNotFound.
func (s *Store) UpdatePlan(ctx context.Context, p tenant.Plan) error {
	if err := checkPlan(p); err != nil {
		return fmt.Errorf("updating plan: %w", err)
	}
	budgets, monthly, err := encodeBudgets(p)
	if err != nil {
		return fmt.Errorf("updating plan %q: %w", p.ID, err)
	}
	plugins, err := encodePlugins(p.Plugins)
	if err != nil {
		return fmt.Errorf("updating plan %q: %w", p.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "plan.update", "plan", p.ID, planImage, []any{p.ID}, func() error {
			tag, err := tx.Exec(ctx, `
UPDATE plans SET monthly_budget_micros = $2, rpm = $3, tpm = $4, max_tokens = $5,
       allowed_models = $6, budgets = $7, plugins = $8, updated_at = now()
WHERE id = $1`,
				p.ID, monthly, p.RPM, p.TPM, p.MaxTokens, nonNil(p.AllowedModels), string(budgets), plugins)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("updating plan %q: %w", p.ID, classify(err))
	}
	return nil
}

// CreateTenant creates tenant t, active if t.Status is empty. A taken id is
// an error wrapping ErrExists, an unknown plan one wrapping
// tenant.ErrNotFound.
func (s *Store) CreateTenant(ctx context.Context, t tenant.Tenant) error {
	if t.Status == "" {
		t.Status = tenant.StatusActive
	}
	if err := errors.Join(checkID("tenant", t.ID), checkID("plan", t.PlanID), checkTenantStatus(t.Status)); err != nil {
		return fmt.Errorf("creating tenant: %w", err)
	}
	plugins, err := encodePlugins(t.Plugins)
	if err != nil {
		return fmt.Errorf("creating tenant %q: %w", t.ID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "tenant.create", "tenant", t.ID, tenantImage, []any{t.ID}, func() error {
			_, err := tx.Exec(ctx, `INSERT INTO tenants (id, status, plan_id, plugins) VALUES ($1, $2, $3, $4)`,
				t.ID, t.Status, t.PlanID, plugins)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("creating tenant %q on plan %q: %w", t.ID, t.PlanID, classify(err))
	}
	return nil
}

// SetTenantStatus sets the status of tenant id to tenant.StatusActive or
// tenant.StatusSuspended. An unknown id is an error wrapping
// tenant.ErrNotFound.
func (s *Store) SetTenantStatus(ctx context.Context, id, status string) error {
	if err := checkTenantStatus(status); err != nil {
		return fmt.Errorf("setting the status of tenant %q: %w", id, err)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "tenant.update", "tenant", id, tenantImage, []any{id}, func() error {
			tag, err := tx.Exec(ctx, `UPDATE tenants SET status = $2 WHERE id = $1`, id, status)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("setting the status of tenant %q: %w", id, classify(err))
	}
	return nil
}

// SetPrice records price p of p.Model from p.EffectiveFrom on, replacing a
// price of the same model and EffectiveFrom. Later prices of the model stay
// in force from their own EffectiveFrom.
func (s *Store) SetPrice(ctx context.Context, p tenant.Price) error {
	switch {
	case checkID("model", p.Model) != nil:
		return fmt.Errorf("setting a price: %w", checkID("model", p.Model))
	case p.InputMicrosPerMTok < 0 || p.OutputMicrosPerMTok < 0 || slices.ContainsFunc(priceExtras(&p), func(v *int64) bool { return *v < 0 }):
		return fmt.Errorf("setting the price of %q: negative price or bound: %w", p.Model, ErrInvalid)
	case p.EffectiveFrom.IsZero():
		return fmt.Errorf("setting the price of %q: no EffectiveFrom: %w", p.Model, ErrInvalid)
	}
	args := []any{p.Model, p.InputMicrosPerMTok, p.OutputMicrosPerMTok, p.EffectiveFrom}
	for _, v := range priceExtras(&p) {
		args = append(args, pgtype.Int8{Int64: *v, Valid: *v > 0})
	}
	args = append(args, pgtype.Bool{Bool: true, Valid: p.Reasoning})
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The audit names the model; the images carry effective_from.
		return audited(ctx, tx, "price.set", "price", p.Model, priceImage, []any{p.Model, p.EffectiveFrom}, func() error {
			_, err := tx.Exec(ctx, `
INSERT INTO model_prices (model, input_micros_per_mtok, output_micros_per_mtok, effective_from,
    `+priceExtraColumns+`, reasoning)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (model, effective_from) DO UPDATE
SET input_micros_per_mtok = excluded.input_micros_per_mtok,
    output_micros_per_mtok = excluded.output_micros_per_mtok,
    cached_input_micros_per_mtok = excluded.cached_input_micros_per_mtok,
    cache_write_micros_per_mtok = excluded.cache_write_micros_per_mtok,
    audio_input_micros_per_mtok = excluded.audio_input_micros_per_mtok,
    image_input_micros_per_mtok = excluded.image_input_micros_per_mtok,
    reasoning_micros_per_mtok = excluded.reasoning_micros_per_mtok,
    audio_output_micros_per_mtok = excluded.audio_output_micros_per_mtok,
    image_output_micros_per_mtok = excluded.image_output_micros_per_mtok,
    context_window = excluded.context_window,
    max_output_tokens = excluded.max_output_tokens,
    image_tokens = excluded.image_tokens,
    reasoning = excluded.reasoning`, args...)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("setting the price of %q: %w", p.Model, classify(err))
	}
	return nil
}

// priceExtraColumns are model_prices' optional columns in the order of
// priceExtras (00008_token_kinds.sql); NULL is 0, unset.
const priceExtraColumns = `cached_input_micros_per_mtok, cache_write_micros_per_mtok, audio_input_micros_per_mtok,
    image_input_micros_per_mtok, reasoning_micros_per_mtok, audio_output_micros_per_mtok, image_output_micros_per_mtok,
    context_window, max_output_tokens, image_tokens`

// priceExtras are p's fields of priceExtraColumns, in order.
func priceExtras(p *tenant.Price) []*int64 {
	return []*int64{&p.CachedInputMicrosPerMTok, &p.CacheWriteMicrosPerMTok, &p.AudioInputMicrosPerMTok,
		&p.ImageInputMicrosPerMTok, &p.ReasoningMicrosPerMTok, &p.AudioOutputMicrosPerMTok, &p.ImageOutputMicrosPerMTok,
		&p.ContextWindow, &p.MaxOutputTokens, &p.ImageTokens}
}

// Price returns the price of model in force at: the one with the latest
// EffectiveFrom not after at, or an error wrapping tenant.ErrNotFound.
// Its Source is "admin".
func (s *Store) Price(ctx context.Context, model string, at time.Time) (*tenant.Price, error) {
	p := &tenant.Price{Model: model, Source: "admin"}
	var extras [10]pgtype.Int8
	var reasoning pgtype.Bool
	dst := []any{&p.InputMicrosPerMTok, &p.OutputMicrosPerMTok, &p.EffectiveFrom}
	for i := range extras {
		dst = append(dst, &extras[i])
	}
	dst = append(dst, &reasoning)
	err := s.read(ctx, func() error {
		return s.pool.QueryRow(ctx, `
SELECT input_micros_per_mtok, output_micros_per_mtok, effective_from, `+priceExtraColumns+`, reasoning
FROM model_prices
WHERE model = $1 AND effective_from <= $2
ORDER BY effective_from DESC
LIMIT 1`, model, at).Scan(dst...)
	})
	for i, v := range priceExtras(p) {
		*v = extras[i].Int64 // 0 when NULL
	}
	p.Reasoning = reasoning.Bool
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("price of %q at %s: %w", model, at.UTC().Format(time.RFC3339), tenant.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the price of %q: %w", model, err)
	}
	p.EffectiveFrom = p.EffectiveFrom.UTC()
	return p, nil
}

// MonthUsage returns what tenant tenantID spent in the UTC calendar month
// holding month, in USD micros; 0 for a month (or tenant) without spend.
func (s *Store) MonthUsage(ctx context.Context, tenantID string, month time.Time) (int64, error) {
	var cost int64
	err := s.pool.QueryRow(ctx,
		`SELECT cost_micros FROM spend_month WHERE tenant_id = $1 AND month = $2`,
		tenantID, MonthStart(month)).Scan(&cost)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the spend of tenant %q in %s: %w", tenantID, MonthStart(month).Format("2006-01"), err)
	}
	return cost, nil
}

// TenantBudget returns the monthly budget of the tenant's plan in USD micros
// (0: none), or an error wrapping tenant.ErrNotFound.
func (s *Store) TenantBudget(ctx context.Context, tenantID string) (int64, error) {
	var micros int64
	err := s.pool.QueryRow(ctx,
		`SELECT p.monthly_budget_micros FROM tenants t JOIN plans p ON p.id = t.plan_id WHERE t.id = $1`,
		tenantID).Scan(&micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("tenant %q: %w", tenantID, tenant.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the budget of tenant %q: %w", tenantID, err)
	}
	return micros, nil
}

// EnsureCallLogPartition creates the call_log partition of the UTC calendar
// month holding month if it does not exist. It is safe to call from several
// gateways at once.
func (s *Store) EnsureCallLogPartition(ctx context.Context, month time.Time) error {
	if _, err := s.pool.Exec(ctx, ensurePartitionSQL, MonthStart(month).Format(time.DateOnly)); err != nil {
		return fmt.Errorf("ensuring the call_log partition of %s: %w", MonthStart(month).Format("2006-01"), err)
	}
	return nil
}

// ensurePartitionSQL takes the month as text (YYYY-MM-DD): the function takes
// a date, and the day must not shift with the session's time zone.
const ensurePartitionSQL = `SELECT tollgate_ensure_call_log_partition($1::date)`

// MonthStart returns midnight UTC of the first day of the UTC calendar month
// holding t: the key of spend_month and of call_log partitions.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func checkPlan(p tenant.Plan) error {
	err := errors.Join(checkID("plan", p.ID), checkLimits(p.Limits))
	if p.MonthlyBudgetMicros < 0 {
		err = errors.Join(err, fmt.Errorf("negative monthly budget: %w", ErrInvalid))
	}
	for _, m := range p.AllowedModels {
		if m == "" {
			err = errors.Join(err, fmt.Errorf("empty allowed model: %w", ErrInvalid))
		}
	}
	return err
}

func checkID(what, id string) error {
	if id == "" || len(id) > maxIDLen {
		return fmt.Errorf("%s id %q: want 1 to %d bytes: %w", what, id, maxIDLen, ErrInvalid)
	}
	return nil
}

func checkLimits(l tenant.Limits) error {
	if l.RPM < 0 || l.TPM < 0 || l.MaxTokens < 0 {
		return fmt.Errorf("negative limit in %+v: %w", l, ErrInvalid)
	}
	return nil
}

func checkTenantStatus(status string) error {
	if status != tenant.StatusActive && status != tenant.StatusSuspended {
		return fmt.Errorf("tenant status %q: want %q or %q: %w", status, tenant.StatusActive, tenant.StatusSuspended, ErrInvalid)
	}
	return nil
}

// nonNil returns s, or an empty slice for nil: pgx sends nil as NULL, and
// allowed_models is NOT NULL.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
