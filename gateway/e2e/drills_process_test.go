package e2e

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The drills that need gateway processes: signals, a crash, reloads.

// TestDrillSIGTERM holds streams open through a gateway process and sends
// it SIGTERM. Promised (docs/POLICY.md drain_timeout, docs/SCALING.md):
// it stops accepting at once and readiness fails, every open stream runs
// to its [DONE] within the drain time, the call log is flushed before it
// exits, and it exits 0.
func TestDrillSIGTERM(t *testing.T) {
	const id = "sigterm-open-streams"
	streams := scaled(100, 500)
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-sigterm")
	r := w.startReplica(t, "gw", w.policy(t, drillPolicy{drain: "30s"}))
	r.waitReady(t)
	// Every stream lasts about a second (20 tokens 50 ms apart), each on
	// its own connection.
	load := newDrillLoad(t, "drill-sigterm", r.url, key, streams, func(int) drillReq {
		return drillReq{stream: true, hdr: []string{mockllm.HeaderInterToken, scaled("50ms", "100ms")}}
	})
	load.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	load.run(4) // warm
	base := w.mock.Stats().Streams
	done := make(chan struct{})
	go func() { load.run(streams); close(done) }()
	for end := time.Now().Add(30 * time.Second); w.mock.Stats().Streams-base < int64(streams); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("only %d of %d streams reached the upstream", w.mock.Stats().Streams-base, streams)
		}
	}
	sent := time.Now()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once (no -shutdown-delay): probes and new
	// requests find nothing to connect to.
	time.Sleep(100 * time.Millisecond)
	late := newDrillLoad(t, "drill-sigterm-late", r.url, key, 1, func(int) drillReq { return drillReq{stream: true, fault: "sent after SIGTERM"} })
	late.client = load.client
	late.run(3)
	probeFailed := !r.ready()
	<-done
	select {
	case <-r.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("the gateway did not exit 60s after SIGTERM")
	}
	exit := r.exitedAt.Sub(sent)
	if r.err != nil {
		t.Errorf("gateway exit: %v", r.err)
	}
	if !probeFailed {
		t.Error("readiness still answered 200 after SIGTERM")
	}
	outs := append(load.outcomes(), late.outcomes()...)
	if n := openAt(outs, sent); n != streams {
		t.Errorf("%d streams open at SIGTERM, want %d", n, streams)
	}
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		if o.fault != "" {
			return o.kind == noReply || (o.kind == refused && o.code == "shutting_down")
		}
		return o.kind == served
	})
	// The process is gone: whatever it did not write before exiting is
	// lost, so the rows are checked at once (checkLedger does not wait
	// for rows that are all there).
	c := w.checkLedger(t, "drill-sigterm", outs, nil)
	expectNothingLost(t, c)
	if held := w.waitReleased(t, "drill-sigterm", time.Second); held != 0 {
		t.Errorf("%d µ$ still held after the drain", held)
	}
	report(t, drillResult{
		id:    id,
		fault: fmt.Sprintf("SIGTERM with %d streams open (drain_timeout 30 s)", streams),
		load:  fmt.Sprintf("%d streams of 20 tokens %s apart, one connection each", streams, scaled("50 ms", "100 ms")),
		happened: fmt.Sprintf("readiness failed and the listener closed at once (%d requests sent after SIGTERM: %s); all %d streams open at SIGTERM ran to [DONE] with their whole text; "+
			"the call log was flushed and the process exited 0 %s after SIGTERM",
			len(late.outcomes()), tallyString(onlyFaulted(outs)), openAt(outs, sent), dur(exit)),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillSIGTERM$",
	})
}

