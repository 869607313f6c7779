package calllog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ReconcileLockKey is the key of the session-level advisory lock
// (pg_try_advisory_lock) that Reconcile holds while it runs, so one
// gateway of many reconciles at a time.
const ReconcileLockKey int64 = 0x7467_7265_636f_6e63 // "tgreconc"

// sumSQL is a tenant's spend in one month, from the log: $2 and $3 are the
// month's bounds.
const sumSQL = `
SELECT coalesce(sum(cost_micros), 0)::bigint
  FROM call_log
 WHERE tenant_id = $1 AND started_at >= $2 AND started_at < $3`

// MonthSpend returns tenant's spend in the UTC calendar month holding
// month, in USD micros: the spend_month counter, or if there is none the
// sum of the month's call_log rows (0 if none). It is what a fast counter
// (Redis, memory) is seeded with on a miss; it runs one statement.
func MonthSpend(ctx context.Context, pool *pgxpool.Pool, tenant string, month time.Time) (int64, error) {
	m := MonthStart(month)
	var spent int64
	// coalesce evaluates the sum only when there is no counter.
	err := pool.QueryRow(ctx, `
SELECT coalesce(
    (SELECT cost_micros FROM spend_month WHERE tenant_id = $1 AND month = $2),
    (SELECT coalesce(sum(cost_micros), 0)::bigint
       FROM call_log
      WHERE tenant_id = $1 AND started_at >= $3 AND started_at < $4))`,
		tenant, m, m, m.AddDate(0, 1, 0)).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("reading the spend of tenant %q in %s: %w", tenant, m.Format("2006-01"), err)
	}
	return spent, nil
}

// ReconcileResult is what one Reconcile did.
type ReconcileResult struct {
	// Ran is false if another session held the lock: nothing was checked.
	Ran bool
	// Checked is the number of tenant-months compared.
	Checked int
	// Drifts are the counters that differed from the log, now corrected.
	Drifts []Drift
}

// Drift is a spend_month counter that differed from its call_log rows.
type Drift struct {
	Tenant  string
	Month   time.Time // first day, UTC
	Counter int64     // the counter before the correction; 0 if it was missing
	Actual  int64     // the sum of call_log, now the counter
}

// Reconcile recomputes the spend_month counters of the UTC calendar month
// holding now and of the month before from call_log, and corrects those
// that differ. It checks every tenant with a counter or a call_log row in
// the month; for each it calls fix(tenant, month, spent) with the spend it
// found, corrected or not, so the caller can reset a fast counter. fix runs
// while Reconcile holds its lock and must be quick; nil means none.
//
// If another session holds ReconcileLockKey, Reconcile returns at once with
// Ran false. A tenant-month that fails for its data (e.g. a call_log row
// of a tenant that no longer exists) is skipped and reported in the error,
// which then comes with the rest of the result; a connection failure ends
// Reconcile.
//
// Cost: per month, one scan of the month's call_log index for the tenants,
// then per tenant one transaction of four or five statements whose sum
// reads the tenant's rows of the month.
func Reconcile(ctx context.Context, pool *pgxpool.Pool, now time.Time, fix func(tenant string, month time.Time, spent int64)) (ReconcileResult, error) {
	var res ReconcileResult
	// The lock belongs to the session: every statement runs on this conn.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("reconcile: acquiring a connection: %w", err)
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, ReconcileLockKey).Scan(&res.Ran); err != nil {
		return res, fmt.Errorf("reconcile: taking the lock: %w", err)
	}
	if !res.Ran {
		return res, nil
	}
	defer unlock(conn)

	var errs []error
	cur := MonthStart(now)
	for _, month := range []time.Time{cur.AddDate(0, -1, 0), cur} {
		tenants, err := tenantsOf(ctx, conn, month)
		if err != nil {
			return res, errors.Join(append(errs, err)...)
		}
		for _, tenant := range tenants {
			counter, actual, err := reconcileOne(ctx, conn, tenant, month)
			if err != nil {
				err = fmt.Errorf("reconciling tenant %q in %s: %w", tenant, month.Format("2006-01"), err)
				if !rowFault(err) {
					return res, errors.Join(append(errs, err)...)
				}
				errs = append(errs, err)
				continue
			}
			res.Checked++
			if counter != actual {
				res.Drifts = append(res.Drifts, Drift{Tenant: tenant, Month: month, Counter: counter, Actual: actual})
			}
			if fix != nil {
				fix(tenant, month, actual)
			}
		}
	}
	return res, errors.Join(errs...)
}

