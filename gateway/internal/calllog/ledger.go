package calllog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A batch is written with three statements sent at once (pool.SendBatch):
// pgx runs a batch without transaction statements as one implicit
// transaction (see pgx.Conn.SendBatch), so the three commit or roll back
// together in one round trip.
//
// # Why the spend counters stay exact
//
// Invariant: spend_month(t, m) = SUM(call_log.cost_micros) of tenant t in
// month m, over committed rows — provided every transaction that adds
// call_log rows is a batch of this file (or Reconcile has run since one that
// was not).
//
//  1. ensureSpendSQL creates the (t, m) counters that do not exist yet,
//     seeded with the SUM over call_log, before the batch inserts anything:
//     the seed cannot contain this batch's rows. Two batches creating the
//     same counter at once are ordered by the primary key: the second
//     one's INSERT waits for the first transaction and then does nothing
//     (ON CONFLICT DO NOTHING), whatever its snapshot saw. A batch that
//     does create the counter saw no counter at all, committed or in
//     progress; every batch creates or finds the counter before it commits
//     rows, so no batch committed rows of (t, m) before it, and the seed
//     is only rows written some other way (history, a deleted counter) —
//     which is what it is for.
//  2. insertSQL inserts the rows with ON CONFLICT (request_id, started_at)
//     DO NOTHING and adds to the counters exactly the cost of the rows it
//     inserted (RETURNING), grouped by tenant and month. A row that another
//     batch (another Writer, a replay of the spool, a retry after an
//     ambiguous commit) already inserted, or is inserting, is not
//     returned: a concurrent insert of the same key waits for the other
//     transaction and then skips the row if it committed. So each row's
//     cost is added once, by the transaction that inserted it. A batch is
//     first tried with insertNewSQL, the same without ON CONFLICT: if a
//     row is stored already (or is being stored and then commits), the
//     whole batch fails with a unique violation and adds nothing, and it
//     is written again with insertSQL.
//  3. The addition is cost_micros = cost_micros + x, on a row locked by
//     lockSpendSQL: concurrent batches serialize on the counter and none
//     loses another's addition. The counters are locked in one order
//     (tenant, month) by every batch, so two batches with the same tenants
//     do not deadlock; a deadlock or serialization failure anyway (other
//     writers, a stricter default isolation level) rolls the whole batch
//     back and it is retried.
//  4. Rows and counter change in one transaction, so no reader, and no
//     crash, ever sees one without the other.
//
// Reconcile locks a counter before it sums call_log (see reconcileOne), so
// it never mistakes a batch in progress for drift.

// ensureSpendSQL creates the missing counters of a batch: $1 tenants, $2
// months (first day), $3 and $4 the months' bounds as timestamptz. The
// NOT EXISTS keeps the SUM from running when the counter exists.
const ensureSpendSQL = `
INSERT INTO spend_month (tenant_id, month, cost_micros)
SELECT k.tenant_id, k.month,
       (SELECT coalesce(sum(c.cost_micros), 0)
          FROM call_log c
         WHERE c.tenant_id = k.tenant_id
           AND c.started_at >= k.month_start AND c.started_at < k.month_end)
  FROM unnest($1::text[], $2::date[], $3::timestamptz[], $4::timestamptz[])
       AS k (tenant_id, month, month_start, month_end)
 WHERE NOT EXISTS (SELECT FROM spend_month s WHERE s.tenant_id = k.tenant_id AND s.month = k.month)
 ORDER BY k.tenant_id, k.month
ON CONFLICT (tenant_id, month) DO NOTHING`

// lockSpendSQL locks a batch's counters in (tenant, month) order: the
// LockRows step runs above the sort.
const lockSpendSQL = `
SELECT FROM spend_month s
 WHERE (s.tenant_id, s.month) IN (SELECT * FROM unnest($1::text[], $2::date[]))
 ORDER BY s.tenant_id, s.month
   FOR UPDATE OF s`

// insertSQL inserts a batch, one array per column, and adds the cost of the
// rows it inserted to their counters. It returns how many rows it
// inserted, how many counters those rows touch and how many it updated
// (the last two are equal: ensureSpendSQL created them).
const insertSQL = insertRowsSQL + `
    ON CONFLICT (request_id, started_at) DO NOTHING` + insertSpendSQL

