package calllog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// spoolRows returns n rows of tenant acme named prefix-i.
func spoolRows(prefix string, n int) []Row {
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = row(fmt.Sprintf("%s-%d", prefix, i), "acme", int64(100+i))
		if i%2 == 1 {
			rows[i].EndUser = fmt.Sprintf("user-%d", i)
		}
	}
	return rows
}

func encode(rows []Row) []byte {
	var b []byte
	for i := range rows {
		b = appendRecord(b, &rows[i])
	}
	return b
}

// TestSpoolRoundTrip: rows read back equal the rows appended, unknown
// values included.
func TestSpoolRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sp, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	rows := spoolRows("rt", 3)
	rows[1] = Row{RequestID: "ü\"\n", TenantID: "acme", Model: "m", StartedAt: thisMonth.In(time.FixedZone("x", 3600)),
		FirstByte: -1, Total: -1, PromptTokens: -1, CompletionTokens: -1}
	if err := sp.append(rows[:2]); err != nil {
		t.Fatal(err)
	}
	if err := sp.append(rows[2:]); err != nil {
		t.Fatal(err)
	}
	got, ends, err := sp.read(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	rows[1].StartedAt = rows[1].StartedAt.UTC()
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, rows)
	}
	if len(ends) != 3 || ends[2] != sp.size {
		t.Errorf("ends %v, size %d", ends, sp.size)
	}
	if got, _, _ := sp.read(ends[0], 1); len(got) != 1 || got[0].RequestID != rows[1].RequestID {
		t.Errorf("read from the second record: %+v", got)
	}
	if err := sp.close(); err != nil {
		t.Fatal(err)
	}
}

// TestTornSpoolTail: a spool whose last record is torn or damaged is
// replayed up to it; the rest is cut off with a log line.
func TestTornSpoolTail(t *testing.T) {
	t.Parallel()
	good := encode(spoolRows("torn", 5))
	last := encode([]Row{row("torn-last", "acme", 1)})
	flipped := bytes.Clone(last)
	flipped[len(flipped)-3] ^= 0x20
	tests := []struct {
		name, reason string
		tail         []byte
	}{
		{"torn header", "header of 3 bytes", last[:3]},
		{"torn payload", "payload bytes", last[:len(last)-5]},
		{"bad checksum", "checksum mismatch", flipped},
		{"huge length", "length", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{'}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, SpoolFileName)
			if err := os.WriteFile(path, append(bytes.Clone(good), tt.tail...), 0o600); err != nil {
				t.Fatal(err)
			}
			pool := newDB(t)
			logs := &syncBuffer{}
			w := newWriter(t, pool, Options{SpoolDir: dir, Logger: testLogger(t, logs)})
			closeWriter(t, w)
			if n := countRows(t, pool); n != 5 {
				t.Errorf("%d rows replayed, want 5", n)
			}
			checkLedger(t, pool, thisMonth, map[string]int64{"acme": 100 + 101 + 102 + 103 + 104})
			if s := w.Stats(); s.ReplayedRows != 5 {
				t.Errorf("ReplayedRows %d, want 5", s.ReplayedRows)
			}
			out := logs.String()
			want := fmt.Sprintf("bytes=%d", len(tt.tail))
			if !strings.Contains(out, "torn") || !strings.Contains(out, want) || !strings.Contains(out, tt.reason) {
				t.Errorf("log does not report the %d cut bytes (%q):\n%s", len(tt.tail), tt.reason, out)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("spool not removed after the replay: %v", err)
			}
		})
	}
}

// TestOpenSpoolCutsTornTail: openSpool truncates to the whole records, so
// later appends follow them.
func TestOpenSpoolCutsTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := encode(spoolRows("a", 2))
	if err := os.WriteFile(filepath.Join(dir, SpoolFileName), append(bytes.Clone(good), 0, 0, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sp.size != int64(len(good)) || sp.cut != 3 || !errors.Is(sp.cutReason, errBadRecord) {
		t.Fatalf("size %d cut %d (%v); want %d, 3", sp.size, sp.cut, sp.cutReason, len(good))
	}
	if err := sp.append(spoolRows("b", 1)); err != nil {
		t.Fatal(err)
	}
	rows, _, err := sp.read(0, 10)
	if err != nil || len(rows) != 3 || rows[2].RequestID != "b-0" {
		t.Errorf("after the cut and an append: %d rows (%v)", len(rows), err)
	}
	if err := sp.close(); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolOnlyWriter: without a pool every row goes to the spool, which a
// later Writer finds again.
func TestSpoolOnlyWriter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := newWriter(t, nil, Options{SpoolDir: dir})
	rows := spoolRows("only", 10)
	write(t, w, rows...)
	closeWriter(t, w)
	if s := w.Stats(); s.SpooledRows != 10 || !s.Spooling || s.Transactions != 0 {
		t.Errorf("stats %+v, want 10 spooled rows and no transaction", s)
	}
	sp, err := openSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := sp.read(0, 100)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Errorf("spool holds %d rows (%v), want the 10 written in order", len(got), err)
	}
	sp.f.Close()
}

