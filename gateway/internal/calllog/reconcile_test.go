package calllog

import (
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReconcileCorrectsDrift: counters changed behind the ledger's back
// (raised, lowered, deleted, invented) are found, reported and corrected,
// and fix hears every tenant-month checked.
func TestReconcileCorrectsDrift(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	now := time.Now()
	cur, prev := MonthStart(now), MonthStart(now).AddDate(0, -1, 0)
	w := newWriter(t, pool, Options{})
	last := row("p1", "acme", 50)
	last.StartedAt = prev.Add(time.Hour) // last month: the writer creates its partition
	write(t, w, row("c1", "acme", 100), row("c2", "acme", 200), row("g1", "globex", 70), last)
	closeWriter(t, w)

	for _, edit := range []struct {
		sql   string
		month time.Time
	}{
		{`UPDATE spend_month SET cost_micros = cost_micros + 999 WHERE tenant_id = 'acme' AND month = $1`, cur},
		{`DELETE FROM spend_month WHERE tenant_id = 'globex' AND month = $1`, cur},
		{`INSERT INTO spend_month VALUES ('initech', $1, 5)`, cur},
		{`UPDATE spend_month SET cost_micros = 0 WHERE tenant_id = 'acme' AND month = $1`, prev},
	} {
		if _, err := pool.Exec(ctx, edit.sql, edit.month); err != nil {
			t.Fatalf("%s: %v", edit.sql, err)
		}
	}
	// The fallback of MonthSpend, for the deleted counter.
	if got, err := MonthSpend(ctx, pool, "globex", now); err != nil || got != 70 {
		t.Errorf("MonthSpend(globex) without a counter = %d, %v; want 70 from call_log", got, err)
	}

	type key struct {
		tenant string
		month  time.Time
	}
	fixed := map[key]int64{}
	fix := func(tenant string, month time.Time, spent int64) { fixed[key{tenant, month}] = spent }
	res, err := Reconcile(ctx, pool, now, fix)
	if err != nil {
		t.Fatal(err)
	}
	want := ReconcileResult{Ran: true, Checked: 4, Drifts: []Drift{
		{Tenant: "acme", Month: prev, Counter: 0, Actual: 50},
		{Tenant: "acme", Month: cur, Counter: 1299, Actual: 300},
		{Tenant: "globex", Month: cur, Counter: 0, Actual: 70},
		{Tenant: "initech", Month: cur, Counter: 5, Actual: 0},
	}}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("Reconcile =\n%+v\nwant\n%+v", res, want)
	}
	wantFixed := map[key]int64{{"acme", prev}: 50, {"acme", cur}: 300, {"globex", cur}: 70, {"initech", cur}: 0}
	if !reflect.DeepEqual(fixed, wantFixed) {
		t.Errorf("fix calls %v, want %v", fixed, wantFixed)
	}
	checkLedger(t, pool, cur, map[string]int64{"acme": 300, "globex": 70, "initech": 0})
	checkLedger(t, pool, prev, map[string]int64{"acme": 50})

	res, err = Reconcile(ctx, pool, now, nil)
	if err != nil || !res.Ran || res.Checked != 4 || len(res.Drifts) != 0 {
		t.Errorf("second Reconcile = %+v, %v; want 4 checked, no drift", res, err)
	}
}

