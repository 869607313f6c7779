package calllog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

// cacheRows returns a row of each cache outcome, ids prefix-<name>: none,
// hit, free-hit (a hit that saved nothing: a model priced at 0), miss,
// bypass.
func cacheRows(prefix string) []Row {
	cases := []struct {
		name, cache string
		saved       int64
	}{
		{"none", "", 0},
		{"hit", CacheHit, 4321},
		{"free-hit", CacheHit, 0},
		{"miss", CacheMiss, 0},
		{"bypass", CacheBypass, 0},
	}
	rows := make([]Row, len(cases))
	for i, c := range cases {
		rows[i] = row(prefix+"-"+c.name, "acme", int64(10+i))
		rows[i].Cache, rows[i].SavedMicros = c.cache, c.saved
	}
	return rows
}

// checkCacheColumns fails unless call_log holds each of rows with its
// cache ("" as NULL) and saved_micros.
func checkCacheColumns(t *testing.T, pool *pgxpool.Pool, rows []Row) {
	t.Helper()
	for _, r := range rows {
		var cache pgtype.Text
		var saved int64
		err := pool.QueryRow(t.Context(), `SELECT cache, saved_micros FROM call_log WHERE request_id = $1`,
			r.RequestID).Scan(&cache, &saved)
		if err != nil {
			t.Errorf("%s: %v", r.RequestID, err)
			continue
		}
		if want := optText(r.Cache); cache != want || saved != r.SavedMicros {
			t.Errorf("%s: stored cache %+v, saved_micros %d; want %+v, %d", r.RequestID, cache, saved, want, r.SavedMicros)
		}
	}
}

func sumCost(rows []Row) (n int64) {
	for _, r := range rows {
		n += r.CostMicros
	}
	return n
}

// withoutMarks returns rows with their write-ahead log marks cleared (what
// a record read back holds).
func withoutMarks(rows []Row) []Row {
	out := make([]Row, len(rows))
	for i, r := range rows {
		r.WAL = Mark{}
		out[i] = r
	}
	return out
}

// TestCacheColumnsStored: a row of each cache outcome reaches call_log's
// cache and saved_micros as written, whichever way it takes: straight to
// Postgres, through the spool (Postgres away, replayed by the next
// Writer), or through the write-ahead log (the process killed, recovered
// by the next Writer, some rows already stored, which takes the ON
// CONFLICT insert).
func TestCacheColumnsStored(t *testing.T) {
	t.Parallel()
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool := newDB(t)
		rows := cacheRows("pg")
		w := newWriter(t, pool, Options{})
		write(t, w, rows...)
		closeWriter(t, w)
		checkCacheColumns(t, pool, rows)
		checkLedger(t, pool, thisMonth, map[string]int64{"acme": sumCost(rows)})
	})
	t.Run("spool", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		rows := cacheRows("spool")
		w1 := newWriter(t, nil, Options{SpoolDir: dir, WALMode: WALOff})
		write(t, w1, rows...)
		closeWriter(t, w1)
		sp, err := openSpool(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := sp.read(0, 100)
		sp.f.Close()
		if err != nil || !reflect.DeepEqual(got, rows) {
			t.Fatalf("spool holds %+v (%v), want %+v", got, err, rows)
		}
		pool := newDB(t)
		w2 := newWriter(t, pool, Options{SpoolDir: dir})
		closeWriter(t, w2)
		if s := w2.Stats(); s.ReplayedRows != int64(len(rows)) {
			t.Fatalf("ReplayedRows %d, want %d", s.ReplayedRows, len(rows))
		}
		checkCacheColumns(t, pool, rows)
		checkLedger(t, pool, thisMonth, map[string]int64{"acme": sumCost(rows)})
	})
	t.Run("wal", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		w1 := newWriter(t, nil, Options{SpoolDir: dir, WALMode: WALWrite})
		rows := logRows(t, w1, cacheRows("wal"))
		crashed := crashCopy(t, dir, nil)
		var recovered []Row
		for _, s := range mustSegments(t, crashed) {
			f, err := os.Open(filepath.Join(crashed, WALDirName, segmentName(s)))
			if err != nil {
				t.Fatal(err)
			}
			got, _, bad, err := readSegment(f)
			f.Close()
			if err != nil || bad != nil {
				t.Fatalf("segment %d: %v %v", s, err, bad)
			}
			recovered = append(recovered, got...)
		}
		// Log runs concurrently for the rows: compare as a set.
		byID := map[string]Row{}
		for _, r := range recovered {
			byID[r.RequestID] = r
		}
		for _, r := range withoutMarks(rows) {
			if got := byID[r.RequestID]; !reflect.DeepEqual(got, r) {
				t.Errorf("write-ahead log holds %+v, want %+v", got, r)
			}
		}
		if len(recovered) != len(rows) {
			t.Fatalf("write-ahead log holds %d rows, want %d", len(recovered), len(rows))
		}

		pool := newDB(t)
		// The hit and the miss reached Postgres before the crash.
		pre := newWriter(t, pool, Options{WALMode: WALOff})
		write(t, pre, rows[1], rows[3])
		closeWriter(t, pre)
		w2 := newWriter(t, pool, Options{SpoolDir: crashed})
		waitFor(t, 10*time.Second, "replay", func() bool { return !w2.Stats().Spooling })
		closeWriter(t, w2)
		if s := w2.Stats(); s.Duplicates != 2 {
			t.Errorf("Duplicates %d, want 2 (the rows stored before the crash)", s.Duplicates)
		}
		if n := countRows(t, pool); n != int64(len(rows)) {
			t.Fatalf("call_log holds %d rows, want %d", n, len(rows))
		}
		checkCacheColumns(t, pool, rows)
		checkLedger(t, pool, thisMonth, map[string]int64{"acme": sumCost(rows)})
	})
}