// TestSpoolDirInUse: two Writers cannot share a spool directory.
func TestSpoolDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w := newWriter(t, nil, Options{SpoolDir: dir})
	if _, err := New(nil, Options{SpoolDir: dir}); !errors.Is(err, ErrSpoolInUse) {
		t.Errorf("second New on %s: %v, want ErrSpoolInUse", dir, err)
	}
	closeWriter(t, w)
	w2, err := New(nil, Options{SpoolDir: dir})
	if err != nil {
		t.Fatalf("New after Close: %v", err)
	}
	closeWriter(t, w2)
}

// FuzzSpoolRecord: reading arbitrary bytes never panics, and every valid
// row read re-encodes to a record that reads back the same.
func FuzzSpoolRecord(f *testing.F) {
	f.Add(encode(spoolRows("f", 2)))
	f.Add(encode(cacheRows("f")))
	f.Add(encode(spoolRows("f", 1))[:7])
	f.Add([]byte{0, 0, 0, 2, 0, 0, 0, 0, '{', '}'})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		var buf []byte
		var off int64
		for {
			r, n, b, err := readRecord(br, buf)
			buf = b
			if err == io.EOF || errors.Is(err, errBadRecord) {
				break
			}
			if err != nil {
				t.Fatalf("unexpected error class: %v", err)
			}
			off += n
			if off > int64(len(data)) {
				t.Fatalf("read %d bytes of %d", off, len(data))
			}
			if r.validate() != nil {
				continue // a Writer never spools it; replay lets Postgres judge it
			}
			again, _, _, err := readRecord(bufio.NewReader(bytes.NewReader(appendRecord(nil, &r))), nil)
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("re-encoded %+v reads back as %+v (%v)", r, again, err)
			}
		}
	})
}

// TestReadyWhileSpoolFails: while the writer holds rows that the spool
// will not take (its disk full or failing, no Postgres), Ready refuses
// new requests with ErrStuck, with or without the write-ahead log, so
// that only rows of requests already admitted can reach the queue; rows
// written meanwhile still queue without waiting.
func TestReadyWhileSpoolFails(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]WALMode{"off": WALOff, "write": WALWrite} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWriter(t, nil, Options{RetryInterval: 10 * time.Millisecond, WALMode: mode})
			// Runs before newWriter's Close, which would wait for the
			// spool forever: a failure ends the test.
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = w.Close(ctx)
			})
			if err := w.Ready(); err != nil {
				t.Fatalf("Ready before any failure: %v", err)
			}
			// The loop reads w.sp.f only after it receives a row: the
			// swap happens before that read.
			ro, err := os.Open(w.sp.path)
			if err != nil {
				t.Fatal(err)
			}
			rw := w.sp.f
			w.sp.f = ro // appends fail (EBADF), as on a full disk
			defer rw.Close()
			write(t, w, spoolRows("stuck", 3)...)
			var ready error
			for end := time.Now().Add(10 * time.Second); ready == nil && time.Now().Before(end); time.Sleep(time.Millisecond) {
				ready = w.Ready()
			}
			if !errors.Is(ready, ErrStuck) {
				t.Fatalf("Ready with the spool failing: %v, want ErrStuck", ready)
			}
			// Requests already admitted: their rows queue, no wait.
			write(t, w, spoolRows("admitted", 5)...)
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			if err := w.Close(ctx); !errors.Is(err, ErrLost) {
				t.Errorf("Close with the spool failing: %v, want ErrLost", err)
			}
		})
	}
}