// TestReconcileLocked: while one Reconcile runs (or anyone holds its
// lock), another returns at once with Ran false.
func TestReconcileLocked(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	w := newWriter(t, pool, Options{})
	write(t, w, row("a", "acme", 1), row("b", "globex", 2))
	closeWriter(t, w)

	var inner []ReconcileResult
	res, err := Reconcile(ctx, pool, time.Now(), func(string, time.Time, int64) {
		// Runs inside the first Reconcile, which holds the lock.
		r, err := Reconcile(ctx, pool, time.Now(), func(string, time.Time, int64) { t.Error("fix called without the lock") })
		if err != nil {
			t.Error(err)
		}
		inner = append(inner, r)
	})
	if err != nil || !res.Ran || res.Checked != 2 {
		t.Fatalf("outer Reconcile = %+v, %v; want Ran and 2 checked", res, err)
	}
	if len(inner) != 2 || inner[0].Ran || inner[1].Ran || inner[0].Checked != 0 {
		t.Errorf("concurrent Reconciles = %+v, want two with Ran false", inner)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, ReconcileLockKey); err != nil {
		t.Fatal(err)
	}
	if res, err := Reconcile(ctx, pool, time.Now(), nil); err != nil || res.Ran {
		t.Errorf("Reconcile while another session holds the lock = %+v, %v; want Ran false", res, err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ReconcileLockKey); err != nil {
		t.Fatal(err)
	}
	if res, err := Reconcile(ctx, pool, time.Now(), nil); err != nil || !res.Ran {
		t.Errorf("Reconcile after the unlock = %+v, %v; want Ran", res, err)
	}
}

// TestReconcileWhileWriting: Reconcile running over and over while two
// Writers commit batches never reports a drift, because there is none:
// a batch in progress must not look like one. (Summing before locking the
// counter fails this test.)
func TestReconcileWhileWriting(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	dsn := pool.Config().ConnString()
	writers := []*Writer{
		newWriter(t, newPool(t, dsn), Options{MaxBatch: 8}),
		newWriter(t, newPool(t, dsn), Options{MaxBatch: 8}),
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]int64{}
	for g := range 8 {
		w := writers[g%2]
		wg.Go(func() {
			sums := map[string]int64{}
			for i := 0; !stop.Load(); i++ {
				r := row(fmt.Sprintf("rw-%d-%d", g, i), tenants[i%2], int64(1+i%7))
				if err := w.Write(t.Context(), r); err != nil {
					t.Error(err)
					break
				}
				sums[r.TenantID] += r.CostMicros
				time.Sleep(100 * time.Microsecond)
			}
			mu.Lock()
			for k, v := range sums {
				want[k] += v
			}
			mu.Unlock()
		})
	}
	runs, drifts := 0, 0
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		res, err := Reconcile(t.Context(), pool, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		drifts += len(res.Drifts)
		for _, d := range res.Drifts {
			t.Errorf("false drift while writing: %+v", d)
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, w := range writers {
		closeWriter(t, w)
	}
	s0, s1 := writers[0].Stats(), writers[1].Stats()
	t.Logf("%d reconciles, %d drifts, during %d + %d transactions", runs, drifts, s0.Transactions, s1.Transactions)
	if runs < 3 || s0.Transactions+s1.Transactions < 20 {
		t.Errorf("too little overlap to mean anything: %d reconciles, %d transactions", runs, s0.Transactions+s1.Transactions)
	}
	checkLedger(t, pool, thisMonth, want)
}

// TestMonthSpend: the counter if there is one, else the log's sum, else 0.
func TestMonthSpend(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	before := MonthStart(thisMonth).Add(-time.Microsecond) // Postgres keeps microseconds
	if _, err := pool.Exec(ctx, `SELECT tollgate_ensure_call_log_partition($1)`, before); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, cost_micros)
		VALUES ('x', 'globex', 'm', 200, $1, 40), ('y', 'globex', 'm', 200, $1, 2),
		       ('z', 'globex', 'm', 200, $2, 1000)`, thisMonth, before); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO spend_month VALUES ('acme', $1, 777)`, MonthStart(thisMonth)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		tenant string
		month  time.Time
		want   int64
	}{
		{"acme", thisMonth, 777},
		{"globex", thisMonth, 42}, // no counter; the row of the instant before the month is not counted
		{"globex", MonthStart(thisMonth).AddDate(0, -1, 5), 1000},
		{"initech", thisMonth, 0},
	}
	for _, tt := range tests {
		got, err := MonthSpend(ctx, pool, tt.tenant, tt.month)
		if err != nil || got != tt.want {
			t.Errorf("MonthSpend(%s, %s) = %d, %v; want %d", tt.tenant, tt.month.Format("2006-01"), got, err, tt.want)
		}
	}
}

// TestStartReconciler: it runs at once and then every interval, reporting
// each result, until Stop.
func TestStartReconciler(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	if _, err := pool.Exec(t.Context(), `INSERT INTO spend_month VALUES ('acme', $1, 9)`, MonthStart(time.Now())); err != nil {
		t.Fatal(err)
	}
	results := make(chan ReconcileResult, 100)
	var fixes atomic.Int64
	r := StartReconciler(pool, 30*time.Millisecond, func(string, time.Time, int64) { fixes.Add(1) },
		testLogger(t, nil), func(res ReconcileResult) { results <- res })
	first, second := <-results, <-results
	r.Stop()
	r.Stop()
	if !first.Ran || len(first.Drifts) != 1 || first.Drifts[0].Counter != 9 || !second.Ran || len(second.Drifts) != 0 {
		t.Errorf("first %+v, second %+v; want the drift corrected once", first, second)
	}
	if fixes.Load() < 2 {
		t.Errorf("fix called %d times, want one per run", fixes.Load())
	}
	if n := counter(t, pool, "acme", time.Now()); n != 0 {
		t.Errorf("counter %d after reconciling, want 0", n)
	}
}
