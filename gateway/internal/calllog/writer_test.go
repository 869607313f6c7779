package calllog

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestWriteStoresRowAndSpend: every column arrives as written, unknowns
// as NULL, and the counter holds the rows' cost.
func TestWriteStoresRowAndSpend(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	w := newWriter(t, pool, Options{})
	full := row("full", "acme", 1234)
	full.GuardAction = "holdback"
	full.Attempts = 2
	full.EndUser = "user-7"
	unknown := Row{RequestID: "unknown", TenantID: "acme", Model: "m", Status: 502,
		StartedAt: thisMonth.Add(time.Second), FirstByte: -1, Total: -1,
		PromptTokens: -1, CompletionTokens: -1, CostMicros: 0}
	write(t, w, full, unknown)
	closeWriter(t, w)

	type stored struct {
		tenant, model                        string
		key, upstream, guard                 *string
		status, attempts                     int
		started                              time.Time
		firstByte, total, prompt, completion *int64
		cost                                 *int64
		user                                 *string
	}
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	tests := []struct {
		id   string
		want stored
	}{
		{"full", stored{"acme", "gpt-4o", str("key-acme"), str("openai"), str("holdback"), 200, 2,
			thisMonth, num(120), num(900), num(11), num(22), num(1234), str("user-7")}},
		{"unknown", stored{"acme", "m", nil, nil, nil, 502, 1,
			thisMonth.Add(time.Second), nil, nil, nil, nil, num(0), nil}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			var got stored
			err := pool.QueryRow(t.Context(), `
SELECT tenant_id, model, key_id, upstream, guard_action, status, attempts, started_at,
       first_byte_ms, total_ms, prompt_tokens, completion_tokens, cost_micros, end_user
  FROM call_log WHERE request_id = $1`, tt.id).Scan(&got.tenant, &got.model, &got.key, &got.upstream,
				&got.guard, &got.status, &got.attempts, &got.started, &got.firstByte, &got.total,
				&got.prompt, &got.completion, &got.cost, &got.user)
			if err != nil {
				t.Fatal(err)
			}
			show := func(s stored) string {
				deref := func(p any) string {
					switch p := p.(type) {
					case *string:
						if p != nil {
							return *p
						}
					case *int64:
						if p != nil {
							return fmt.Sprint(*p)
						}
					}
					return "NULL"
				}
				return fmt.Sprintf("%s %s key=%s up=%s guard=%s status=%d attempts=%d at=%s fb=%s total=%s pt=%s ct=%s cost=%s user=%s",
					s.tenant, s.model, deref(s.key), deref(s.upstream), deref(s.guard), s.status, s.attempts,
					s.started.UTC().Format(time.RFC3339Nano), deref(s.firstByte), deref(s.total),
					deref(s.prompt), deref(s.completion), deref(s.cost), deref(s.user))
			}
			if show(got) != show(tt.want) {
				t.Errorf("stored\n %s\nwant\n %s", show(got), show(tt.want))
			}
		})
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 1234})
	if n := countRows(t, pool); n != 2 {
		t.Errorf("%d call_log rows, want 2", n)
	}
	if s := w.Stats(); s.Rows != 2 || s.Duplicates != 0 || s.Transactions < 1 || s.Transactions > 2 {
		t.Errorf("stats %+v, want 2 rows in 1 or 2 transactions", s)
	}
}

