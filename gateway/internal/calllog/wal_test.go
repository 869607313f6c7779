package calllog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// logRows makes rows durable in w's write-ahead log and returns them with
// their marks.
func logRows(t *testing.T, w *Writer, rows []Row) []Row {
	t.Helper()
	out := make([]Row, len(rows))
	var wg sync.WaitGroup
	errs := make([]error, len(rows))
	for i := range rows {
		out[i] = rows[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.Log(&out[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Log(%s): %v", rows[i].RequestID, err)
		}
		if out[i].WAL == (Mark{}) {
			t.Fatalf("Log(%s) set no mark", rows[i].RequestID)
		}
	}
	return out
}

// crashCopy copies the write-ahead log of a running Writer's dir into a
// fresh spool directory, as a SIGKILL would leave it, plus tail bytes
// appended to its last segment (a torn append).
func crashCopy(t *testing.T, dir string, tail []byte) string {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, WALDirName))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments: %v %v", segs, err)
	}
	dst := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dst, WALDirName), 0o700); err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		b, err := os.ReadFile(filepath.Join(dir, WALDirName, segmentName(s)))
		if err != nil {
			t.Fatal(err)
		}
		if i == len(segs)-1 {
			b = append(b, tail...)
		}
		if err := os.WriteFile(filepath.Join(dst, WALDirName, segmentName(s)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestWALRecoversAfterCrash: rows logged but never written (the process
// died) are stored by the next Writer, each once, their cost counted once
// even for rows Postgres held already; a torn last record is ignored.
func TestWALRecoversAfterCrash(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	dir := t.TempDir()
	w1 := newWriter(t, nil, Options{SpoolDir: dir, WALSegmentBytes: 2 << 10})
	rows := logRows(t, w1, spoolRows("crash", 50))
	torn := appendRecord(nil, &rows[0])
	crashed := crashCopy(t, dir, torn[:len(torn)-3])
	if n := len(mustSegments(t, crashed)); n < 2 {
		t.Fatalf("%d segments, want several (2 KiB each)", n)
	}

	// 20 of them reached Postgres before the crash.
	pre := newWriter(t, pool, Options{WALMode: WALOff})
	write(t, pre, rows[:20]...)
	closeWriter(t, pre)

	w2 := newWriter(t, pool, Options{SpoolDir: crashed})
	waitFor(t, 10*time.Second, "replay", func() bool { return !w2.Stats().Spooling })
	closeWriter(t, w2)
	var want int64
	for _, r := range rows {
		want += r.CostMicros
	}
	if n := countRows(t, pool); n != 50 {
		t.Fatalf("call_log holds %d rows, want 50", n)
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": want})
	if segs := mustSegments(t, crashed); len(segs) != 0 {
		t.Fatalf("segments left after recovery and close: %v", segs)
	}
}

func mustSegments(t *testing.T, dir string) []uint64 {
	t.Helper()
	segs, err := listSegments(filepath.Join(dir, WALDirName))
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// TestWALReleasesStoredRows: segments are removed once their rows are in
// Postgres, and Close leaves none; the group commit shares writes.
func TestWALReleasesStoredRows(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	dir := t.TempDir()
	w := newWriter(t, pool, Options{SpoolDir: dir, WALSegmentBytes: 2 << 10, Linger: -1})
	rows := logRows(t, w, spoolRows("rel", 300))
	write(t, w, rows...)
	waitFor(t, 10*time.Second, "rows stored", func() bool { return w.Stats().Rows >= 300 })
	waitFor(t, 10*time.Second, "segments removed", func() bool { return len(mustSegments(t, dir)) <= 1 })
	st := w.Stats()
	if st.WALRows != 300 || st.WALRounds < 1 || st.WALRounds > 300 {
		t.Fatalf("WALRows %d, WALRounds %d; want 300 rows in 1..300 rounds", st.WALRows, st.WALRounds)
	}
	if st.WALBytes > 4<<10 {
		t.Fatalf("WALBytes %d after the rows were stored, want at most the current segment", st.WALBytes)
	}
	closeWriter(t, w)
	if segs := mustSegments(t, dir); len(segs) != 0 {
		t.Fatalf("segments left after Close: %v", segs)
	}
	if n := countRows(t, pool); n != 300 {
		t.Fatalf("call_log holds %d rows, want 300", n)
	}
}

// TestWALFull: past WALMaxBytes Log and Ready refuse with ErrWALFull;
// storing the rows frees the log and both accept again.
func TestWALFull(t *testing.T) {
	t.Parallel()
	w := newWriter(t, nil, Options{WALMaxBytes: 4 << 10, WALSegmentBytes: 1 << 10})
	var held []Row
	var full error
	for i, r := range spoolRows("full", 100) {
		if err := w.Log(&r); err != nil {
			full = err
			if i < 5 {
				t.Fatalf("refused after %d rows: %v", i, err)
			}
			break
		}
		held = append(held, r)
	}
	if !errors.Is(full, ErrWALFull) {
		t.Fatalf("Log at the cap = %v, want ErrWALFull", full)
	}
	if err := w.Ready(); !errors.Is(err, ErrWALFull) {
		t.Fatalf("Ready at the cap = %v, want ErrWALFull", err)
	}
	write(t, w, held...) // a spool-only writer: stored in the spool
	waitFor(t, 5*time.Second, "the log freed", func() bool { return w.Ready() == nil })
	r := row("after", "acme", 1)
	if err := w.Log(&r); err != nil {
		t.Fatalf("Log after freeing: %v", err)
	}
}

// TestWALDiskFailure: a log whose directory cannot take a new segment
// refuses rows, and Ready refuses for RetryInterval.
func TestWALDiskFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := newWriter(t, nil, Options{SpoolDir: dir, WALSegmentBytes: 512, RetryInterval: 200 * time.Millisecond})
	r := row("ok", "acme", 1)
	if err := w.Log(&r); err != nil {
		t.Fatal(err)
	}
	// A file where the directory was: no segment can be created, even
	// by root (a read-only directory would not stop root).
	wd := filepath.Join(dir, WALDirName)
	if err := os.Rename(wd, wd+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wd, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	big := row("big", "acme", 1)
	big.Model = string(bytes.Repeat([]byte("m"), 600)) // past the 512-byte segment: a new one
	if err := w.Log(&big); err == nil || !errors.Is(w.Ready(), ErrWALFull) {
		t.Fatalf("Log = %v, Ready = %v; want a failure and ErrWALFull", err, w.Ready())
	}
	if st := w.Stats(); st.WALRows != 1 {
		t.Fatalf("WALRows %d, want 1 (the failed row not counted)", st.WALRows)
	}
	// The refusal lasts RetryInterval, then rows are tried again.
	os.Remove(wd)
	if err := os.Rename(wd+".away", wd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "Ready again", func() bool { return w.Ready() == nil })
	if err := w.Log(&big); err != nil {
		t.Fatalf("Log after the disk came back: %v", err)
	}
}

// FuzzWALSegment: reading a segment never panics; its valid part reads
// back as the same rows with nothing bad, and every prefix of the data
// reads as a prefix of the rows.
func FuzzWALSegment(f *testing.F) {
	seg := encode(spoolRows("s", 3))
	f.Add(seg, 0)
	f.Add(seg[:len(seg)-4], 1)
	f.Add(append(bytes.Clone(seg), 0, 0, 0, 9, 1, 2, 3, 4, '{'), 5)
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0, '{', '}'}, 9)
	f.Fuzz(func(t *testing.T, data []byte, cut int) {
		rows, valid, _, err := readSegment(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("I/O error from memory: %v", err)
		}
		if valid > int64(len(data)) {
			t.Fatalf("valid %d of %d bytes", valid, len(data))
		}
		again, v2, bad, _ := readSegment(bytes.NewReader(data[:valid]))
		if bad != nil || v2 != valid || !reflect.DeepEqual(again, rows) {
			t.Fatalf("the valid part reads differently: %d rows, %d bytes, %v", len(again), v2, bad)
		}
		if cut < 0 || cut > len(data) {
			return
		}
		pre, _, _, _ := readSegment(bytes.NewReader(data[:cut]))
		if len(pre) > len(rows) || (len(pre) > 0 && !reflect.DeepEqual(pre, rows[:len(pre)])) {
			t.Fatalf("a prefix read %d rows not a prefix of the %d", len(pre), len(rows))
		}
	})
}

// BenchmarkLog measures a Log's wait for the write-ahead log, one at a
// time (serial: a request's added latency on an unloaded gateway) and 8
// at once (the fsync cost depends on the disk under TMPDIR).
func BenchmarkLog(b *testing.B) {
	for _, mode := range []WALMode{WALFsync, WALWrite} {
		name := map[WALMode]string{WALFsync: "fsync", WALWrite: "write"}[mode]
		b.Run(name+"/serial", func(b *testing.B) {
			w, err := New(nil, Options{SpoolDir: b.TempDir(), WALMode: mode, Logger: testLogger(b, nil)})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close(context.Background())
			b.ReportAllocs()
			r := row("bench", "acme", 1)
			for b.Loop() {
				r := r
				if err := w.Log(&r); err != nil {
					b.Fatal(err)
				}
				w.release([]Row{r})
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			w, err := New(nil, Options{SpoolDir: b.TempDir(), WALMode: mode, Logger: testLogger(b, nil)})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close(context.Background())
			b.ReportAllocs()
			b.SetParallelism(4)
			r := row("bench", "acme", 1)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := r
					if err := w.Log(&r); err != nil {
						b.Error(err)
						return
					}
					w.release([]Row{r})
				}
			})
			st := w.Stats()
			b.ReportMetric(float64(st.WALRows)/float64(max(st.WALRounds, 1)), "rows/round")
		})
	}
}
