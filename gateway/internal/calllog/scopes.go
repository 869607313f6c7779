package calllog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kinds of ScopeSpend's scope; the budget scopes of the same names.
const (
	ScopeTenant = "tenant"
	ScopeKey    = "key"
	ScopeUser   = "user"
)

// scopeSumSQL sums one scope's call_log rows in [$3, $4): the tenant's, one
// key's or one end user's ($2), each read through its index (00004, 00009).
var scopeSumSQL = map[string]string{
	ScopeTenant: `
SELECT coalesce(sum(cost_micros), 0)::bigint FROM call_log
 WHERE tenant_id = $1 AND $2::text = '' AND started_at >= $3 AND started_at < $4`,
	ScopeKey: `
SELECT coalesce(sum(cost_micros), 0)::bigint FROM call_log
 WHERE tenant_id = $1 AND key_id = $2 AND started_at >= $3 AND started_at < $4`,
	ScopeUser: `
SELECT coalesce(sum(cost_micros), 0)::bigint FROM call_log
 WHERE tenant_id = $1 AND end_user = $2 AND started_at >= $3 AND started_at < $4`,
}

// ScopeSpend returns what a tenant (kind ScopeTenant, id ""), one of its
// keys (ScopeKey, the key id) or one of its end users (ScopeUser) spent in
// [from, to), in USD micros: the sum of the call_log rows that started in
// it. It is what a fast counter is seeded with for a scope other than the
// tenant's month (MonthSpend has a counter for that one). One statement,
// reading the rows of the scope in the window through an index; the cost
// grows with them (a busy key's month is its month of rows).
func ScopeSpend(ctx context.Context, pool *pgxpool.Pool, tenant, kind, id string, from, to time.Time) (int64, error) {
	q, ok := scopeSumSQL[kind]
	if !ok {
		return 0, fmt.Errorf("summing the spend of %q: unknown scope kind %q", tenant, kind)
	}
	var spent int64
	if err := pool.QueryRow(ctx, q, tenant, id, from, to).Scan(&spent); err != nil {
		return 0, fmt.Errorf("summing the spend of %s %q of tenant %q from %s: %w",
			kind, id, tenant, from.UTC().Format(time.RFC3339), err)
	}
	return spent, nil
}

// ScopeSum is one scope's spend in a window, from call_log.
type ScopeSum struct {
	Tenant string
	Kind   string // ScopeTenant, ScopeKey, ScopeUser
	ID     string // "" for ScopeTenant
	Window string // "month" or "day"
	From   time.Time
	Spent  int64
}

// activeScopesSQL lists, for the window [$1, $2) named $3 ("day" or
// "month"), the scopes of that window that some plan has a budget for and
// that have call_log rows in it, with their sums. A key's own budget
// (api_keys.budget_window) replaces its plan's key budgets. The tenant's
// monthly budget is spend_month's business (Reconcile), not listed here.
var activeScopesSQL = map[string]string{
	ScopeTenant: `
SELECT c.tenant_id, '', sum(c.cost_micros)::bigint
  FROM call_log c
  JOIN tenants t ON t.id = c.tenant_id
  JOIN plans p ON p.id = t.plan_id
 WHERE c.started_at >= $1 AND c.started_at < $2 AND $3::text <> 'month'
   AND p.budgets @> jsonb_build_array(jsonb_build_object('scope', 'tenant', 'window', $3::text))
 GROUP BY 1 ORDER BY 1`,
	ScopeKey: `
SELECT c.tenant_id, c.key_id, sum(c.cost_micros)::bigint
  FROM call_log c
  JOIN api_keys k ON k.id = c.key_id
  JOIN tenants t ON t.id = c.tenant_id
  JOIN plans p ON p.id = t.plan_id
 WHERE c.started_at >= $1 AND c.started_at < $2
   AND CASE WHEN k.budget_micros IS NOT NULL THEN k.budget_window = $3::text
            ELSE p.budgets @> jsonb_build_array(jsonb_build_object('scope', 'key', 'window', $3::text)) END
 GROUP BY 1, 2 ORDER BY 1, 2`,
	ScopeUser: `
SELECT c.tenant_id, c.end_user, sum(c.cost_micros)::bigint
  FROM call_log c
  JOIN tenants t ON t.id = c.tenant_id
  JOIN plans p ON p.id = t.plan_id
 WHERE c.started_at >= $1 AND c.started_at < $2 AND c.end_user IS NOT NULL
   AND p.budgets @> jsonb_build_array(jsonb_build_object('scope', 'user', 'window', $3::text))
 GROUP BY 1, 2 ORDER BY 1, 2`,
}

// ActiveScopes lists the key, end-user and tenant/day budgets of the
// current UTC day and month (those holding now) that have call_log rows,
// with the rows' sums: what a fast counter of each should hold. The
// reconcile job compares and corrects the counters with them. Scopes
// whose plan has no budget of their kind and window are left out. Cost:
// five statements, each grouping the window's rows (the month's for the
// monthly key and user budgets).
func ActiveScopes(ctx context.Context, pool *pgxpool.Pool, now time.Time) ([]ScopeSum, error) {
	now = now.UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := MonthStart(now)
	windows := []struct {
		name     string
		from, to time.Time
	}{{"day", day, day.AddDate(0, 0, 1)}, {"month", month, month.AddDate(0, 1, 0)}}
	var out []ScopeSum
	for _, kind := range []string{ScopeTenant, ScopeKey, ScopeUser} {
		for _, w := range windows {
			if kind == ScopeTenant && w.name == "month" {
				continue
			}
			rows, err := pool.Query(ctx, activeScopesSQL[kind], w.from, w.to, w.name)
			if err != nil {
				return out, fmt.Errorf("listing the %s budgets of %s: %w", kind, w.from.Format("2006-01-02"), err)
			}
			sums, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ScopeSum, error) {
				s := ScopeSum{Kind: kind, Window: w.name, From: w.from}
				return s, r.Scan(&s.Tenant, &s.ID, &s.Spent)
			})
			if err != nil {
				return out, fmt.Errorf("listing the %s budgets of %s: %w", kind, w.from.Format("2006-01-02"), err)
			}
			out = append(out, sums...)
		}
	}
	return out, nil
}
