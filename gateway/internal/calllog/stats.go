package calllog

import (
	"math/bits"
	"sync/atomic"
)

// TxSizeBuckets is the number of buckets of Stats.TxSizes.
const TxSizeBuckets = 11

// Stats are a Writer's counters since New. Rows, Transactions and the
// rows-per-transaction figures count committed transactions of the writer
// goroutine, inline Writes and replays alike.
type Stats struct {
	// Rows in committed transactions, Duplicates included.
	Rows int64
	// Duplicates are rows Postgres already held (same request id and
	// start), skipped without adding their cost again.
	Duplicates int64
	// Transactions committed.
	Transactions int64
	// MaxTxRows is the largest committed transaction, in rows.
	MaxTxRows int64
	// TxSizes counts committed transactions by rows: bucket i holds those
	// of 2^i to 2^(i+1)-1 rows (1, 2–3, 4–7, …); the last bucket holds
	// 1024 rows and more.
	TxSizes [TxSizeBuckets]int64
	// InlineWrites are Writes that found the queue full and stored their
	// row themselves.
	InlineWrites int64
	// SpooledRows were appended to the spool; ReplayedRows were read back
	// from it and committed or rejected (a spool left by an earlier run
	// counts only in ReplayedRows).
	SpooledRows, ReplayedRows int64
	// Rejected rows were refused by Postgres for their data, logged and
	// not stored.
	Rejected int64
	// Lost rows were taken by neither Postgres nor the spool (see ErrLost).
	Lost int64
	// QueueDepth is the rows queued now.
	QueueDepth int
	// SpoolBytes is the spool's size now.
	SpoolBytes int64
	// WALRows were made durable by Log; WALRounds are the writes (each
	// with its fsync, in mode fsync) that did it: WALRows/WALRounds is
	// the group commit's size. WALBytes is the write-ahead log's disk use
	// now (rows not yet stored, and the current segment's).
	WALRows, WALRounds, WALBytes int64
	// Spooling is true while new rows go to the spool: Postgres was
	// unavailable and the spool has not been replayed yet, or there is no
	// pool.
	Spooling bool
}

// RowsPerTx is the mean rows per committed transaction.
func (s Stats) RowsPerTx() float64 {
	if s.Transactions == 0 {
		return 0
	}
	return float64(s.Rows) / float64(s.Transactions)
}

// counters are the Writer's atomics behind Stats.
type counters struct {
	rows, duplicates, transactions, maxTxRows atomic.Int64
	txSizes                                   [TxSizeBuckets]atomic.Int64
	inline, spooled, replayed, rejected, lost atomic.Int64
	spoolBytes                                atomic.Int64
	walRows, walRounds                        atomic.Int64
}

// committed counts a committed transaction of n rows, inserted of them new.
func (c *counters) committed(n int, inserted int64) {
	c.rows.Add(int64(n))
	c.duplicates.Add(int64(n) - inserted)
	c.transactions.Add(1)
	c.txSizes[min(bits.Len(uint(n))-1, TxSizeBuckets-1)].Add(1)
	for {
		m := c.maxTxRows.Load()
		if int64(n) <= m || c.maxTxRows.CompareAndSwap(m, int64(n)) {
			return
		}
	}
}

// Stats returns the Writer's counters. Each is read atomically; together
// they are not one snapshot.
func (w *Writer) Stats() Stats {
	c := &w.stats
	s := Stats{
		Rows: c.rows.Load(), Duplicates: c.duplicates.Load(),
		Transactions: c.transactions.Load(), MaxTxRows: c.maxTxRows.Load(),
		InlineWrites: c.inline.Load(), SpooledRows: c.spooled.Load(),
		ReplayedRows: c.replayed.Load(), Rejected: c.rejected.Load(), Lost: c.lost.Load(),
		QueueDepth: len(w.queue), SpoolBytes: c.spoolBytes.Load(), Spooling: w.spooling.Load(),
		WALRows: c.walRows.Load(), WALRounds: c.walRounds.Load(),
	}
	if w.wal != nil {
		s.WALBytes = w.wal.bytes.Load()
	}
	for i := range s.TxSizes {
		s.TxSizes[i] = c.txSizes[i].Load()
	}
	return s
}
