// Package calllog is the durable ledger: one call_log row per proxied
// request, and the per-tenant monthly spend counter (spend_month), written
// in the same transaction by a group-commit Writer. It also holds Reconcile,
// which recomputes the counters from the log, MonthSpend, which seeds a
// fast counter (Redis, memory) of a tenant's month on a miss, and
// ScopeSpend and ActiveScopes, which sum the rows of a tenant's day, a
// key's or an end user's period (row.EndUser) to seed and reconcile the
// counters of those budgets.
//
// # Writing
//
// Write puts a Row on a bounded queue (Options.QueueSize) and returns. One
// goroutine takes everything queued, up to Options.MaxBatch rows, and writes
// it in one transaction: the counters it touches are created if missing
// (seeded from call_log) and locked, the rows inserted with one multi-row
// INSERT, and each counter raised by the cost of the rows actually
// inserted. The INSERT has no ON CONFLICT clause (it costs every row a
// speculative insertion); a batch holding a row that is stored already
// fails as a whole and is written again with ON CONFLICT (request_id,
// started_at) DO NOTHING. While that runs
// new rows queue up for the next transaction, so batches grow with the load
// and an idle writer adds no delay. A Write that finds the queue full
// stores its row itself (back-pressure; rows are never dropped).
//
// Rows are idempotent: writing one twice, from one Writer or two gateways
// or a spool replay, stores it and counts its cost once. ledger.go argues
// why the counters stay exact with several gateways writing at once.
//
// A row that Postgres rejects for its data (a tenant that does not exist, a
// value out of range) is found by splitting its batch, logged with its
// request id and counted in Stats.Rejected; the other rows are stored. A
// missing monthly partition of call_log is created and the batch retried.
//
// # When Postgres is unavailable
//
// A transaction that fails for any other reason (connection refused or
// lost, Options.TxTimeout passed, shutdown, missing schema) sends its rows
// to the spool, an append-only file in Options.SpoolDir of length-prefixed,
// CRC-32C-checked records. Every later row follows them there, so none
// passes a spooled one (except an inline Write whose own transaction was
// already under way, which may commit first). Postgres is probed every Options.RetryInterval;
// when it answers, the spool is replayed in order, MaxBatch rows per
// transaction, then emptied, and rows go to Postgres directly again. Rows
// that arrive during the replay wait in the queue; only a queue half full
// sends some to the end of the spool, never more than half a batch per
// replayed batch, so the replay ends however fast rows arrive (past that
// pace Write waits: back-pressure, not loss). The spool grows by about 200 bytes per row while Postgres is away. A Writer
// without a pool only spools (a gateway without Postgres). One Writer at a
// time may use a SpoolDir (flock).
//
// # Durability
//
// A row is durable once its transaction has committed in Postgres or its
// spool append has been fsynced. The spool is fsynced once per append —
// once per batch — before the writer takes its next batch, and before a
// Write that stored its row inline returns.
//
//   - Close returns only when every row that Write accepted before Close
//     began is durable. A shutdown that waits for Close loses nothing. If
//     Close's context ends first, Postgres is abandoned and the rest goes to
//     the spool, still fsynced before Close returns.
//   - A row made durable by Log first (the write-ahead log, wal.go, the
//     default: Options.WALMode) survives any crash of the process: its
//     record stays in SpoolDir/wal until the row is stored, and the next
//     New moves it into the spool, whose replay stores it once. The
//     proxy calls Log before a reply's last byte. What follows is about
//     rows written without Log (WALOff).
//   - A Write that queues its row returns before the row is durable: that
//     is what the queue is for. A hard crash of the process (SIGKILL, OOM
//     kill, a panic elsewhere, power loss) loses the queued rows and the
//     batch whose transaction or spool append had not completed. That is
//     at most QueueSize + MaxBatch rows (8192 + 1000 by default), and in
//     practice the rows of the last moments: the queue stays near empty
//     unless Postgres (or the spool's disk) is slower than the load. The
//     cost of lost rows is lost from spend_month too; Reconcile cannot
//     bring back what was never written.
//   - Nothing durable is lost by a crash. The spool outlives the process,
//     and New replays it. A crash in the middle of an append leaves a torn
//     last record, which the next New finds by its checksum, logs and cuts
//     off; the records before it are replayed. A crash in the middle of a
//     replay repeats the replay, and rows already stored are skipped.
//   - A spool on tmpfs (the default under os.TempDir() on some systems) does
//     not survive a reboot; give SpoolDir persistent storage in production.
//
// The only other loss is reported, never silent: a row that Postgres
// rejects (Stats.Rejected, logged), and rows that neither Postgres nor the
// spool took before Close gave up (ErrLost, Stats.Lost; only with a broken
// spool disk while Postgres is unavailable).
//
// # Reconciling
//
// Reconcile, normally run by StartReconciler every hour on every gateway
// (an advisory lock lets one at a time do the work), recomputes the counters
// of the current and the previous UTC month from call_log and corrects the
// ones that drifted, e.g. after a manual edit or rows written around the
// Writer. It locks each counter before summing, so a batch in progress is
// never mistaken for drift (see reconcileOne).
package calllog
