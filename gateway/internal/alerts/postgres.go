package alerts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the durable Outbox: table budget_alerts (migration 00010),
// shared by every gateway on the database. Times are the database's, so
// the gateways' clocks need not agree.
type Postgres struct {
	pool *pgxpool.Pool
}

var (
	_ Outbox = (*Postgres)(nil)
	_ Pruner = (*Postgres)(nil)
)

// NewPostgres returns the outbox in pool's database, which must be
// migrated.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

const addSQL = `INSERT INTO budget_alerts (id, tenant_id, scope_kind, scope_id, scope_window, period, threshold,
	reason, spent_micros, limit_micros, crossed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT DO NOTHING
RETURNING id`

// Add implements Outbox in one transaction.
func (p *Postgres) Add(ctx context.Context, alerts []Alert) ([]Alert, error) {
	var added []Alert
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		added = added[:0]
		b := &pgx.Batch{}
		for _, a := range alerts {
			b.Queue(addSQL, a.ID, a.Tenant, a.Kind, a.ScopeID, a.Window, a.Period, a.Threshold,
				a.Reason, a.Spent, a.Limit, a.At)
		}
		res := tx.SendBatch(ctx, b)
		for _, a := range alerts {
			var id string
			switch err := res.QueryRow().Scan(&id); err {
			case nil:
				added = append(added, a)
			case pgx.ErrNoRows: // stored already
			default:
				res.Close()
				return err
			}
		}
		return res.Close()
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23")) {
		return nil, fmt.Errorf("storing %d alerts: %w: %w", len(alerts), ErrRejected, err)
	}
	if err != nil {
		return nil, fmt.Errorf("storing %d alerts: %w", len(alerts), err)
	}
	return added, nil
}

// claimSQL leases due rows: SKIP LOCKED lets gateways claim at once without
// waiting for each other, and moving next_attempt_at past the lease keeps
// the rows from other claims until it ends (without holding a transaction
// open through the delivery).
const claimSQL = `UPDATE budget_alerts a
SET attempts = a.attempts + 1, next_attempt_at = now() + $2::bigint * interval '1 microsecond'
FROM (
	SELECT id FROM budget_alerts
	WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_attempt_at <= now()
	ORDER BY next_attempt_at
	LIMIT $1
	FOR UPDATE SKIP LOCKED
) due
WHERE a.id = due.id
RETURNING a.id, a.tenant_id, a.scope_kind, a.scope_id, a.scope_window, a.period, a.threshold, a.reason,
	a.spent_micros, a.limit_micros, a.crossed_at, a.attempts, extract(epoch FROM now() - a.created_at)::float8`

// Claim implements Outbox.
func (p *Postgres) Claim(ctx context.Context, n int, lease time.Duration) ([]Claimed, error) {
	rows, err := p.pool.Query(ctx, claimSQL, n, lease.Microseconds())
	if err != nil {
		return nil, fmt.Errorf("claiming alerts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		var age float64
		err := r.Scan(&c.ID, &c.Tenant, &c.Kind, &c.ScopeID, &c.Window, &c.Period, &c.Threshold, &c.Reason,
			&c.Spent, &c.Limit, &c.At, &c.Attempt, &age)
		c.At = c.At.UTC()
		c.Age = time.Duration(age * float64(time.Second))
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming alerts: %w", err)
	}
	return out, nil
}

// Delivered implements Outbox.
func (p *Postgres) Delivered(ctx context.Context, id string) error {
	_, err := p.pool.Exec(ctx, `UPDATE budget_alerts SET delivered_at = now(), last_error = NULL
		WHERE id = $1 AND delivered_at IS NULL`, id)
	if err != nil {
		return fmt.Errorf("marking alert %s delivered: %w", id, err)
	}
	return nil
}

// Failed implements Outbox. A row another gateway delivered meanwhile (its
// lease ended while this one's attempt ran) stays delivered.
func (p *Postgres) Failed(ctx context.Context, id, reason string, retryIn, maxAge time.Duration) (bool, error) {
	var gaveUp bool
	err := p.pool.QueryRow(ctx, `UPDATE budget_alerts SET last_error = $2,
			gave_up_at = CASE WHEN now() - created_at >= $4::bigint * interval '1 microsecond' THEN now() END,
			next_attempt_at = now() + $3::bigint * interval '1 microsecond'
		WHERE id = $1 AND delivered_at IS NULL AND gave_up_at IS NULL
		RETURNING gave_up_at IS NOT NULL`, id, reason, retryIn.Microseconds(), maxAge.Microseconds()).Scan(&gaveUp)
	if err == pgx.ErrNoRows {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("recording a failed delivery of alert %s: %w", id, err)
	}
	return gaveUp, nil
}

// Pending implements Outbox.
func (p *Postgres) Pending(ctx context.Context) (int64, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT count(*) FROM budget_alerts
		WHERE delivered_at IS NULL AND gave_up_at IS NULL`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting pending alerts: %w", err)
	}
	return n, nil
}

// Prune implements Pruner: it deletes the finished rows stored more than
// before ago.
func (p *Postgres) Prune(ctx context.Context, before time.Duration) (int64, error) {
	tag, err := p.pool.Exec(ctx, `DELETE FROM budget_alerts
		WHERE (delivered_at IS NOT NULL OR gave_up_at IS NOT NULL)
		AND created_at < now() - $1::bigint * interval '1 microsecond'`, before.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("pruning finished alerts: %w", err)
	}
	return tag.RowsAffected(), nil
}