// TestCacheValidation: Write and Log refuse a cache outcome other than
// the four, a negative saving, and a saving on a row that is not a hit,
// with ErrInvalidRow naming the field; nothing of them is kept.
func TestCacheValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, cache string
		saved       int64
		field       string
	}{
		{"unknown outcome", "stale", 0, "Cache"},
		{"upper case", "HIT", 0, "Cache"},
		{"padded", " hit", 0, "Cache"},
		{"NUL", "hit\x00", 0, "Cache"},
		{"negative saving", CacheHit, -1, "SavedMicros"},
		{"saving on a miss", CacheMiss, 1, "SavedMicros"},
		{"saving on a bypass", CacheBypass, 1, "SavedMicros"},
		{"saving without a cache", "", 1, "SavedMicros"},
	}
	w := newWriter(t, nil, Options{WALMode: WALWrite})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := row("bad-cache", "acme", 1)
			r.Cache, r.SavedMicros = tt.cache, tt.saved
			for name, call := range map[string]func() error{
				"Write": func() error { return w.Write(t.Context(), r) },
				"Log":   func() error { return w.Log(&r) },
			} {
				err := call()
				if !errors.Is(err, ErrInvalidRow) || !strings.Contains(err.Error(), tt.field) {
					t.Errorf("%s(Cache %q, SavedMicros %d): %v, want ErrInvalidRow naming %s", name, tt.cache, tt.saved, err, tt.field)
				}
			}
		})
	}
	for _, r := range cacheRows("ok") {
		if err := r.validate(); err != nil {
			t.Errorf("valid row %s refused: %v", r.RequestID, err)
		}
	}
	closeWriter(t, w)
	if s := w.Stats(); s.SpooledRows != 0 || s.WALRows != 0 {
		t.Errorf("an invalid row was kept: %+v", s)
	}
}