// insertNewSQL is insertSQL without ON CONFLICT: a row already stored
// fails the whole batch with a unique violation (23505), and commit then
// writes the batch again with insertSQL. Rows are almost never stored
// twice (a spool replay after a crash or an ambiguous commit, a client
// reusing a request id in the same microsecond), and the speculative
// insertion ON CONFLICT needs costs Postgres about a quarter of a row's
// insert: 1000-row batches, 11.7 → 8.7 µs of backend CPU per row.
// Every row's cost is still added once: a batch that fails adds nothing.
const insertNewSQL = insertRowsSQL + insertSpendSQL

const insertRowsSQL = `
WITH ins AS (
    INSERT INTO call_log (request_id, tenant_id, key_id, model, upstream, status, started_at,
                          first_byte_ms, total_ms, prompt_tokens, completion_tokens,
                          cost_micros, guard_action, attempts, reply_bytes, end_user,
                          cached_input_tokens, cache_write_tokens, audio_input_tokens, image_input_tokens,
                          reasoning_tokens, audio_output_tokens, image_output_tokens,
                          cache, saved_micros)
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int4[],
                         $7::timestamptz[], $8::int8[], $9::int8[], $10::int8[], $11::int8[],
                         $12::int8[], $13::text[], $14::int4[], $15::int8[], $16::text[],
                         $17::int8[], $18::int8[], $19::int8[], $20::int8[], $21::int8[], $22::int8[], $23::int8[],
                         $24::text[], $25::int8[])`

const insertSpendSQL = `
    RETURNING tenant_id, started_at, cost_micros
), spent AS (
    SELECT tenant_id, date_trunc('month', started_at AT TIME ZONE 'UTC')::date AS month,
           sum(cost_micros)::bigint AS cost
      FROM ins
     GROUP BY 1, 2
), upd AS (
    UPDATE spend_month s SET cost_micros = s.cost_micros + spent.cost
      FROM spent
     WHERE s.tenant_id = spent.tenant_id AND s.month = spent.month
    RETURNING 1
)
SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM spent), (SELECT count(*) FROM upd)`

