package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/proxy"
)

// waitOutcome waits (up to 20 s) until the load has an outcome that
// started after from and that ok accepts, and returns when it ended.
func waitOutcome(t *testing.T, l *drillLoad, from time.Time, ok func(o *drillOutcome) bool) time.Time {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		outs := l.outcomes()
		for i := range outs {
			if outs[i].started.After(from) && ok(&outs[i]) {
				return outs[i].ended
			}
		}
	}
	t.Fatalf("no request after %v came out as wanted within 20s; tally %s", from.Format("15:04:05.000"), tallyString(tally(l.outcomes())))
	return time.Time{}
}

// refusalsStopWithin bounds how long after Redis answers again a request
// may still be refused for want of it: docs/RELIABILITY.md promises "a
// few hundred milliseconds" (the gateway's Redis client redials on the
// next command; measured 32 ms in the long form). The bound is on when
// the refused request was sent, so a slow machine that delays replies
// does not move it.
const refusalsStopWithin = 500 * time.Millisecond

// TestDrillRedisKill kills Redis under streaming load and restarts it
// empty. Promised (docs/POLICY.md, ratelimit and budget): each plugin
// applies its on_redis_error — ratelimit fail_open decides in-process and
// counts it, budget fail_closed refuses new requests with 503
// budget_unavailable; streams already admitted finish; the gateway goes
// back to Redis by itself; the counter is re-seeded from Postgres, and
// the reconcile job corrects what the outage left it missing.
func TestDrillRedisKill(t *testing.T) {
	const id = "redis-kill"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-redis")
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{reconcile: "1s"}))
	metrics := srv.MetricsHandler()
	load := newDrillLoad(t, "drill-redis", gw, key, scaled(8, 32), healthyStreams)
	load.run(scaled(16, 64)) // warm: key cached, counter seeded, connections open
	load.start()
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))

	fallbacks := metric(t, metrics, "tollgate_ratelimit_decisions_total", `result="fallback"`)
	killed := time.Now()
	if err := w.redis.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scaled(time.Second, 5*time.Second))
	if err := w.redis.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	recovered := waitOutcome(t, load, back, func(o *drillOutcome) bool { return o.kind == served })
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))
	load.stopLoad()
	outs := load.outcomes()
	fallbacks = metric(t, metrics, "tollgate_ratelimit_decisions_total", `result="fallback"`) - fallbacks

	refusals, lastRefusal := 0, time.Time{}
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		if o.kind == refused && o.status == 503 && o.code == "budget_unavailable" && o.ended.After(killed) {
			refusals++
			if o.started.After(lastRefusal) {
				lastRefusal = o.started
			}
			return true
		}
		return o.kind == served
	})
	if refusals == 0 || fallbacks == 0 {
		t.Errorf("the outage was not seen under load: %d budget refusals, %v ratelimit fallbacks", refusals, fallbacks)
	}
	if late := lastRefusal.Sub(back); late > refusalsStopWithin {
		t.Errorf("a request sent %s after Redis answered again was refused budget_unavailable (%d refusals in all); refusals must stop within %s",
			dur(late), refusals, refusalsStopWithin)
	}
	c := w.checkLedger(t, "drill-redis", outs, nil)
	expectNothingLost(t, c)
	if held := w.waitReleased(t, "drill-redis", 5*time.Second); held != 0 {
		t.Errorf("%d µ$ still held after the load", held)
	}
	// The counter came back empty and was re-seeded from spend_month while
	// some rows were still on their way: the reconcile job (every second
	// here) brings it to what call_log holds.
	var spent int64
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if spent, _ = w.budgetCounter(t, "drill-redis"); spent == c.sum {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the Redis counter (%d µ$) did not converge to call_log's sum (%d µ$)", spent, c.sum)
		}
	}
	drift := metric(t, metrics, "tollgate_budget_reconcile_drift_micros_total", "")
	lastRefusalText := "no refusal sent after that"
	if after := lastRefusal.Sub(back); after > 0 {
		lastRefusalText = "the last refusal sent " + dur(after) + " after it"
	}
	report(t, drillResult{
		id:    id,
		fault: fmt.Sprintf("Redis killed (SIGKILL) for %s, restarted empty", dur(back.Sub(killed))),
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s; %d streams open at the kill",
			load.workers, len(outs), dur(load.took), openAt(outs, killed)),
		happened: fmt.Sprintf("ratelimit (fail_open) decided %.0f requests in-process; budget (fail_closed) refused %d with 503 budget_unavailable; "+
			"every stream already admitted finished (served: %s); served again %s after Redis returned, %s; "+
			"the counter, re-seeded from spend_month, equals call_log (the reconcile job, every 1 s, corrected %.0f µ$)",
			fallbacks, refusals, latency(outs, healthyServed), dur(recovered.Sub(back)), lastRefusalText, drift),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillRedisKill$",
	})
}

