package calllog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is the writer goroutine: the group commit. It takes whatever is
// queued, up to MaxBatch rows, and writes it in one transaction; rows that
// arrive meanwhile wait for the next, so batches grow with the load and an
// idle writer adds no delay.
func (w *Writer) run() {
	defer close(w.done)
	retry := time.NewTicker(w.opts.RetryInterval)
	defer retry.Stop()
	if w.sp.size > 0 {
		w.replay()
	}
	for {
		var tick <-chan time.Time
		if w.spooling.Load() && w.pool != nil {
			tick = retry.C
		}
		select {
		case r := <-w.queue:
			w.persist(w.fill(r, w.opts.MaxBatch))
		case req := <-w.handoff:
			w.takeHandoff(req)
		case <-tick:
			w.replay()
		case <-w.stop:
			w.drain()
			w.finish()
			return
		}
	}
}

// fill returns a batch of first and whatever else is queued or arrives
// within Linger, up to max rows. The batch is valid until the next fill.
//
// While it lingers the writer waits for the timer, not for each row:
// a receive per row would wake this goroutine once a request (a futex
// wake of another thread when the process was idle). Write signals full
// once fullAt rows are queued, and the writer then takes them at once.
func (w *Writer) fill(first Row, max int) []Row {
	w.buf = append(w.buf[:0], first)
	select {
	case <-w.full: // for rows queued so far, which take takes now
	default:
	}
	w.take(max)
	// Linger only for Postgres: a spooling writer is catching up.
	if w.opts.Linger <= 0 || len(w.buf) >= max || w.pool == nil || w.spooling.Load() {
		return w.buf
	}
	if w.linger == nil {
		w.linger = time.NewTimer(w.opts.Linger)
	} else {
		w.linger.Reset(w.opts.Linger)
	}
	defer w.linger.Stop()
	for len(w.buf) < max {
		select {
		case <-w.full:
			w.take(max)
		case <-w.linger.C:
			w.take(max)
			return w.buf
		case <-w.stop:
			return w.buf
		}
	}
	return w.buf
}

// take moves queued rows to w.buf, without waiting, up to max in all.
func (w *Writer) take(max int) {
	for len(w.buf) < max {
		select {
		case r := <-w.queue:
			w.buf = append(w.buf, r)
		default:
			return
		}
	}
}

// persist stores a batch: in Postgres unless the spool holds rows, else
// (or if Postgres fails) in the spool.
func (w *Writer) persist(rows []Row) {
	if w.pool != nil && !w.spooling.Load() {
		n, err := w.store(w.ctx, rows)
		w.release(rows[:n])
		if err == nil {
			return
		}
		w.log.Warn("Postgres unavailable; spooling call-log rows until it answers",
			"err", err, "rows", len(rows)-n, "spool", w.sp.path)
		rows = rows[n:]
	}
	_ = w.spoolRows(rows) // a loss is logged and counted; its rows stay in the WAL
}

// spoolHandoffs appends the rows of req and of every other waiting inline
// Write with one fsync, and answers them all.
func (w *Writer) spoolHandoffs(req handoffReq) {
	w.spoolHandoffsUpTo(req, w.opts.MaxBatch)
}

// spoolHandoffsUpTo is spoolHandoffs taking other waiting Writes only
// while the rows number fewer than max; it returns how many it appended.
func (w *Writer) spoolHandoffsUpTo(req handoffReq, max int) int {
	reqs := []handoffReq{req}
	rows := append([]Row(nil), req.rows...)
collect:
	for len(rows) < max {
		select {
		case r := <-w.handoff:
			reqs = append(reqs, r)
			rows = append(rows, r.rows...)
		default:
			break collect
		}
	}
	err := w.spoolRows(rows)
	for _, r := range reqs {
		r.done <- err
	}
	return len(rows)
}

// spoolRows appends rows to the spool, and from then on new rows follow
// them there until a replay has emptied it. If the append fails (a full or
// broken disk) it keeps the rows and retries every RetryInterval, Postgres
// first, until one takes them or the Writer is hurried, when they are lost:
// it returns ErrLost then.
func (w *Writer) spoolRows(rows []Row) error {
	w.spooling.Store(true)
	defer w.stuck.Store(false)
	for {
		err := w.sp.append(rows)
		if err == nil {
			w.stats.spooled.Add(int64(len(rows)))
			w.stats.spoolBytes.Store(w.sp.size)
			w.release(rows)
			return nil
		}
		w.stuck.Store(true)
		w.log.Error("cannot append to the spool; holding the rows and retrying", "err", err, "rows", len(rows))
		select {
		case <-time.After(w.opts.RetryInterval):
		case <-w.ctx.Done():
			w.stats.lost.Add(int64(len(rows)))
			w.log.Error("call-log rows lost: neither Postgres nor the spool took them before Close gave up",
				"rows", len(rows), "first_request_id", rows[0].RequestID)
			return fmt.Errorf("%w: %d rows (%w)", ErrLost, len(rows), err)
		}
		if w.pool != nil {
			// These rows may now pass rows in the spool; with the disk
			// failing, getting them stored comes first.
			n, err := w.store(w.ctx, rows)
			w.release(rows[:n])
			if err == nil {
				return nil
			}
			rows = rows[n:]
		}
	}
}

