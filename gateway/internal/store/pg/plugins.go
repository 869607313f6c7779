package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// encodePlugins is the plugins column of overrides ovs ({} for none). A
// config must be a JSON object (a merge patch); anything else is an error
// wrapping ErrInvalid.
func encodePlugins(ovs tenant.PluginOverrides) (string, error) {
	for name, ov := range ovs {
		if name == "" {
			return "", fmt.Errorf("plugins: an empty plugin name: %w", ErrInvalid)
		}
		if ov.Config == nil {
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(ov.Config, &obj); err != nil || obj == nil {
			return "", fmt.Errorf("plugins.%s.config: must be a JSON object (a merge patch over the policy's config): %w", name, ErrInvalid)
		}
	}
	if len(ovs) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(ovs)
	if err != nil {
		return "", fmt.Errorf("plugins: %v: %w", err, ErrInvalid)
	}
	return string(b), nil
}

// decodePlugins reads a plugins column (nil for none).
func decodePlugins(raw []byte) (tenant.PluginOverrides, error) {
	var ovs tenant.PluginOverrides
	if err := json.Unmarshal(raw, &ovs); err != nil {
		return nil, fmt.Errorf("plugins column: %w", err)
	}
	if len(ovs) == 0 {
		return nil, nil
	}
	return ovs, nil
}

// PlanPlugins returns plan planID's plugin overrides (nil for none); an
// unknown plan is an error wrapping tenant.ErrNotFound.
func (s *Store) PlanPlugins(ctx context.Context, planID string) (tenant.PluginOverrides, error) {
	return s.readPlugins(ctx, `SELECT plugins FROM plans WHERE id = $1`, "plan", planID)
}

// TenantPlanPlugins returns the plugin overrides of tenant tenantID's
// plan; an unknown tenant is an error wrapping tenant.ErrNotFound.
func (s *Store) TenantPlanPlugins(ctx context.Context, tenantID string) (tenant.PluginOverrides, error) {
	return s.readPlugins(ctx, `SELECT p.plugins FROM tenants t JOIN plans p ON p.id = t.plan_id WHERE t.id = $1`, "tenant", tenantID)
}

func (s *Store) readPlugins(ctx context.Context, sql, what, id string) (tenant.PluginOverrides, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, sql, id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s %q: %w", what, id, tenant.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the plugins of %s %q: %w", what, id, err)
	}
	ovs, err := decodePlugins(raw)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", what, id, err)
	}
	return ovs, nil
}

// SetTenantPlugins replaces tenant tenantID's plugin overrides; an
// unknown tenant is an error wrapping tenant.ErrNotFound.
func (s *Store) SetTenantPlugins(ctx context.Context, tenantID string, ovs tenant.PluginOverrides) error {
	raw, err := encodePlugins(ovs)
	if err != nil {
		return fmt.Errorf("setting the plugins of tenant %q: %w", tenantID, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		return audited(ctx, tx, "tenant.update", "tenant", tenantID, tenantImage, []any{tenantID}, func() error {
			tag, err := tx.Exec(ctx, `UPDATE tenants SET plugins = $2 WHERE id = $1`, tenantID, raw)
			if err == nil && tag.RowsAffected() == 0 {
				err = tenant.ErrNotFound
			}
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("setting the plugins of tenant %q: %w", tenantID, classify(err))
	}
	return nil
}