// TestDrillPostgresKill kills Postgres under streaming load and restarts
// it. Promised (DESIGN §6, ADR 0004): warm requests are unaffected (the
// tenant cache serves them, stale while reloads fail); call_log rows go to
// the spool and are replayed when Postgres is back; nothing is lost or
// written twice.
func TestDrillPostgresKill(t *testing.T) {
	const id = "postgres-kill"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-pg")
	srv, gw := w.gateway(t, w.policy(t, drillPolicy{}))
	load := newDrillLoad(t, "drill-pg", gw, key, scaled(8, 32), healthyStreams)
	load.run(scaled(16, 64))
	load.start()
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))

	killed := time.Now()
	if err := w.pg.Kill(); err != nil {
		t.Fatal(err)
	}
	// The long form keeps it down past the cache's 3 s TTL: keys are then
	// served stale while their reloads fail.
	time.Sleep(scaled(time.Second, 5*time.Second))
	if err := w.pg.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	replayedAt := waitSpoolReplayed(t, srv, 30*time.Second, "Postgres returned", false)
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))
	load.stopLoad()
	outs := load.outcomes()

	expectOutcomes(t, outs, func(o *drillOutcome) bool { return o.kind == served })
	c := w.checkLedger(t, "drill-pg", outs, nil)
	expectNothingLost(t, c)
	st := srv.AccountingStats().Ledger
	if st.Lost != 0 || st.Rejected != 0 || st.ReplayedRows != st.SpooledRows {
		t.Errorf("ledger stats %+v: rows lost, rejected or not replayed", st)
	}
	if spent, held := w.budgetCounter(t, "drill-pg"); spent != c.sum || held != 0 {
		t.Errorf("Redis counter %d µ$ (held %d), call_log %d µ$", spent, held, c.sum)
	}
	report(t, drillResult{
		id:    id,
		fault: fmt.Sprintf("Postgres killed (SIGKILL, crash recovery at restart) for %s", dur(back.Sub(killed))),
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s; %d streams open at the kill",
			load.workers, len(outs), dur(load.took), openAt(outs, killed)),
		happened: fmt.Sprintf("every request served whole from the caches (tenant cache TTL 3 s, stale served while reloads failed), in %s; "+
			"%d call_log rows spooled and replayed %s after Postgres returned; Redis counter = call_log",
			latency(outs, healthyServed), st.SpooledRows, dur(replayedAt.Sub(back))),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillPostgresKill$",
	})
}

// waitSpoolReplayed waits until srv's call log has replayed every row it
// spooled and stopped spooling (and, with drained, emptied its queue), and
// returns when; it fails t after within ("... after " + since).
func waitSpoolReplayed(t *testing.T, srv *proxy.Server, within time.Duration, since string, drained bool) time.Time {
	t.Helper()
	for end := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		st := srv.AccountingStats().Ledger
		if st.SpooledRows > 0 && st.ReplayedRows == st.SpooledRows && !st.Spooling && (!drained || st.QueueDepth == 0) {
			return time.Now()
		}
		if time.Now().After(end) {
			t.Fatalf("the spool was not replayed %v after %s: %+v", within, since, st)
		}
	}
}
