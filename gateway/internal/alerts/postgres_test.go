package alerts

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

var migrated = &pgtest.Template{Name: "migrated", Prepare: pgtest.Migrate}

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestPostgresOutbox(t *testing.T) {
	t.Parallel()
	ob := NewPostgres(newPool(t, pgtest.SharedFrom(t, migrated).DSN()))
	outboxContract(t, ob, time.Sleep)
}

// Two gateways on one database, both reporting every crossing (and one a
// second time), with a webhook that fails a third of first attempts:
// every crossing is delivered exactly once, and the rows say so.
func TestTwoWorkersDeliverOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedFrom(t, migrated).DSN()
	r := newReceiver(t, func(id string, n int) int {
		if n == 1 && id[len(id)-1]%3 == 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	const n = 60
	at := time.Now()
	cs := append(crossings(n/2, 80, at), crossings(n/2, 100, at)...)
	var ds [2]*Dispatcher
	for i := range ds {
		ds[i] = newDispatcher(t, testOptions(t, r, NewPostgres(newPool(t, dsn))))
	}
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			for _, c := range cs {
				d.Crossed(context.Background(), []budget.Crossing{c})
			}
			if i == 0 {
				d.Crossed(context.Background(), cs)
			}
		})
	}
	wg.Wait()
	r.waitDelivered(n, 20*time.Second)
	// Wait for the gateways to count (and mark) them, then leave room
	// for a wrong second delivery.
	for deadline := time.Now().Add(10 * time.Second); ds[0].Stats().Delivered+ds[1].Stats().Delivered < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	_, delivered, _ := r.snapshot()
	for _, c := range cs {
		if id := FromCrossing(c).ID; delivered[id] != 1 {
			t.Errorf("%s (%s at %d%%) delivered %d times, want 1", id, c.Tenant, c.Threshold, delivered[id])
		}
	}
	var fired, sent int64
	for i, d := range ds {
		st := d.Stats()
		t.Logf("gateway %d: %+v", i, st)
		fired += st.Fired[80] + st.Fired[100]
		sent += st.Delivered
	}
	if fired != n || sent != n {
		t.Errorf("fired %d, delivered %d across the gateways, want %d each", fired, sent, n)
	}
	pool := newPool(t, dsn)
	var rows, done int
	if err := pool.QueryRow(t.Context(), `SELECT count(*), count(delivered_at) FROM budget_alerts`).Scan(&rows, &done); err != nil {
		t.Fatal(err)
	}
	if rows != n || done != n {
		t.Errorf("%d rows, %d delivered, want %d", rows, done, n)
	}
}

