package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spoolLimit is the file size the drill lets the gateway write: two
// write-ahead log segments' worth (segment_bytes 4KiB keeps every segment
// under it), a score of spooled rows.
const spoolLimit = 8 << 10

// TestDrillCallLogSpoolDiskFull takes Postgres away under streaming load
// so that call-log rows go to the spool, and lets the spool grow only to
// 8 KiB (the gateway process's RLIMIT_FSIZE, lowered from outside with
// prlimit: a write past it fails with EFBIG, the error path of a full
// disk; the Go runtime does not die of SIGXFSZ). Then it gives the space
// back and brings Postgres back. Promised (ADR 0004, ADR 0022,
// docs/POLICY.md call_log): the writer holds the rows the spool will not
// take and retries; meanwhile the gateway refuses new requests with 503
// call_log_unavailable (the writer is stuck: calllog.ErrStuck) rather
// than admitting requests whose rows would wait without bound; those in
// flight finish (a stream's end may be cut if its row could not be made
// durable); once the spool can grow and Postgres answers, every row
// reaches call_log: each request served has exactly one row, nothing is
// lost, spend_month equals SUM(cost).
func TestDrillCallLogSpoolDiskFull(t *testing.T) {
	const id = "calllog-spool-disk"
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-spooldisk")
	// 4 KiB segments stay under the file size limit: only the spool
	// reaches it. A queue of 64 rows (default 8192), which the load fills
	// within a second if requests are still admitted: every Write then
	// waits for the disk, and its request with it, without bound.
	r := w.startReplica(t, "gw", w.policy(t, drillPolicy{wal: "{segment_bytes: 4KiB}", queueSize: 64}))
	r.waitReady(t)
	pid := r.cmd.Process.Pid
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		t.Fatal(err)
	}
	load := newDrillLoad(t, "drill-spooldisk", r.url, key, scaled(8, 32), healthyStreams)
	load.run(scaled(16, 64))
	load.start()
	time.Sleep(scaled(500*time.Millisecond, 3*time.Second))

	// The spool is empty (Postgres answers): it cannot be over the limit.
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: spoolLimit, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	limited := true
	raise := func() {
		if limited {
			limited = false
			if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil); err != nil {
				t.Error(err)
			}
		}
	}
	defer raise()
	killed := time.Now()
	if err := w.pg.Kill(); err != nil {
		t.Fatal(err)
	}
	// Wait until the spool is what fails, and fails for its size.
	var full time.Time
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		logs := r.logText()
		if i := strings.Index(logs, "cannot append to the spool"); i >= 0 {
			line, _, _ := strings.Cut(logs[i:], "\n")
			if !strings.Contains(line, "file too large") {
				t.Fatalf("the spool failed, but not for its size: %s", line)
			}
			full = time.Now()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the spool did not fill within 30s of Postgres going down; tally %s; logs:\n%s",
				tallyString(tally(load.outcomes())), tail(logs, 3000))
		}
	}
	spooled := fileSize(t, filepath.Join(r.spool, "0", "calllog.spool"))
	if spooled > spoolLimit {
		t.Errorf("the spool holds %d bytes, past the %d byte limit", spooled, spoolLimit)
	}
	// The writer is stuck: requests are refused. Keep the load on against
	// the full spool a while longer.
	refusing := waitOutcome(t, load, full, func(o *drillOutcome) bool {
		return o.kind == refused && o.code == "call_log_unavailable"
	})
	time.Sleep(scaled(time.Second, 10*time.Second))
	select {
	case <-r.exited:
		t.Fatalf("the gateway exited with the spool full (%v):\n%s", r.err, tail(r.logText(), 3000))
	default:
	}
	fixed := time.Now()
	raise()
	if err := w.pg.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	var replayedAt time.Time
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if strings.Contains(r.logText(), "spool replayed to Postgres") {
			replayedAt = time.Now()
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the spool was not replayed 30s after Postgres returned; logs:\n%s", tail(r.logText(), 3000))
		}
	}
	time.Sleep(scaled(time.Second, 3*time.Second))
	load.stopLoad()
	outs := load.outcomes()

	// Refused or cut from when Postgres went down (rows pile up from
	// then) until shortly after the space came back.
	during := func(o *drillOutcome) bool {
		return !o.ended.Before(killed) && o.started.Before(back.Add(2*time.Second))
	}
	refusals, cuts, slowest := expectLedgerFaultOutcomes(t, outs, during)
	if refusals == 0 {
		t.Error("no request was refused while the spool was full")
	}
	// No request waits for the spool: a refusal is immediate, a served
	// stream takes what its upstream takes.
	if bound := scaled(5*time.Second, 10*time.Second); slowest > bound {
		t.Errorf("a request took %s while the spool was full: requests must not wait for it (bound %s)", dur(slowest), bound)
	}
	servedAfter := countOf(outs, func(o *drillOutcome) bool { return o.kind == served && o.started.After(replayedAt) })
	if servedAfter == 0 {
		t.Error("nothing served after the spool was replayed")
	}
	c := w.checkLedger(t, "drill-spooldisk", outs, nil)
	expectNothingLost(t, c)
	if strings.Contains(r.logText(), "rows lost") {
		t.Errorf("the gateway logged lost rows:\n%s", tail(r.logText(), 3000))
	}
	report(t, drillResult{
		id: id,
		fault: fmt.Sprintf("Postgres killed (SIGKILL) and the gateway's file size limit (RLIMIT_FSIZE) lowered to %d KiB: the spool full "+
			"(EFBIG) %s after the kill and kept full for %s; then the limit raised and Postgres restarted",
			spoolLimit>>10, dur(full.Sub(killed)), dur(fixed.Sub(full))),
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed) in %s; %d streams open at the kill",
			load.workers, len(outs), dur(load.took), openAt(outs, killed)),
		happened: fmt.Sprintf("the spool took %d bytes of rows, then the writer held the rest and retried, and new requests were refused "+
			"(the first %s after): %d requests refused with 503 call_log_unavailable, %d streams cut before their end; "+
			"the slowest request in the fault took %s; the spool replayed %s after Postgres returned, %d served after that",
			spooled, dur(refusing.Sub(full)), refusals, cuts, dur(slowest), dur(replayedAt.Sub(back)), servedAfter),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillCallLogSpoolDiskFull$",
	})
}

// fileSize is the size of the file at path (0 if it does not exist).
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
