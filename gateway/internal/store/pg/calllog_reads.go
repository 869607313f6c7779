package pg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reads of the call log for the admin API: usage over time, the fleet's
// last minutes and the guards' actions. A request counts as an error when
// its status is 400 or more (or 0: it got no status), as a guard action when
// call_log.guard_action is set.

// UsageRow is one group of UsageOver's answer.
type UsageRow struct {
	Day              time.Time // UTC midnight
	TenantID         string    // set when grouped by tenant
	Model            string    // set when grouped by model
	Requests         int64
	Errors           int64
	PromptTokens     int64
	CompletionTokens int64
	CostMicros       int64
	GuardActions     int64
}

// UsageQuery selects and groups call log rows.
type UsageQuery struct {
	From, To time.Time // UTC days, both included
	TenantID string    // "": every tenant
	// ByDay, ByModel, ByTenant group the rows (none: one group).
	ByDay, ByModel, ByTenant bool
	Offset, Limit            int
}

// UsageOver sums the call log over q's days, grouped as q says, ordered by
// day, tenant and model; it reads the (tenant_id, started_at) index when q
// names a tenant, the call_log partitions of q's months otherwise.
func (s *Store) UsageOver(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	var cols, group []string
	day := `NULL::timestamptz`
	if q.ByDay {
		day = `date_trunc('day', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`
		group = append(group, "1")
	}
	tenantCol, modelCol := `''`, `''`
	if q.ByTenant {
		tenantCol = "tenant_id"
		group = append(group, "2")
	}
	if q.ByModel {
		modelCol = "model"
		group = append(group, "3")
	}
	cols = append(cols, day, tenantCol, modelCol)
	sql := `
SELECT ` + strings.Join(cols, ", ") + `, count(*),
       count(*) FILTER (WHERE status >= 400 OR status = 0),
       coalesce(sum(prompt_tokens), 0)::bigint, coalesce(sum(completion_tokens), 0)::bigint,
       coalesce(sum(cost_micros), 0)::bigint, count(guard_action)
FROM call_log
WHERE started_at >= $1 AND started_at < $2 AND ($3 = '' OR tenant_id = $3)`
	if len(group) > 0 {
		sql += ` GROUP BY ` + strings.Join(group, ", ") + ` ORDER BY ` + strings.Join(group, ", ")
	}
	sql += ` OFFSET $4 LIMIT $5`
	to := q.To.AddDate(0, 0, 1)
	rows, err := s.pool.Query(ctx, sql, q.From, to, q.TenantID, q.Offset, q.Limit)
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	out, err := collect(rows, func(row pgx.Row) (UsageRow, error) {
		var u UsageRow
		var d *time.Time
		err := row.Scan(&d, &u.TenantID, &u.Model, &u.Requests, &u.Errors, &u.PromptTokens, &u.CompletionTokens, &u.CostMicros, &u.GuardActions)
		if d != nil {
			u.Day = d.UTC()
		}
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading usage: %w", err)
	}
	// An empty range without GROUP BY still has its one row of zeros;
	// keep it only if it counts something.
	if len(group) == 0 && len(out) == 1 && out[0].Requests == 0 {
		out = out[:0]
	}
	return out, nil
}

// TenantRequests is a tenant's count in a window and its month's spend.
type TenantRequests struct {
	TenantID         string
	Requests         int64
	SpendMonthMicros int64
}

// Recent is the fleet's call log since a time.
type Recent struct {
	Requests, Errors, GuardActions int64
	// Top are the tenants with the most spend this month, up to the number
	// asked, with their requests in the window.
	Top []TenantRequests
	// SpendMonthMicros is every tenant's spend this month (spend_month).
	SpendMonthMicros int64
}

// RecentCalls reads the call log since since (every replica's rows that
// reached the ledger) and spend_month of since's month.
func (s *Store) RecentCalls(ctx context.Context, since time.Time, top int) (Recent, error) {
	var r Recent
	err := s.pool.QueryRow(ctx, `
SELECT count(*), count(*) FILTER (WHERE status >= 400 OR status = 0), count(guard_action)
FROM call_log WHERE started_at >= $1`, since).Scan(&r.Requests, &r.Errors, &r.GuardActions)
	if err != nil {
		return r, fmt.Errorf("reading the recent call log: %w", err)
	}
	month := MonthStart(since)
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(cost_micros), 0)::bigint FROM spend_month WHERE month = $1`, month).
		Scan(&r.SpendMonthMicros); err != nil {
		return r, fmt.Errorf("reading the month's spend: %w", err)
	}
	rows, err := s.pool.Query(ctx, `
SELECT s.tenant_id, s.cost_micros,
       (SELECT count(*) FROM call_log c WHERE c.tenant_id = s.tenant_id AND c.started_at >= $2)
FROM spend_month s WHERE s.month = $1
ORDER BY s.cost_micros DESC, s.tenant_id LIMIT $3`, month, since, top)
	if err != nil {
		return r, fmt.Errorf("reading the top tenants: %w", err)
	}
	r.Top, err = collect(rows, func(row pgx.Row) (TenantRequests, error) {
		var t TenantRequests
		return t, row.Scan(&t.TenantID, &t.SpendMonthMicros, &t.Requests)
	})
	if err != nil {
		return r, fmt.Errorf("reading the top tenants: %w", err)
	}
	return r, nil
}

// GuardAction is a call log row with a guard action.
type GuardAction struct {
	RequestID, TenantID, Model string
	StartedAt                  time.Time
	Action                     string
	Status                     int
}

// GuardActions returns up to limit call log rows with a guard action,
// newest first, older than (beforeAt, beforeID) when beforeAt is not zero;
// tenantID, if not empty, selects that tenant's. The partial index of
// migration 00014 serves it.
func (s *Store) GuardActions(ctx context.Context, tenantID string, beforeAt time.Time, beforeID string, limit int) ([]GuardAction, error) {
	var before *time.Time
	if !beforeAt.IsZero() {
		before = &beforeAt
	}
	rows, err := s.pool.Query(ctx, `
SELECT request_id, tenant_id, model, started_at, guard_action, status
FROM call_log
WHERE guard_action IS NOT NULL AND ($1 = '' OR tenant_id = $1)
  AND ($2::timestamptz IS NULL OR (started_at, request_id) < ($2, $3))
ORDER BY started_at DESC, request_id DESC
LIMIT $4`, tenantID, before, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("reading guard actions: %w", err)
	}
	out, err := collect(rows, func(row pgx.Row) (GuardAction, error) {
		var g GuardAction
		err := row.Scan(&g.RequestID, &g.TenantID, &g.Model, &g.StartedAt, &g.Action, &g.Status)
		g.StartedAt = g.StartedAt.UTC()
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading guard actions: %w", err)
	}
	return out, nil
}