// genericPlansSQL makes the batch's other statements run on their
// prepared generic plans, for this transaction only. Left to choose,
// Postgres plans ensureSpendSQL and lockSpendSQL anew for every batch
// (their custom plans look cheaper than the generic ones), and that
// planning was most of a small batch's CPU: BenchmarkCommitCPU, rows=1,
// 550 → 180 µs of the backend's CPU per batch. The generic plans are the
// ones the custom plans would be (the arrays' contents do not change the
// shape: index lookups per element, run-time partition pruning).
const genericPlansSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`

// ensurePartitionSQL takes the month as text (YYYY-MM-DD), as store/pg
// does: the day must not shift with the session's time zone.
const ensurePartitionSQL = `SELECT tollgate_ensure_call_log_partition($1::date)`

// batchResult is what insertSQL reports.
type batchResult struct {
	inserted, counters, updated int64
}

// commitBatch writes rows and their spend in one transaction, with insert
// (insertSQL or insertNewSQL).
func commitBatch(ctx context.Context, pool *pgxpool.Pool, rows []Row, insert string) (batchResult, error) {
	keys := tenantMonths(rows)
	tenants := make([]string, len(keys))
	months := make([]time.Time, len(keys))
	ends := make([]time.Time, len(keys))
	for i, k := range keys {
		tenants[i], months[i], ends[i] = k.tenant, k.month, k.month.AddDate(0, 1, 0)
	}
	b := &pgx.Batch{}
	b.Queue(genericPlansSQL)
	b.Queue(ensureSpendSQL, tenants, months, months, ends)
	b.Queue(lockSpendSQL, tenants, months)
	b.Queue(insert, newColumns(rows).args()...)
	br := pool.SendBatch(ctx, b)
	var res batchResult
	_, err := br.Exec()
	for range 2 {
		if err == nil {
			_, err = br.Exec()
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&res.inserted, &res.counters, &res.updated)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// fault is what a failed batch says about its rows.
type fault int

const (
	// faultUnavailable: Postgres cannot take rows now (down, unreachable,
	// too slow, out of disk, missing schema): keep them and retry later.
	faultUnavailable fault = iota
	// faultRetry: a serialization failure or deadlock; retry at once.
	faultRetry
	// faultPartition: no call_log partition for a row's month.
	faultPartition
	// faultRow: Postgres rejected a value of some row (class 22 data
	// exception, 23 integrity, 54 limit): the batch must be split to find it.
	faultRow
)

// classify sorts err. Only an error that Postgres reports about the data
// is held against the rows; everything else (a network error, a timeout,
// an administrator shutdown, a missing table) is assumed to pass, so it
// never costs a row.
func classify(err error) fault {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return faultUnavailable
	}
	switch {
	case pgErr.Code == "23514" && pgErr.ConstraintName == "":
		// "no partition of relation found for row"; a violated CHECK
		// constraint names the constraint.
		return faultPartition
	case pgErr.Code == "40001" || pgErr.Code == "40P01":
		return faultRetry
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return faultRow
	}
	return faultUnavailable
}

// rowFault reports whether err, the last error of commit, blames the rows.
// A missing partition that creating it did not cure blames them too: the
// month is one Postgres cannot hold.
func rowFault(err error) bool {
	f := classify(err)
	return f == faultRow || f == faultPartition
}

// commitAttempts bounds how often commit tries one batch.
const commitAttempts = 3

// commit writes rows in one transaction, creating missing partitions and
// retrying serialization failures. It counts a committed transaction.
func (w *Writer) commit(ctx context.Context, rows []Row) error {
	insert := insertNewSQL
	for attempt := 1; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, w.opts.TxTimeout)
		res, err := commitBatch(tctx, w.pool, rows, insert)
		cancel()
		if err == nil {
			w.stats.committed(len(rows), res.inserted)
			if res.counters != res.updated {
				// Cannot happen: ensureSpendSQL created them and they are locked.
				w.log.Error("spend_month counters missing after a batch", "counters", res.counters, "updated", res.updated)
			}
			return nil
		}
		if insert == insertNewSQL && isUniqueViolation(err) {
			// A row of the batch is stored already: write it again,
			// skipping what is stored. Not an attempt of its own.
			insert = insertSQL
			attempt--
			continue
		}
		if attempt == commitAttempts {
			return err
		}
		switch classify(err) {
		case faultPartition:
			if perr := w.ensurePartitions(ctx, rows); perr != nil {
				return perr
			}
		case faultRetry:
		default:
			return err
		}
	}
}

// isUniqueViolation reports whether err is Postgres's unique_violation.
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// ensurePartitions creates the call_log partitions of rows' months.
func (w *Writer) ensurePartitions(ctx context.Context, rows []Row) error {
	for _, m := range monthsOf(rows) {
		month := m.Format(time.DateOnly)
		tctx, cancel := context.WithTimeout(ctx, w.opts.TxTimeout)
		_, err := w.pool.Exec(tctx, ensurePartitionSQL, month)
		cancel()
		if err != nil {
			return fmt.Errorf("ensuring the call_log partition of %s: %w", month[:7], err)
		}
		w.log.Info("created the call_log partition of a month", "month", month[:7])
	}
	return nil
}

// monthsOf returns the distinct months of rows.
func monthsOf(rows []Row) []time.Time {
	var out []time.Time
	for _, k := range tenantMonths(rows) {
		seen := false
		for _, m := range out {
			seen = seen || m.Equal(k.month)
		}
		if !seen {
			out = append(out, k.month)
		}
	}
	return out
}

// store writes rows to Postgres, in order, isolating rows that Postgres
// rejects for their data: a failed batch is split in halves until the bad
// row stands alone, then that row is logged and counted as rejected
// (O(bad rows × log n) transactions, not n). It returns how many leading
// rows are done (committed or rejected); fewer than all only with the
// error that stopped it, which means Postgres is unavailable.
func (w *Writer) store(ctx context.Context, rows []Row) (int, error) {
	err := w.commit(ctx, rows)
	switch {
	case err == nil:
		return len(rows), nil
	case !rowFault(err):
		return 0, err
	case len(rows) == 1:
		w.reject(&rows[0], err)
		return 1, nil
	}
	mid := len(rows) / 2
	n, err := w.store(ctx, rows[:mid])
	if err != nil {
		return n, err
	}
	n, err = w.store(ctx, rows[mid:])
	return mid + n, err
}

// reject logs a row Postgres will not take, with what identifies it (never
// any text of the request), and counts it.
func (w *Writer) reject(r *Row, err error) {
	w.stats.rejected.Add(1)
	w.log.Error("call-log row rejected by Postgres; it is not stored",
		"request_id", r.RequestID, "tenant", r.TenantID, "model", r.Model,
		"started_at", r.StartedAt.UTC(), "cost_micros", r.CostMicros, "err", err)
}