// TestCacheConstraints: rows with cache values the writer would refuse,
// reaching Postgres anyway (a spool file holding them: the writer does not
// validate what it replays), are rejected by call_log's constraints —
// logged, counted, not stored — and the rows around them are stored.
func TestCacheConstraints(t *testing.T) {
	t.Parallel()
	rows := cacheRows("good")
	bad := []Row{row("bad-outcome", "acme", 1), row("bad-negative", "acme", 2), row("bad-miss-saves", "acme", 3)}
	bad[0].Cache = "HIT"
	bad[1].Cache, bad[1].SavedMicros = CacheHit, -5
	bad[2].Cache, bad[2].SavedMicros = CacheMiss, 7
	for _, r := range bad {
		if r.validate() == nil {
			t.Fatalf("%s passes validate", r.RequestID)
		}
	}
	// Bad rows between good ones, one of them in a batch of its own.
	spooled := []Row{rows[0], bad[0], rows[1], rows[2], bad[1], bad[2], rows[3], rows[4]}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SpoolFileName), encode(spooled), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := newDB(t)
	logs := &syncBuffer{}
	w := newWriter(t, pool, Options{SpoolDir: dir, Logger: testLogger(t, logs), MaxBatch: 4})
	closeWriter(t, w)
	if s := w.Stats(); s.Rejected != 3 || s.Rows != int64(len(rows)) {
		t.Errorf("Rejected %d, Rows %d; want 3 and %d", s.Rejected, s.Rows, len(rows))
	}
	checkCacheColumns(t, pool, rows)
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": sumCost(rows)})
	out := logs.String()
	for _, r := range bad {
		if n := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id = $1`, r.RequestID); n != 0 {
			t.Errorf("%s stored", r.RequestID)
		}
		if !strings.Contains(out, "request_id="+r.RequestID) {
			t.Errorf("no log line names %s", r.RequestID)
		}
	}
	for _, c := range []string{"call_log_cache_check", "call_log_saved_micros_check", "call_log_saved_micros_hit_check"} {
		if !strings.Contains(out, c) {
			t.Errorf("no log line names the constraint %s", c)
		}
	}
}

// oldFormatRows are the rows in testdata/v0, a spool and a write-ahead log
// segment written by the build before call_log had cache and saved_micros
// (commit 7b8af47): prefix "spool" or "wal".
func oldFormatRows(prefix string) []Row {
	at := time.Date(2026, 11, 2, 12, 0, 0, 0, time.UTC)
	return []Row{
		{RequestID: prefix + "-full", TenantID: "acme", KeyID: "key-acme", Model: "gpt-4o", Upstream: "openai",
			Status: 200, StartedAt: at, FirstByte: 120 * time.Millisecond, Total: 900 * time.Millisecond,
			PromptTokens: 11, CompletionTokens: 22, CostMicros: 1234, GuardAction: "holdback:stopped", ReplyBytes: 77,
			Attempts: 2, EndUser: "user-1",
			Kinds: TokenKinds{Reported: true, CachedInput: 1, CacheWrite: 2, AudioInput: 3, ImageInput: 4,
				Reasoning: 5, AudioOutput: 6, ImageOutput: 7}},
		{RequestID: prefix + "-unknowns", TenantID: "globex", Model: "claude", Status: 502, StartedAt: at.Add(time.Hour),
			FirstByte: -1, Total: -1, PromptTokens: -1, CompletionTokens: -1, ReplyBytes: -1},
	}
}

// TestReplayOldFormat: a spool and a write-ahead log left by the build
// before the cache columns (testdata/v0) still read, as rows no cache took
// part in, and replay after the upgrade: every row stored once, cache NULL
// and saved_micros 0, its other columns as written, its cost counted.
func TestReplayOldFormat(t *testing.T) {
	t.Parallel()
	spoolFile := filepath.Join("testdata", "v0", SpoolFileName)
	walFile := filepath.Join("testdata", "v0", WALDirName, segmentName(1))
	for _, f := range []string{spoolFile, walFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"cache"`)) || bytes.Contains(b, []byte(`"saved"`)) {
			t.Fatalf("%s is not in the old format: it has the new fields", f)
		}
		var got []Row
		br := bufio.NewReader(bytes.NewReader(b))
		for {
			r, _, _, err := readRecord(br, nil)
			if err != nil {
				if len(got) != 2 {
					t.Fatalf("%s: %d records then %v", f, len(got), err)
				}
				break
			}
			got = append(got, r)
		}
		prefix := "spool"
		if f == walFile {
			prefix = "wal"
		}
		if want := oldFormatRows(prefix); !reflect.DeepEqual(got, want) {
			t.Errorf("%s reads as\n%+v\nwant\n%+v", f, got, want)
		}
	}

	dir := t.TempDir()
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(spoolFile, filepath.Join(dir, SpoolFileName))
	copyFile(walFile, filepath.Join(dir, WALDirName, segmentName(1)))
	pool := newDB(t)
	w := newWriter(t, pool, Options{SpoolDir: dir})
	waitFor(t, 10*time.Second, "replay", func() bool { return !w.Stats().Spooling })
	closeWriter(t, w)
	rows := append(oldFormatRows("spool"), oldFormatRows("wal")...)
	if n := countRows(t, pool); n != int64(len(rows)) {
		t.Fatalf("call_log holds %d rows, want %d", n, len(rows))
	}
	checkCacheColumns(t, pool, rows) // Cache "", SavedMicros 0
	for _, r := range rows {
		var cost, prompt, reasoning pgtype.Int8
		var guard, user pgtype.Text
		err := pool.QueryRow(t.Context(), `SELECT cost_micros, prompt_tokens, reasoning_tokens, guard_action, end_user
  FROM call_log WHERE request_id = $1`, r.RequestID).Scan(&cost, &prompt, &reasoning, &guard, &user)
		if err != nil {
			t.Fatal(err)
		}
		null := func(v pgtype.Int8) any {
			if !v.Valid {
				return "NULL"
			}
			return v.Int64
		}
		want := fmt.Sprint(r.CostMicros, null(optCount(r.PromptTokens)),
			null(pgtype.Int8{Int64: r.Kinds.Reasoning, Valid: r.Kinds.Reported}), optText(r.GuardAction), optText(r.EndUser))
		if got := fmt.Sprint(null(cost), null(prompt), null(reasoning), guard, user); got != want {
			t.Errorf("%s: stored %s, want %s", r.RequestID, got, want)
		}
	}
	month := rows[0].StartedAt
	checkLedger(t, pool, month, map[string]int64{"acme": 2 * 1234, "globex": 0})
}

