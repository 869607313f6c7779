package calllog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPostgresKilledDuringLoad: Postgres is killed while 8 goroutines
// write; rows go to the spool, and when Postgres is back they are replayed:
// every row is stored once and every counter is exact.
func TestPostgresKilledDuringLoad(t *testing.T) {
	t.Parallel()
	s := killDuringLoad(t, Options{RetryInterval: 20 * time.Millisecond, TxTimeout: 3 * time.Second}, 200*time.Microsecond)
	if s.SpooledRows == 0 || s.ReplayedRows != s.SpooledRows {
		t.Errorf("SpooledRows %d, ReplayedRows %d; want equal, non-zero", s.SpooledRows, s.ReplayedRows)
	}
}

// TestReplayEndsUnderSaturatingLoad: writers that never pause, a queue of
// 64 rows and batches of 16. While the spool is replayed the queue is kept
// full, so rows move to the spool between batches and Writes wait; the
// replay must still end (the spool shrinks by half a batch per transaction
// at least) and fresh rows reach Postgres directly afterwards.
func TestReplayEndsUnderSaturatingLoad(t *testing.T) {
	t.Parallel()
	s := killDuringLoad(t, Options{RetryInterval: 20 * time.Millisecond, TxTimeout: 3 * time.Second,
		QueueSize: 64, MaxBatch: 16}, 0)
	if s.ReplayedRows != s.SpooledRows || s.InlineWrites == 0 {
		t.Errorf("SpooledRows %d, ReplayedRows %d, InlineWrites %d; want equal, and Writes that found the queue full",
			s.SpooledRows, s.ReplayedRows, s.InlineWrites)
	}
}

// killDuringLoad writes from 8 goroutines (pausing pause between rows),
// kills Postgres once 300 rows are committed, starts it again once 200 are
// spooled, waits for 300 rows to be committed directly after that, then
// stops the writers and checks that every row is stored once, every counter
// is exact and the spool is gone. It returns the final stats.
func killDuringLoad(t *testing.T, opts Options, pause time.Duration) Stats {
	srv := startServer(t)
	pool := newPool(t, srv.DSN())
	w := newWriter(t, pool, opts)

	var written atomic.Int64
	var mu sync.Mutex
	want := map[string]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			sums := map[string]int64{}
			defer func() {
				mu.Lock()
				for k, v := range sums {
					want[k] += v
				}
				mu.Unlock()
			}()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := row(fmt.Sprintf("k-%d-%d", g, i), tenants[(g+i)%len(tenants)], int64(1+i%10)*100)
				if err := w.Write(t.Context(), r); err != nil {
					t.Error(err)
					return
				}
				written.Add(1)
				sums[r.TenantID] += r.CostMicros
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		})
	}
	defer func() {
		// Any early return (a failed wait) must still stop the writers
		// before the Writer is closed under them.
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitFor(t, 20*time.Second, "300 committed rows", func() bool { return w.Stats().Rows >= 300 })
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "200 spooled rows", func() bool { return w.Stats().SpooledRows >= 200 })
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	atRestart := w.Stats()
	waitFor(t, 30*time.Second, "300 rows committed directly after the restart", func() bool {
		s := w.Stats()
		return s.Rows-s.ReplayedRows >= atRestart.Rows-atRestart.ReplayedRows+300
	})
	close(stop)
	wg.Wait()
	waitFor(t, 20*time.Second, "the spool to be replayed", func() bool { return !w.Stats().Spooling })
	closeWriter(t, w)

	s := w.Stats()
	t.Logf("written %d; at the restart %d spooled; stats %+v", written.Load(), atRestart.SpooledRows, s)
	if n := countRows(t, pool); n != written.Load() {
		t.Errorf("%d call_log rows, want %d", n, written.Load())
	}
	checkLedger(t, pool, thisMonth, want)
	if s.Lost != 0 || s.Rejected != 0 {
		t.Errorf("Lost %d, Rejected %d; want 0", s.Lost, s.Rejected)
	}
	if _, err := os.Stat(filepath.Join(w.opts.SpoolDir, SpoolFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the empty spool was not removed: %v", err)
	}
	return s
}

// TestCloseWhilePostgresDown: Close with Postgres stopped leaves the rows
// in the spool; a new Writer on the same directory replays them once
// Postgres is back.
func TestCloseWhilePostgresDown(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	dir := t.TempDir()
	pool := newPool(t, srv.DSN())
	w1 := newWriter(t, pool, Options{SpoolDir: dir, RetryInterval: 20 * time.Millisecond})
	for i := range 50 {
		write(t, w1, row(fmt.Sprintf("before-%d", i), "acme", 10))
	}
	waitFor(t, 10*time.Second, "50 committed rows", func() bool { return w1.Stats().Rows == 50 })
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		write(t, w1, row(fmt.Sprintf("after-%d", i), []string{"acme", "globex"}[i%2], 1000))
	}
	closeWriter(t, w1)
	s1 := w1.Stats()
	fi, err := os.Stat(filepath.Join(dir, SpoolFileName))
	if err != nil {
		t.Fatalf("no spool after Close with Postgres down: %v", err)
	}
	if s1.SpooledRows != 120 || s1.Lost != 0 || fi.Size() != s1.SpoolBytes || fi.Size() == 0 {
		t.Fatalf("SpooledRows %d (want 120), Lost %d, spool %d bytes (stats %d)", s1.SpooledRows, s1.Lost, fi.Size(), s1.SpoolBytes)
	}
	t.Logf("120 rows spooled in %d bytes", fi.Size())

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// A restarted gateway: a new pool, the same spool directory.
	pool2 := newPool(t, srv.DSN())
	w2 := newWriter(t, pool2, Options{SpoolDir: dir, RetryInterval: 20 * time.Millisecond})
	waitFor(t, 20*time.Second, "the replay", func() bool { return w2.Stats().ReplayedRows == 120 && !w2.Stats().Spooling })
	closeWriter(t, w2)
	if n := countRows(t, pool2); n != 170 {
		t.Errorf("%d rows, want 170", n)
	}
	checkLedger(t, pool2, thisMonth, map[string]int64{"acme": 500 + 60*1000, "globex": 60 * 1000})
	if _, err := os.Stat(filepath.Join(dir, SpoolFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spool still there after the replay: %v", err)
	}
}

// TestCloseHurried: when Close's context ends while Postgres does not
// answer, the queue goes to the spool at once and Close still returns
// only after the fsync.
func TestCloseHurried(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	w := newWriter(t, pool, Options{QueueSize: 1000})
	plug(t, pool, w, "acme") // never released: the writer hangs on it
	for i := range 300 {
		write(t, w, row(fmt.Sprintf("h-%d", i), "globex", 1))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	s := w.Stats()
	// The plug row's transaction was cancelled too: it is spooled with the rest.
	if s.SpooledRows != 301 || took > 5*time.Second {
		t.Errorf("Close took %v and spooled %d rows; want 301 spooled, well before TxTimeout", took, s.SpooledRows)
	}
	sp, err := openSpool(w.opts.SpoolDir)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.f.Close()
	rows, _, err := sp.read(0, 1000)
	if err != nil || len(rows) != 301 {
		t.Errorf("spool holds %d rows (%v), want 301", len(rows), err)
	}
}