// TestSpendSeededFromCallLog: a counter created by a batch starts from the
// log's sum of the month; an existing counter is only added to.
func TestSpendSeededFromCallLog(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	// History without a counter: written before the counter existed.
	if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cost_micros)
		VALUES ('old1', 'globex', 'm', 200, $1, 100), ('old2', 'globex', 'm', 200, $1, 200),
		       ('old3', 'globex', 'm', 200, $1, 300),
		       ('other-month', 'globex', 'm', 200, $2, 5000)`, thisMonth, MonthStart(thisMonth).AddDate(0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	// A counter that exists (deliberately not equal to its log).
	if _, err := pool.Exec(ctx, `INSERT INTO spend_month VALUES ('initech', $1, 1000)`, MonthStart(thisMonth)); err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, pool, Options{})
	write(t, w, row("new-globex", "globex", 50), row("new-initech", "initech", 7))
	closeWriter(t, w)
	if got := counter(t, pool, "globex", thisMonth); got != 650 {
		t.Errorf("globex counter %d, want 650 (seed 600 + 50)", got)
	}
	if got := counter(t, pool, "initech", thisMonth); got != 1007 {
		t.Errorf("initech counter %d, want 1007 (1000 + 7, no reseed)", got)
	}
}

// TestIdempotent: a request written twice in one Writer and once more in
// another is one row, its cost counted once.
func TestIdempotent(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	r := row("same", "acme", 500)
	w1 := newWriter(t, pool, Options{})
	write(t, w1, r, r)
	closeWriter(t, w1)
	w2 := newWriter(t, pool, Options{})
	write(t, w2, r)
	closeWriter(t, w2)
	if n := countRows(t, pool); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 500})
	s1, s2 := w1.Stats(), w2.Stats()
	if s1.Rows != 2 || s1.Duplicates != 1 || s2.Rows != 1 || s2.Duplicates != 1 {
		t.Errorf("stats rows/duplicates %d/%d and %d/%d, want 2/1 and 1/1", s1.Rows, s1.Duplicates, s2.Rows, s2.Duplicates)
	}
}

// TestRowsAndSpendInOneTransaction: when the counter update fails, the row
// inserted before it in the transaction is rolled back with it.
func TestRowsAndSpendInOneTransaction(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	if _, err := pool.Exec(t.Context(), `ALTER TABLE spend_month ADD CONSTRAINT cap CHECK (cost_micros <= 1000)`); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	w := newWriter(t, pool, Options{Logger: testLogger(t, logs)})
	write(t, w, row("a", "acme", 400), row("b", "acme", 400), row("over", "acme", 500), row("c", "acme", 200))
	closeWriter(t, w)
	ids := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id IN ('a', 'b', 'c')`)
	over := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id = 'over'`)
	if ids != 3 || over != 0 {
		t.Errorf("rows a, b, c: %d (want 3); row over the cap: %d (want 0: rolled back with its spend)", ids, over)
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 1000})
	if s := w.Stats(); s.Rejected != 1 {
		t.Errorf("Rejected %d, want 1", s.Rejected)
	}
	if !strings.Contains(logs.String(), "request_id=over") {
		t.Errorf("the rejection is not logged with the request id:\n%s", logs)
	}
}

// TestGroupCommit: 32 goroutines write 2000 rows; the writer commits them
// in few transactions.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	w := newWriter(t, pool, Options{})
	const goroutines, total = 32, 2000
	var mu sync.Mutex
	want := map[string]int64{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			sums := map[string]int64{}
			for i := g; i < total; i += goroutines {
				tenant := tenants[i%len(tenants)]
				cost := int64(i%97) * 1000
				if err := w.Write(t.Context(), row(fmt.Sprintf("gc-%d", i), tenant, cost)); err != nil {
					t.Error(err)
					return
				}
				sums[tenant] += cost
				// Requests end at random moments, as in a gateway.
				time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
			}
			mu.Lock()
			for k, v := range sums {
				want[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	closeWriter(t, w)
	if n := countRows(t, pool); n != total {
		t.Fatalf("%d rows, want %d", n, total)
	}
	checkLedger(t, pool, thisMonth, want)
	s := w.Stats()
	t.Logf("%d rows in %d transactions: %.1f rows per transaction, max %d; histogram by powers of two %v",
		s.Rows, s.Transactions, s.RowsPerTx(), s.MaxTxRows, s.TxSizes)
	if s.Rows != total || s.InlineWrites != 0 {
		t.Errorf("stats %+v, want %d rows and no inline writes", s, total)
	}
	if s.RowsPerTx() < 10 {
		t.Errorf("%.1f rows per transaction, want at least 10", s.RowsPerTx())
	}
}

// TestLingerEndsWithFullBatch: the writer lingers for more rows without
// taking each as it comes; once a batch's worth is queued, Write signals
// it and the batch is committed at once, not when the linger ends.
func TestLingerEndsWithFullBatch(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	const maxBatch = 16
	w := newWriter(t, pool, Options{Linger: time.Minute, MaxBatch: maxBatch, QueueSize: 1024})
	for i := range 3 * maxBatch {
		write(t, w, row(fmt.Sprintf("full-%d", i), "acme", 1))
	}
	waitFor(t, 10*time.Second, "two full batches stored while the writer lingers a minute", func() bool {
		return countRows(t, pool) >= 2*maxBatch
	})
	if s := w.Stats(); s.MaxTxRows > maxBatch {
		t.Errorf("a transaction of %d rows, want at most %d", s.MaxTxRows, maxBatch)
	}
	// Fewer than a batch: they wait for the linger (or Close).
	write(t, w, row("short-1", "acme", 1))
	time.Sleep(100 * time.Millisecond)
	if n := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id = 'short-1'`); n != 0 {
		t.Errorf("a row of a short batch stored within 100 ms of a minute's linger")
	}
	closeWriter(t, w)
	if n := countRows(t, pool); n != 3*maxBatch+1 {
		t.Errorf("%d rows after Close, want %d", n, 3*maxBatch+1)
	}
}

