package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// walRecovered is the rows a gateway's log says it moved from an earlier
// run's write-ahead log into the spool (0: none).
func walRecovered(logs string) int {
	m := regexp.MustCompile(`moved the write-ahead log of an earlier run to the spool.*?rows"?[=:](\d+)`).FindStringSubmatch(logs)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestDrillCallLogDiskFailure takes the call log's write-ahead log
// directory away under streaming load (a file where it was: no new segment
// can be created, as when its disk fails or fills), then gives it back.
// Promised (ADR 0022, docs/POLICY.md call_log.wal): the gateway serves no
// request it cannot record — requests are refused with 503
// call_log_unavailable, a non-streamed reply whose row could not be made
// durable is withheld (503), a stream's end is cut — and serves again
// once the directory is back; every request served has exactly one row.
func TestDrillCallLogDiskFailure(t *testing.T) {
	const id = "calllog-wal-disk"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-waldisk")
	// 4 KiB segments: a new one every dozen rows, so the fault shows at
	// once.
	r := w.startReplica(t, "gw", w.policy(t, drillPolicy{wal: "{segment_bytes: 4KiB}"}))
	r.waitReady(t)
	load := newDrillLoad(t, "drill-waldisk", r.url, key, scaled(8, 32), healthyStreams)
	load.run(scaled(16, 64))
	load.start()
	time.Sleep(scaled(time.Second, 5*time.Second))

	dir := filepath.Join(r.spool, "0", "wal")
	broke := time.Now()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scaled(2*time.Second, 10*time.Second))
	fixed := time.Now()
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scaled(3*time.Second, 10*time.Second))
	load.stopLoad()
	outs := load.outcomes()

	during := func(o *drillOutcome) bool {
		return !o.ended.Before(broke) && o.started.Before(fixed.Add(2*time.Second))
	}
	refusals, cuts, _ := expectLedgerFaultOutcomes(t, outs, during)
	if refusals == 0 {
		t.Error("no request was refused while the write-ahead log could not be written")
	}
	servedAfter := countOf(outs, func(o *drillOutcome) bool { return o.kind == served && o.started.After(fixed.Add(2*time.Second)) })
	if servedAfter == 0 {
		t.Error("nothing served after the directory came back")
	}
	c := w.checkLedger(t, "drill-waldisk", outs, nil)
	expectNothingLost(t, c)
	report(t, drillResult{
		id:    id,
		fault: fmt.Sprintf("the call log's write-ahead log directory replaced by a file for %s (no segment can be created), then restored", dur(fixed.Sub(broke))),
		load:  fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s", load.workers, len(outs), dur(load.took)),
		happened: fmt.Sprintf("%d requests refused with 503 call_log_unavailable and %d streams cut before their end while it could not be written; "+
			"%d served after it came back", refusals, cuts, servedAfter),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillCallLogDiskFailure$",
	})
}

// expectLedgerFaultOutcomes checks the outcomes of a drill on the call
// log's disk: every request served, except during the fault (during),
// when it may be refused with 503 call_log_unavailable or, streamed, cut
// before its end. It returns those refusals and cuts, and the longest
// request of the fault.
func expectLedgerFaultOutcomes(t *testing.T, outs []drillOutcome, during func(*drillOutcome) bool) (refusals, cuts int, slowest time.Duration) {
	t.Helper()
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		if during(o) {
			slowest = max(slowest, o.ended.Sub(o.started))
		}
		switch {
		case o.kind == served:
			return true
		case during(o) && o.kind == refused && o.status == 503 && o.code == "call_log_unavailable":
			refusals++
			return true
		case during(o) && o.kind == cut:
			cuts++
			return true
		}
		return false
	})
	return refusals, cuts, slowest
}