// TestDrillReplicaSIGKILL runs two replicas behind a balancer under
// streaming load and kills one with SIGKILL. Promised (ADR 0004, ADR 0022,
// budget leases, docs/SCALING.md): the other replica serves on; the
// streams open on the killed one are cut (the drill's doing) and their
// budget holds expire with their lease; the replacement, started on the
// victim's spool directory as a restarted process would be, stores the
// rows the victim's write-ahead log held: every request whose reply
// completed has exactly one row, the victim's last ones included, and the
// counter equals call_log.
func TestDrillReplicaSIGKILL(t *testing.T) {
	const id = "replica-sigkill"
	const lease = 2 * time.Second
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-sigkill")
	pol := w.policy(t, drillPolicy{lease: "2s", replicas: 2, reconcile: "1s"})
	reps := w.startReplicas(t, 2, pol)
	lb := newBalancer(50*time.Millisecond, 100*time.Millisecond, reps...)
	defer lb.close()
	var mu sync.Mutex // guards byURL: the replacement joins under load
	byURL := map[string]*replica{}
	for _, r := range reps {
		byURL[r.url] = r
	}
	load := newDrillLoad(t, "drill-sigkill", "", key, scaled(12, 32), func(n int) drillReq {
		d := healthyStreams(n)
		d.hdr = []string{mockllm.HeaderInterToken, "25ms"} // half-second streams: some are open at the kill
		return d
	})
	load.retry = true
	load.target = func(not string) string {
		mu.Lock()
		skip := byURL[not]
		mu.Unlock()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if r := lb.pick(skip); r != nil {
				return r.url
			}
		}
		t.Error("no replica in rotation for 5s")
		return reps[0].url
	}
	load.run(scaled(16, 64))
	load.start()
	time.Sleep(scaled(time.Second, 5*time.Second))

	victim := reps[0]
	killed := time.Now()
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	time.Sleep(scaled(time.Second, 5*time.Second))
	fresh := w.startReplicaOn(t, "r2", pol, victim.spool)
	fresh.waitReady(t)
	mu.Lock()
	byURL[fresh.url] = fresh
	mu.Unlock()
	lb.add(fresh)
	recovered := walRecovered(fresh.logText())
	time.Sleep(scaled(time.Second, 5*time.Second))
	load.stopLoad()

	// The killed replica's holds outlive it by their lease; the next
	// reservation of the tenant-month drops them.
	time.Sleep(time.Until(killed.Add(lease + 500*time.Millisecond)))
	load.run(2)
	outs := load.outcomes()

	atKill := func(o *drillOutcome) bool {
		return o.target == victim.url && o.started.Before(killed) && !o.ended.Before(killed.Add(-10*time.Millisecond))
	}
	cutByDrill, refusedConns := 0, 0
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		switch {
		case o.kind == served:
			return true
		case o.target == victim.url && o.kind == noReply:
			refusedConns++
			return true
		case atKill(o) && o.kind == cut:
			cutByDrill++
			return true
		}
		return false
	})
	// No row is excused: the write-ahead log made each durable before
	// its reply's end, and the replacement stored what the victim had
	// not (ADR 0022).
	c := w.checkLedger(t, "drill-sigkill", outs, nil)
	expectNothingLost(t, c)
	if held := w.waitReleased(t, "drill-sigkill", 5*time.Second); held != 0 {
		t.Errorf("%d µ$ still held %v after the kill (lease %v)", held, time.Since(killed).Round(time.Millisecond), lease)
	}
	var spent int64
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if spent, _ = w.budgetCounter(t, "drill-sigkill"); spent == c.sum {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the Redis counter (%d µ$) did not converge to call_log's sum (%d µ$)", spent, c.sum)
		}
	}
	servedBy := func(r *replica) int {
		return countOf(outs, func(o *drillOutcome) bool { return o.kind == served && o.target == r.url })
	}
	report(t, drillResult{
		id:    id,
		fault: "SIGKILL of one of two replicas (round-robin balancer, readiness probed every 50 ms); a replacement starts 1 s later",
		load: fmt.Sprintf("%d clients, %d requests (9 in 10 streamed, 0.5 s each) in %s; %d streams open on the victim at the kill",
			load.workers, len(outs), dur(load.took), countOf(outs, atKill)),
		happened: fmt.Sprintf("%d streams open on the victim cut (the drill's cut: the client sees the connection break); %d connections refused by the dead "+
			"replica and retried on another; served whole: %d by the victim before it died, %d by the survivor, %d by the replacement; "+
			"the replacement, on the victim's spool directory, replayed the %d rows its write-ahead log still held (rows already in Postgres skipped, none counted twice); "+
			"the victim's budget holds expired with their %s lease; the Redis counter equals call_log (reconcile every 1 s)",
			cutByDrill, refusedConns, servedBy(victim), servedBy(reps[1]), servedBy(fresh), recovered, dur(lease)),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillReplicaSIGKILL$",
	})
}