// TestFullQueueWritesInline: with the writer held up, a Write that finds
// the queue full stores its row itself; nothing is lost.
func TestFullQueueWritesInline(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	w := newWriter(t, pool, Options{QueueSize: 4})
	release := plug(t, pool, w, "acme")
	for i := range 4 {
		write(t, w, row(fmt.Sprintf("queued-%d", i), "globex", 10))
	}
	if d := w.Stats().QueueDepth; d != 4 {
		t.Fatalf("queue depth %d, want 4", d)
	}
	for i := range 6 {
		write(t, w, row(fmt.Sprintf("inline-%d", i), "globex", 100))
	}
	// Inline rows are in Postgres before Write returns, ahead of the queue.
	if n := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id LIKE 'inline-%'`); n != 6 {
		t.Errorf("%d inline rows stored when their Writes returned, want 6", n)
	}
	// A row Postgres rejects, written inline, is reported to the caller.
	err := w.Write(t.Context(), row("inline-bad", "no-such-tenant", 1))
	if !errors.Is(err, ErrRejected) {
		t.Errorf("inline write of an unknown tenant: %v, want ErrRejected", err)
	}
	release()
	closeWriter(t, w)
	if s := w.Stats(); s.InlineWrites != 7 || s.Rejected != 1 {
		t.Errorf("InlineWrites %d, Rejected %d; want 7 and 1", s.InlineWrites, s.Rejected)
	}
	if n := countRows(t, pool); n != 11 {
		t.Errorf("%d rows, want 11 (plug, 4 queued, 6 inline)", n)
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 1, "globex": 640})
}

// TestCloseDrainsFullQueue: Close with a full queue stores every row.
func TestCloseDrainsFullQueue(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	w := newWriter(t, pool, Options{QueueSize: 100, MaxBatch: 10})
	release := plug(t, pool, w, "acme")
	for i := range 100 {
		write(t, w, row(fmt.Sprintf("q-%d", i), "globex", int64(i)))
	}
	if d := w.Stats().QueueDepth; d != 100 {
		t.Fatalf("queue depth %d, want 100", d)
	}
	closed := make(chan error, 1)
	go func() { closed <- w.Close(context.Background()) }()
	// Close waits for the queue while the writer is held up.
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the queue was written", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := w.Write(t.Context(), row("late", "globex", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write during Close: %v, want ErrClosed", err)
	}
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, pool); n != 101 {
		t.Errorf("%d rows, want 101", n)
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 1, "globex": 99 * 100 / 2})
	if s := w.Stats(); s.Transactions < 11 || s.MaxTxRows > 10 || s.SpooledRows != 0 {
		t.Errorf("stats %+v: want at least 11 transactions of at most 10 rows, nothing spooled", s)
	}
}

// TestBadRowIsolated: a row Postgres rejects is found in its batch, logged
// and skipped; the batch's other rows and later ones are stored.
func TestBadRowIsolated(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	logs := &syncBuffer{}
	w := newWriter(t, pool, Options{Logger: testLogger(t, logs)})
	release := plug(t, pool, w, "acme")
	var want int64
	for i := range 40 {
		r := row(fmt.Sprintf("ok-%d", i), "globex", int64(i))
		if i == 17 {
			r = row("bad-17", "no-such-tenant", 5)
		} else {
			want += r.CostMicros
		}
		write(t, w, r)
	}
	before := w.Stats().Transactions
	release()
	waitFor(t, 10*time.Second, "the batch", func() bool { s := w.Stats(); return s.Rows+s.Rejected == 41 })
	s := w.Stats()
	t.Logf("the batch of 40 with one bad row took %d transactions", s.Transactions-before)
	write(t, w, row("after", "globex", 1000))
	closeWriter(t, w)
	if s := w.Stats(); s.Rejected != 1 || s.Rows != 41 {
		t.Errorf("Rejected %d, Rows %d; want 1 and 41", s.Rejected, s.Rows)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE tenant_id = 'globex'`); n != 40 {
		t.Errorf("%d globex rows, want 40", n)
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM call_log WHERE request_id = 'bad-17'`); n != 0 {
		t.Errorf("the bad row is in call_log")
	}
	checkLedger(t, pool, thisMonth, map[string]int64{"globex": want + 1000})
	if !strings.Contains(logs.String(), "request_id=bad-17") {
		t.Errorf("no log line names the bad row:\n%s", logs)
	}
}

// TestMissingPartitionCreated: a row for a month without a partition gets
// one.
func TestMissingPartitionCreated(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	at := MonthStart(time.Now()).AddDate(0, 14, 3)
	part := "call_log_" + at.Format("2006_01")
	if n := queryInt(t, pool, `SELECT count(*) FROM pg_class WHERE relname = $1`, part); n != 0 {
		t.Fatalf("%s exists before the test", part)
	}
	w := newWriter(t, pool, Options{})
	r := row("future", "acme", 4321)
	r.StartedAt = at
	write(t, w, r, row("now", "acme", 1))
	closeWriter(t, w)
	if n := queryInt(t, pool, `SELECT count(*) FROM `+part+` WHERE request_id = 'future'`); n != 1 {
		t.Errorf("%d rows in %s, want 1", n, part)
	}
	checkLedger(t, pool, at, map[string]int64{"acme": 4321})
	checkLedger(t, pool, thisMonth, map[string]int64{"acme": 1})
	if got, err := MonthSpend(t.Context(), pool, "acme", at); err != nil || got != 4321 {
		t.Errorf("MonthSpend = %d, %v; want 4321", got, err)
	}
}

// TestTwoWriters: two Writers on two pools write the same tenants, with no
// counter at first (one tenant with history to seed from) and some rows
// written by both; the counters end exact.
func TestTwoWriters(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	dsn := db.Config().ConnString()
	if _, err := db.Exec(t.Context(), `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cost_micros)
		SELECT 'hist-' || i, 'acme', 'm', 200, $1, i FROM generate_series(1, 50) i`, thisMonth); err != nil {
		t.Fatal(err)
	}
	writers := []*Writer{
		newWriter(t, newPool(t, dsn), Options{MaxBatch: 16}),
		newWriter(t, newPool(t, dsn), Options{MaxBatch: 16}),
	}
	const rows, shared = 1000, 100 // rows 0..99 are written by both
	want := map[string]int64{"acme": 50 * 51 / 2, "globex": 0}
	for i := range rows {
		want[[]string{"acme", "globex"}[i%2]] += int64(i)
	}
	var wg sync.WaitGroup
	for g := range 16 {
		w := writers[g%2]
		wg.Go(func() {
			for i := g / 2; i < rows; i += 8 {
				// Each writer's goroutines cover all rows 0..99 and half of the rest.
				if i >= shared && i%2 != g%2 {
					continue
				}
				r := row(fmt.Sprintf("r-%d", i), []string{"acme", "globex"}[i%2], int64(i))
				if err := w.Write(t.Context(), r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for _, w := range writers {
		closeWriter(t, w)
	}
	if n := countRows(t, db); n != rows+50 {
		t.Errorf("%d rows, want %d", n, rows+50)
	}
	checkLedger(t, db, thisMonth, want)
	s0, s1 := writers[0].Stats(), writers[1].Stats()
	if s0.Duplicates+s1.Duplicates != shared || s0.Rows+s1.Rows != rows+shared {
		t.Errorf("rows %d+%d, duplicates %d+%d; want %d rows of which %d duplicates",
			s0.Rows, s1.Rows, s0.Duplicates, s1.Duplicates, rows+shared, shared)
	}
	t.Logf("writer 0: %d rows in %d transactions; writer 1: %d rows in %d", s0.Rows, s0.Transactions, s1.Rows, s1.Transactions)
}

// TestWriteValidation: rows that can never be stored are refused at once.
func TestWriteValidation(t *testing.T) {
	t.Parallel()
	w := newWriter(t, nil, Options{})
	tests := []struct {
		name   string
		modify func(*Row)
	}{
		{"no request id", func(r *Row) { r.RequestID = "" }},
		{"no tenant", func(r *Row) { r.TenantID = "" }},
		{"no model", func(r *Row) { r.Model = "" }},
		{"zero time", func(r *Row) { r.StartedAt = time.Time{} }},
		{"negative cost", func(r *Row) { r.CostMicros = -1 }},
		{"negative attempts", func(r *Row) { r.Attempts = -1 }},
		{"NUL in model", func(r *Row) { r.Model = "gpt\x00" }},
		{"invalid UTF-8 key", func(r *Row) { r.KeyID = "\xff" }},
		{"long upstream", func(r *Row) { r.Upstream = strings.Repeat("u", maxFieldBytes+1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := row("v", "acme", 1)
			tt.modify(&r)
			if err := w.Write(t.Context(), r); !errors.Is(err, ErrInvalidRow) {
				t.Errorf("Write: %v, want ErrInvalidRow", err)
			}
		})
	}
	closeWriter(t, w)
	if s := w.Stats(); s.SpooledRows != 0 || s.QueueDepth != 0 {
		t.Errorf("an invalid row was kept: %+v", s)
	}
	if err := w.Write(t.Context(), row("v", "acme", 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v, want ErrClosed", err)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