// replay probes Postgres and, if it answers, writes the spooled rows to it
// in order, MaxBatch at a time, then empties the spool and returns to
// writing to Postgres directly. If Postgres fails again it stops,
// remembering how far it got. Replaying a row twice (after a crash
// mid-replay) is harmless: see ledger.go.
//
// Rows that arrive meanwhile wait in the queue, newer than every spooled
// row, and go to Postgres when the replay is done. Only when the queue is
// half full does it move some of them to the end of the spool between
// batches, and then at most half a batch, so Write need not wait while the
// queue has room and the spool still shrinks by at least half a batch per
// transaction: the replay ends however fast rows arrive. When arrivals
// outpace that, the queue fills and Write waits for the loop
// (back-pressure), at most until the replay ends.
func (w *Writer) replay() {
	if w.pool == nil || w.ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(w.ctx, w.opts.TxTimeout)
	err := w.pool.Ping(pctx)
	cancel()
	if err != nil {
		w.log.Debug("Postgres still unavailable", "err", err)
		return
	}
	start := time.Now()
	var replayed int64
	for {
		rows, ends, rerr := w.sp.read(w.replayOff, w.opts.MaxBatch)
		if len(rows) > 0 {
			n, err := w.store(w.ctx, rows)
			w.stats.replayed.Add(int64(n))
			replayed += int64(n)
			if n > 0 {
				w.replayOff = ends[n-1]
			}
			if err != nil {
				w.log.Warn("spool replay interrupted; retrying later", "err", err,
					"replayed", replayed, "left_bytes", w.sp.size-w.replayOff)
				return
			}
		}
		switch {
		case rerr != nil && !errors.Is(rerr, errBadRecord):
			w.log.Error("cannot read the spool; retrying later", "err", rerr)
			return
		case rerr != nil:
			// New cut off a torn tail; a bad record now means the disk
			// damaged the file. What follows it cannot be read.
			w.log.Error("spool damaged; discarding its unreadable rest", "err", rerr,
				"bytes", w.sp.size-w.replayOff)
		}
		// A short read is the end of the spool: only this goroutine
		// appends to it.
		if rerr != nil || len(rows) < w.opts.MaxBatch {
			if err := w.sp.truncate(0); err != nil {
				w.log.Error("cannot empty the replayed spool; retrying later", "err", err)
				return
			}
			w.replayOff = 0
			w.stats.spoolBytes.Store(0)
			w.spooling.Store(false)
			w.log.Info("spool replayed to Postgres", "rows", replayed, "duration", time.Since(start))
			return
		}
		if 2*len(w.queue) >= cap(w.queue) {
			w.absorb(max(w.opts.MaxBatch/2, 1))
		}
	}
}

// absorb moves to the spool, without waiting, up to about budget rows:
// queued rows first, then those of waiting inline Writes (a Write's rows
// are never split, so the last one taken may pass the budget by its own).
func (w *Writer) absorb(budget int) {
	select {
	case r := <-w.queue:
		rows := w.fill(r, budget)
		budget -= len(rows)
		_ = w.spoolRows(rows)
	default:
	}
	if budget <= 0 {
		return
	}
	select {
	case req := <-w.handoff:
		w.spoolHandoffsUpTo(req, budget)
	default:
	}
}

// takeHandoff stores the rows of an inline Write that found the queue
// full: in Postgres if the Writer is not spooling (the spool was replayed
// while it waited), else, or if Postgres fails, in the spool.
func (w *Writer) takeHandoff(req handoffReq) {
	if w.pool == nil || w.spooling.Load() {
		w.spoolHandoffs(req)
		return
	}
	n, err := w.store(w.ctx, req.rows)
	w.release(req.rows[:n])
	if err == nil {
		req.done <- nil
		return
	}
	w.log.Warn("Postgres unavailable; spooling call-log rows until it answers",
		"err", err, "rows", len(req.rows)-n, "spool", w.sp.path)
	req.done <- w.spoolRows(req.rows[n:])
}

// drain stores what is queued when Close has stopped the Writes.
func (w *Writer) drain() {
	if w.spooling.Load() {
		w.replay()
	}
	for {
		select {
		case r := <-w.queue:
			w.persist(w.fill(r, w.opts.MaxBatch))
		default:
			return
		}
	}
}

// finish closes the write-ahead log and the spool and releases the
// directory.
func (w *Writer) finish() {
	var err error
	if w.wal != nil {
		// Rows lost keep their records: the next New stores them.
		if werr := w.wal.close(); werr != nil {
			err = fmt.Errorf("closing the write-ahead log: %w", werr)
		}
	}
	err = errors.Join(err, w.sp.close())
	if cerr := w.lock.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("releasing the spool lock: %w", cerr))
	}
	if lost := w.stats.lost.Load(); lost > 0 {
		err = errors.Join(fmt.Errorf("%w: %d rows", ErrLost, lost), err)
	}
	w.stats.spoolBytes.Store(w.sp.size)
	w.closeErr = err
	w.hurry() // release the context
}