// Alerts survive the gateway and Postgres restarting before delivery; one
// gateway leased and died with is delivered by another once the lease
// ends; and reports while Postgres is down neither block nor get lost.
func TestRestartSurvival(t *testing.T) {
	srv := pgtest.Start(t)
	if err := pgtest.Migrate(t.Context(), srv.DSN()); err != nil {
		t.Fatal(err)
	}
	r := newReceiver(t, nil)
	at := time.Now()
	cs := crossings(4, 80, at)

	// Gateway 1 stores two alerts and stops without delivering them.
	o := testOptions(t, r, NewPostgres(newPool(t, srv.DSN())))
	o.NoWorker = true
	d1, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	d1.Crossed(t.Context(), cs[:2])
	if err := d1.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Gateway 2 claims the third and dies mid-delivery (never answers).
	ob2 := NewPostgres(newPool(t, srv.DSN()))
	if _, err := ob2.Add(t.Context(), []Alert{FromCrossing(cs[2])}); err != nil {
		t.Fatal(err)
	}
	leased, err := ob2.Claim(t.Context(), 5, 2*time.Second)
	if err != nil || len(leased) != 3 {
		t.Fatalf("claimed %d, %v, want 3", len(leased), err)
	}
	leasedAt := time.Now()
	if _, _, bad := r.snapshot(); len(bad) != 0 {
		t.Fatal(bad)
	}
	// Postgres restarts.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// Gateway 3 starts while Postgres is down; a report does not wait.
	d3 := newDispatcher(t, testOptions(t, r, NewPostgres(newPool(t, srv.DSN()))))
	begin := time.Now()
	d3.Crossed(t.Context(), cs[3:])
	if took := time.Since(begin); took > 50*time.Millisecond {
		t.Errorf("a report with Postgres down took %v", took)
	}
	time.Sleep(200 * time.Millisecond)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	delivered := r.waitDelivered(4, 20*time.Second)
	for _, c := range cs {
		if id := FromCrossing(c).ID; delivered[id] != 1 {
			t.Errorf("%s delivered %d times, want 1", id, delivered[id])
		}
	}
	// The leased ones waited for their lease.
	if since := time.Since(leasedAt); since < 2*time.Second {
		t.Errorf("all delivered %v after a 2s lease was taken", since)
	}
	// The receiver counts a delivery before the gateway reads its answer
	// and marks the row: wait for the marks.
	pool := newPool(t, srv.DSN())
	var pending int64 = -1
	for deadline := time.Now().Add(10 * time.Second); pending != 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM budget_alerts WHERE delivered_at IS NULL`).Scan(&pending); err != nil {
			t.Fatal(err)
		}
	}
	if pending != 0 {
		t.Errorf("%d rows pending", pending)
	}
	attempts, _, _ := r.snapshot()
	if st := d3.Stats(); st.Delivered != 4 || st.Lost != 0 || attempts[FromCrossing(cs[0]).ID] != 1 {
		t.Errorf("stats %+v, attempts %v", st, attempts)
	}
}

// An alert Postgres rejects as bad data is dropped and counted, alone: the
// rest of its batch is stored and delivered, and the queue keeps moving.
func TestRejectedAlert(t *testing.T) {
	t.Parallel()
	dsn := pgtest.SharedFrom(t, migrated).DSN()
	r := newReceiver(t, nil)
	d := newDispatcher(t, testOptions(t, r, NewPostgres(newPool(t, dsn))))
	cs := crossings(4, 80, time.Now())
	cs[1].Tenant = "bad\x00tenant" // text cannot hold NUL
	cs[2].Scope.Kind = "team"      // not a scope kind
	d.Crossed(t.Context(), cs)
	d.Crossed(t.Context(), crossings(6, 100, time.Now())[4:])
	r.waitDelivered(4, 10*time.Second)
	waitCounted(t, d, 4)
	_, delivered, _ := r.snapshot()
	for _, c := range []budget.Crossing{cs[0], cs[3]} {
		if id := FromCrossing(c).ID; delivered[id] != 1 {
			t.Errorf("%s delivered %d times, want 1", c.Tenant, delivered[id])
		}
	}
	if st := d.Stats(); st.Lost != 2 || st.Fired[80] != 2 || st.Fired[100] != 2 {
		t.Errorf("stats %+v, want 2 lost and 2 fired at each threshold", st)
	}
}

// Prune deletes finished rows older than its age, and nothing pending.
func TestPostgresPrune(t *testing.T) {
	t.Parallel()
	pool := newPool(t, pgtest.SharedFrom(t, migrated).DSN())
	ob := NewPostgres(pool)
	ctx := t.Context()
	var as []Alert
	for _, c := range crossings(4, 80, time.Now()) {
		as = append(as, FromCrossing(c))
	}
	if _, err := ob.Add(ctx, as); err != nil {
		t.Fatal(err)
	}
	claimed, err := ob.Claim(ctx, 3, time.Hour)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ob.Delivered(ctx, claimed[0].ID))
	must(ob.Delivered(ctx, claimed[1].ID))
	if _, err := ob.Failed(ctx, claimed[2].ID, "x", 0, 0); err != nil {
		t.Fatal(err)
	}
	// Age every row but the first delivered one past the retention.
	_, err = pool.Exec(ctx, `UPDATE budget_alerts SET created_at = now() - interval '50 days' WHERE id <> $1`, claimed[0].ID)
	must(err)
	n, err := ob.Prune(ctx, Retention)
	must(err)
	var left []string
	rows, err := pool.Query(ctx, `SELECT id FROM budget_alerts ORDER BY id`)
	must(err)
	for rows.Next() {
		var id string
		must(rows.Scan(&id))
		left = append(left, id)
	}
	must(rows.Err())
	want := []string{claimed[0].ID}
	for _, a := range as {
		if a.ID != claimed[0].ID && a.ID != claimed[1].ID && a.ID != claimed[2].ID {
			want = append(want, a.ID) // pending: kept however old
		}
	}
	slices.Sort(want)
	if n != 2 || !slices.Equal(left, want) {
		t.Errorf("pruned %d, left %v; want 2 pruned, %v left", n, left, want)
	}
}