// recordRows are rows whose encodings exercise every field's rule: empty
// and present optional fields, unknown (-1) and zero counts, kinds reported
// or not, and text JSON must escape (quotes, control characters, invalid
// UTF-8, U+2028, HTML's <>&).
func recordRows() []Row {
	base := row("rid-1", "acme", 1234)
	rows := []Row{base}
	full := base
	full.KeyID, full.Upstream, full.GuardAction, full.EndUser = "k1", "openai", "blocked", "u@example.com"
	full.Kinds = kindsOf([7]int64{1, 2, 3, 4, 5, 6, 7})
	full.Cache, full.SavedMicros, full.ReplyBytes, full.Attempts = CacheHit, 99, 0, 3
	rows = append(rows, full)
	odd := full
	odd.RequestID = "q\"uote\\back\x00\x1f\n\r\t"
	odd.TenantID = "bad\xff\xfeutf8 \u2028\u2029 <a href=\"x\">&amp;</a>"
	odd.Model = "模型/🎉"
	odd.EndUser = "\x7f\u00e9\xc3"
	odd.StartedAt = time.Date(2026, 12, 31, 23, 59, 59, 1, time.FixedZone("x", -3600))
	odd.FirstByte, odd.Total, odd.PromptTokens, odd.CompletionTokens = -1, -1, -1, -1
	odd.ReplyBytes, odd.Attempts, odd.SavedMicros = -1, 0, -5
	odd.Kinds = kindsOf([7]int64{})
	rows = append(rows, odd)
	zero := Row{StartedAt: time.Unix(0, 0)}
	rows = append(rows, zero)
	return rows
}

// decodeRecord reads rec's payload into a spoolRecord, checking the header.
func decodeRecord(t testing.TB, rec []byte) spoolRecord {
	t.Helper()
	if len(rec) < recordHeaderSize {
		t.Fatalf("record of %d bytes", len(rec))
	}
	payload := rec[recordHeaderSize:]
	if n := binary.BigEndian.Uint32(rec); int(n) != len(payload) {
		t.Fatalf("header says %d bytes, payload has %d", n, len(payload))
	}
	if !json.Valid(payload) {
		t.Fatalf("payload is not JSON: %q", payload)
	}
	var sr spoolRecord
	if err := json.Unmarshal(payload, &sr); err != nil {
		t.Fatal(err)
	}
	return sr
}

// TestAppendRecordIsMarshal: the hand-written record decodes to what
// encoding/json's does, field for field, and reads back as the same row.
func TestAppendRecordIsMarshal(t *testing.T) {
	for i, r := range recordRows() {
		got, want := appendRecord([]byte("prefix"), &r), marshalRecord(nil, &r)
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Fatalf("row %d: dst's bytes not kept", i)
		}
		got = got[len("prefix"):]
		if a, b := decodeRecord(t, got), decodeRecord(t, want); !reflect.DeepEqual(a, b) {
			t.Errorf("row %d:\nappendRecord %+v\nencoding/json %+v", i, a, b)
		}
		a, _, _, err1 := readRecord(bufio.NewReader(bytes.NewReader(got)), nil)
		b, _, _, err2 := readRecord(bufio.NewReader(bytes.NewReader(want)), nil)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("row %d reads back as %+v (%v), encoding/json's as %+v (%v)", i, a, err1, b, err2)
		}
	}
	// A start time RFC 3339 cannot write takes encoding/json's path,
	// which refuses it as before.
	r := recordRows()[0]
	r.StartedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a year-10000 start time was encoded")
			}
		}()
		appendRecord(nil, &r)
	}()
}

// FuzzAppendRecord: for any row, the hand-written record is valid JSON
// that decodes to what encoding/json's does.
func FuzzAppendRecord(f *testing.F) {
	for _, r := range recordRows() {
		f.Add(r.RequestID, r.TenantID, r.KeyID, r.Model, r.EndUser, r.Cache, r.StartedAt.UnixNano(), r.PromptTokens, r.ReplyBytes, r.SavedMicros, r.Kinds.Reported)
	}
	f.Fuzz(func(t *testing.T, rid, tid, kid, model, eu, cache string, at, n, rb, saved int64, kinds bool) {
		r := Row{RequestID: rid, TenantID: tid, KeyID: kid, Model: model, Upstream: eu + kid, Status: int(n % 1000),
			StartedAt: time.Unix(0, at), FirstByte: time.Duration(n), Total: time.Duration(-n), PromptTokens: n,
			CompletionTokens: rb, CostMicros: saved, GuardAction: cache + model, ReplyBytes: rb, Attempts: int(n),
			EndUser: eu, Cache: cache, SavedMicros: saved}
		if kinds {
			r.Kinds = kindsOf([7]int64{n, rb, saved, -n, -rb, -saved, at})
		}
		a, b := decodeRecord(t, appendRecord(nil, &r)), decodeRecord(t, marshalRecord(nil, &r))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("appendRecord %+v\nencoding/json %+v", a, b)
		}
	})
}

// BenchmarkAppendRecord: encoding one row's record, by hand and by
// encoding/json.
func BenchmarkAppendRecord(b *testing.B) {
	r := recordRows()[1]
	buf := make([]byte, 0, 1024)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = appendRecord(buf[:0], &r)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = marshalRecord(buf[:0], &r)
		}
	})
}