// unlock releases the reconcile lock. If it cannot, it closes the
// connection, which ends the session and with it the lock, rather than
// return a connection to the pool that still holds it.
func unlock(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ReconcileLockKey); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// tenantsOf lists the tenants with a counter or a call_log row in month.
func tenantsOf(ctx context.Context, conn *pgxpool.Conn, month time.Time) ([]string, error) {
	rows, err := conn.Query(ctx, `
SELECT tenant_id FROM spend_month WHERE month = $1
UNION
SELECT tenant_id FROM call_log WHERE started_at >= $2 AND started_at < $3
ORDER BY 1`, month, month, month.AddDate(0, 1, 0))
	if err != nil {
		return nil, fmt.Errorf("listing the tenants of %s: %w", month.Format("2006-01"), err)
	}
	tenants, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing the tenants of %s: %w", month.Format("2006-01"), err)
	}
	return tenants, nil
}

// reconcileOne corrects one counter. It locks the counter (creating it if
// missing) before it sums the log, in READ COMMITTED, where each statement
// sees what was committed before it began:
//
//   - a batch that locked the counter first has committed by the time the
//     lock is granted, so the sum, a later statement, includes its rows,
//     and the counter its cost;
//   - a batch that comes later waits for the lock before it adds to the
//     counter and has not committed, so the sum excludes its rows; it adds
//     its cost on top of the corrected value.
//
// Summing first would let a batch commit in between, counted in the
// counter but not in the sum, and the "correction" would undo it. Under
// REPEATABLE READ the sum would see the snapshot of the first statement,
// taken before the lock wait: hence the explicit isolation level.
func reconcileOne(ctx context.Context, conn *pgxpool.Conn, tenant string, month time.Time) (counter, actual int64, err error) {
	opts := pgx.TxOptions{IsoLevel: pgx.ReadCommitted}
	err = pgx.BeginTxFunc(ctx, conn, opts, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
INSERT INTO spend_month (tenant_id, month, cost_micros) VALUES ($1, $2, 0)
ON CONFLICT (tenant_id, month) DO NOTHING`, tenant, month); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `
SELECT cost_micros FROM spend_month WHERE tenant_id = $1 AND month = $2 FOR UPDATE`,
			tenant, month).Scan(&counter); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, sumSQL, tenant, month, month.AddDate(0, 1, 0)).Scan(&actual); err != nil {
			return err
		}
		if counter == actual {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE spend_month SET cost_micros = $3 WHERE tenant_id = $1 AND month = $2`,
			tenant, month, actual)
		return err
	})
	return counter, actual, err
}

// Reconciler runs Reconcile periodically; see StartReconciler.
type Reconciler struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartReconciler runs Reconcile at once and then every interval (0 means
// an hour) until Stop, logging each drift and error to log (nil:
// slog.Default()) and passing each result to onResult (may be nil), e.g.
// to export the drift as a metric. fix is passed to Reconcile. Of many
// gateways running one, one at a time reconciles; the others' runs return
// Ran false.
func StartReconciler(pool *pgxpool.Pool, interval time.Duration, fix func(tenant string, month time.Time, spent int64), log *slog.Logger, onResult func(ReconcileResult)) *Reconciler {
	if interval <= 0 {
		interval = time.Hour
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "calllog.reconcile")
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reconciler{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			res, err := Reconcile(ctx, pool, time.Now(), fix)
			if err != nil && ctx.Err() == nil {
				log.Error("reconcile failed", "err", err)
			}
			for _, d := range res.Drifts {
				log.Warn("spend counter drifted from the call log; corrected",
					"tenant", d.Tenant, "month", d.Month.Format("2006-01"),
					"counter", d.Counter, "actual", d.Actual, "drift", d.Actual-d.Counter)
			}
			if res.Ran {
				log.Debug("reconciled", "checked", res.Checked, "drifts", len(res.Drifts))
			}
			if onResult != nil && ctx.Err() == nil {
				onResult(res)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// Stop stops the Reconciler, cancelling a run in progress, and waits for
// it. It may be called more than once.
func (r *Reconciler) Stop() {
	r.cancel()
	<-r.done
}