// TestCacheMigration: migration 00015 on a call_log that holds rows gives
// them cache NULL and saved_micros 0, and its constraints and index apply
// to the partitions that existed and to one created afterwards; its Down
// removes all of it.
func TestCacheMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.SharedFrom(t, migrated).DSN()
	if err := pg.MigrateDownTo(ctx, dsn, 14); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, dsn)
	if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cost_micros)
VALUES ('before', 'acme', 'm', 200, $1, 5)`, thisMonth); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Migrate(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	pool.Reset() // cached statement plans name the old columns
	checkCacheColumns(t, pool, []Row{{RequestID: "before"}})
	later := time.Date(2031, 1, 5, 0, 0, 0, 0, time.UTC)
	if _, err := pool.Exec(ctx, `SELECT tollgate_ensure_call_log_partition('2031-01-01')`); err != nil {
		t.Fatal(err)
	}
	parts := queryInt(t, pool, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'call_log'::regclass`)
	if parts != 3 {
		t.Fatalf("%d partitions, want 3 (this month, the next, 2031-01)", parts)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'call_log_cache_hit_idx'::regclass`); n != parts {
		t.Errorf("the hit index is on %d of %d partitions", n, parts)
	}
	for _, at := range []time.Time{thisMonth, later} {
		for _, tt := range []struct {
			cache      any
			saved      int64
			constraint string
		}{
			{"stale", 0, "call_log_cache_check"},
			{"", 0, "call_log_cache_check"},
			{CacheHit, -1, "call_log_saved_micros_check"},
			{CacheBypass, 3, "call_log_saved_micros_hit_check"},
			{nil, 3, "call_log_saved_micros_hit_check"},
		} {
			_, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cache, saved_micros)
VALUES ('bad', 'acme', 'm', 200, $1, $2, $3)`, at, tt.cache, tt.saved)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "23514" || pgErr.ConstraintName != tt.constraint {
				t.Errorf("%s: insert of cache %v, saved_micros %d: %v; want a violation of %s",
					at.Format("2006-01"), tt.cache, tt.saved, err, tt.constraint)
			}
			if classify(err) != faultRow {
				t.Errorf("the writer does not blame the row for %v", err)
			}
		}
		for i, c := range []any{nil, CacheHit, CacheMiss, CacheBypass} {
			saved := int64(0)
			if c == CacheHit {
				saved = 9
			}
			if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cache, saved_micros)
VALUES ($1, 'acme', 'm', 200, $2, $3, $4)`, fmt.Sprintf("ok-%d", i), at, c, saved); err != nil {
				t.Errorf("%s: insert of cache %v: %v", at.Format("2006-01"), c, err)
			}
		}
	}
	if err := pg.MigrateDownTo(ctx, dsn, 14); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM information_schema.columns
WHERE table_name LIKE 'call_log%' AND column_name IN ('cache', 'saved_micros')`); n != 0 {
		t.Errorf("%d cache columns left after Down", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_class WHERE relname LIKE 'call_log%cache%'`); n != 0 {
		t.Errorf("%d cache indexes left after Down", n)
	}
}