// TestDrillHotReload reloads a gateway process's policy with SIGHUP again
// and again under streaming load, with one reload whose plugin refuses
// its config. Promised (docs/POLICY.md, Reload): in-flight requests finish
// on the old policy, new ones see the new one, a bad policy leaves the
// old one serving, and old plugin runtimes are closed (memory stays flat).
func TestDrillHotReload(t *testing.T) {
	const id = "hot-reload"
	reloads := scaled(6, 40)
	w := newDrillWorld(t)
	key := w.tenant(t, "drill-reload")
	gen := func(g string) string {
		return w.policy(t, drillPolicy{plugins: fmt.Sprintf("  - name: fault\n    path: %s\n    config: {name: reload, gen: %q}\n", faultPluginPath(t), g)})
	}
	// A soft memory limit keeps the Go heap near what is live, so that
	// plugin runtimes a reload failed to close would show in the RSS
	// rather than hide in garbage not yet collected.
	t.Setenv("GOMEMLIMIT", "256MiB")
	t.Setenv("GOGC", "25")
	r := w.startReplica(t, "gw", gen("0"), "-watch", "0")
	r.waitReady(t)
	policyFile := ""
	for i, a := range r.cmd.Args {
		if a == "-policy" {
			policyFile = r.cmd.Args[i+1]
		}
	}
	load := newDrillLoad(t, "drill-reload", r.url, key, scaled(8, 32), func(n int) drillReq {
		d := healthyStreams(n)
		if n%2 == 1 {
			// 3 s streams: longer than a reload takes, so some are open
			// from before a SIGHUP to after the new policy is in.
			d.hdr = []string{mockllm.HeaderInterToken, "150ms"}
		}
		return d
	})
	load.run(scaled(16, 64))
	rssBefore := rssOf(t, r.cmd.Process.Pid)
	load.start()
	signaled := make([]time.Time, reloads+1)
	confirmed := make([]time.Time, reloads+1)
	rss := make([]int64, reloads+1) // after each reload
	bad := reloads / 2
	for i := 1; i <= reloads; i++ {
		time.Sleep(scaled(300*time.Millisecond, 250*time.Millisecond))
		if i == bad {
			// A plugin that refuses its config: the old policy keeps serving.
			pol := strings.Replace(gen("bad"), "config: {name: reload, gen: \"bad\"}", "config: {gen: \"bad\"}", 1)
			reloadWith(t, r, policyFile, pol, "reload failed", 1)
		}
		signaled[i] = time.Now()
		reloadWith(t, r, policyFile, gen(strconv.Itoa(i)), "policy reloaded", i)
		confirmed[i] = time.Now()
		rss[i] = rssOf(t, r.cmd.Process.Pid)
	}
	time.Sleep(scaled(500*time.Millisecond, 2*time.Second))
	load.stopLoad()
	time.Sleep(time.Second) // the last old policy closes with its last request
	rssAfter := rssOf(t, r.cmd.Process.Pid)
	outs := load.outcomes()

	// A request runs on the policy current when it started: one that ended
	// before reload i was signalled ran on an older one, one that started
	// after reload i was confirmed on reload i or newer.
	spanning := 0
	expectOutcomes(t, outs, func(o *drillOutcome) bool {
		if o.kind != served {
			return false
		}
		g, err := strconv.Atoi(o.gen)
		if err != nil {
			o.detail = fmt.Sprintf("X-Drill-Gen %q", o.gen)
			return false
		}
		for i := 1; i <= reloads; i++ {
			if o.started.Before(signaled[i]) && o.ended.After(confirmed[i]) {
				spanning++
				break
			}
		}
		for i := 1; i <= reloads; i++ {
			if (o.ended.Before(signaled[i]) && g >= i) || (o.started.After(confirmed[i]) && g < i) {
				o.detail = fmt.Sprintf("ran on policy %d across reload %d", g, i)
				return false
			}
		}
		return true
	})
	if spanning == 0 {
		t.Error("no request was in flight across a reload")
	}
	c := w.checkLedger(t, "drill-reload", outs, nil)
	expectNothingLost(t, c)
	if held := w.waitReleased(t, "drill-reload", 5*time.Second); held != 0 {
		t.Errorf("%d µ$ still held after the load", held)
	}
	// Every policy holds its plugins' instances (a few MiB each): had the
	// old ones not been closed, each reload would add theirs. From the
	// second reload on (an old policy and the new one side by side), RSS
	// stays flat.
	lo, hi := slices.Min(rss[2:]), slices.Max(rss[2:])
	if rssAfter > rss[2]+64<<20 {
		t.Errorf("RSS grew from %d MiB after reload 2 to %d MiB after reload %d: old policies' plugins are not freed", rss[2]>>20, rssAfter>>20, reloads)
	}
	report(t, drillResult{
		id:    id,
		fault: fmt.Sprintf("%d policy reloads by SIGHUP (new plugin configs compiled and swapped in), one more whose plugin refuses its config", reloads),
		load:  fmt.Sprintf("%d clients, %d requests (9 in 10 streamed, half of them for 3 s) in %s", load.workers, len(outs), dur(load.took)),
		happened: fmt.Sprintf("every request served whole, %d of them in flight across a reload and finished on the policy they started on; "+
			"every request after a reload saw the new policy; the bad reload was refused with the old policy serving; "+
			"RSS (GOGC 25, GOMEMLIMIT 256MiB) %d MiB before, %d–%d MiB from the second reload to the last, %d MiB at the end",
			spanning, rssBefore>>20, lo>>20, hi>>20, rssAfter>>20),
		lost:   c.lost(),
		ledger: c.evidence(),
		run:    "^TestDrillHotReload$",
	})
}

// reloadWith writes pol to the policy file, sends SIGHUP and waits until
// the gateway's log has logged n times.
func reloadWith(t *testing.T, r *replica, file, pol, logged string, n int) {
	t.Helper()
	if err := os.WriteFile(file, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); strings.Count(r.logText(), logged) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the gateway did not log %q %d times after SIGHUP:\n%s", logged, n, tail(r.logText(), 2000))
		}
	}
}

// rssOf returns a process's resident memory in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
