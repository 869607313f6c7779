package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The replica tests run several gateway processes on one machine sharing
// one Postgres and one Redis, with the production plugin chain (preflight,
// ratelimit, budget), as a Deployment of the chart in deploy/helm would.
// docs/SCALING.md cites what they measure.

// replicaPolicy is the budget world's policy with ratelimit between
// preflight and budget, configured as in policies/production.yaml. The
// Redis timeout is 2s rather than production's 100ms: these tests measure
// eviction and draining on a shared 2-core machine, not Redis latency.
func (w *budgetWorld) replicaPolicy(t *testing.T, mockURL string) string {
	return policy(mockURL, "", "mock-1", "mock-*") + fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%q], timeout: 2s}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - name: preflight
    path: %s
  - name: ratelimit
    path: %s
    config: {on_redis_error: fail_open, replicas: 3}
  - name: budget
    path: %s
    config: {on_redis_error: fail_closed}
`, w.redis.Addr(), pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), pluginPath(t, "budget"))
}

// replica is one gateway process.
type replica struct {
	name   string
	url    string
	cmd    *exec.Cmd
	spool  string // its call_log.spool_dir
	logs   *syncWriter
	buf    *strings.Builder
	exited chan struct{}
	// Once exited is closed: the process's exit and when it was seen.
	err      error
	exitedAt time.Time
}

// startReplica runs the tollgate binary like gatewayProcess does, with
// extra serve flags (-shutdown-delay), its own spool directory, and a
// channel closed when the process exits. It does not wait for readiness
// (waitReady), so several can start at once.
func (w *budgetWorld) startReplica(t *testing.T, name, pol string, flags ...string) *replica {
	t.Helper()
	return w.startReplicaOn(t, name, pol, filepath.Join(t.TempDir(), "spool"), flags...)
}

// startReplicaOn is startReplica with the spool directory given: a
// replica started on a dead one's takes over its spool and write-ahead
// log, as a restarted process on the same host does.
func (w *budgetWorld) startReplicaOn(t *testing.T, name, pol, spool string, flags ...string) *replica {
	t.Helper()
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(pol), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	args := append([]string{"serve", "-policy", pf, "-listen", addr}, flags...)
	cmd := exec.Command(filepath.Join(binDir, "tollgate"), args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_DATABASE_URL="+w.dsn, "TG_TEST_SPOOL="+spool)
	r := &replica{name: name, url: "http://" + addr, cmd: cmd, spool: spool, buf: &strings.Builder{}, exited: make(chan struct{})}
	r.logs = &syncWriter{w: r.buf}
	cmd.Stderr = r.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.err = cmd.Wait(); r.exitedAt = time.Now(); close(r.exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-r.exited
		if t.Failed() {
			t.Logf("replica %s (%s) logs:\n%s", r.name, r.url, tail(r.logText(), 3000))
		}
	})
	return r
}

// startReplicas starts n replicas at once and waits until all are ready.
func (w *budgetWorld) startReplicas(t *testing.T, n int, pol string, flags ...string) []*replica {
	t.Helper()
	reps := make([]*replica, n)
	for i := range reps {
		reps[i] = w.startReplica(t, fmt.Sprintf("r%d", i), pol, flags...)
	}
	for _, r := range reps {
		r.waitReady(t)
	}
	return reps
}

// waitReady waits until the replica's readiness probe answers 200.
func (r *replica) waitReady(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !r.ready(); time.Sleep(10 * time.Millisecond) {
		select {
		case <-r.exited:
			t.Fatalf("replica %s exited at start (%v):\n%s", r.name, r.err, r.logText())
		default:
		}
		if time.Now().After(end) {
			t.Fatalf("replica %s not ready after 30s:\n%s", r.name, r.logText())
		}
	}
}

func (r *replica) logText() string {
	r.logs.mu.Lock()
	defer r.logs.mu.Unlock()
	return r.buf.String()
}

// ready is the readiness probe: GET /readyz answers 200.
func (r *replica) ready() bool {
	c := http.Client{Timeout: 200 * time.Millisecond}
	resp, err := c.Get(r.url + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// TestReplicasEviction: three gateway processes whose caches hold a key for
// 30 s; revoking it in Postgres (the same UPDATE the admin API runs) must
// reach every replica within 100 ms of its commit through NOTIFY (the
// commit's own time is Postgres's: 104 ms of it once at load average 8):
// no request sent 100 ms or more after the commit is served with the key.
// Five keys, revoked one after another, each polled on every replica at
// once. What is asserted is when the last request served with the key was
// sent, not when the first refusal came back: a request in flight while the
// whole machine stalls (once 800 ms, on all three replicas at once) comes
// back late whatever the replica knew when it read the key.
func TestReplicasEviction(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000_000)
	ctx := context.Background()
	if err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: 1_000_000_000,
		Limits: tenant.Limits{RPM: 1_000_000, TPM: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	pol := w.replicaPolicy(t, mockURL)
	// At debug level each replica logs when it applied an eviction: on a
	// failure, that tells a late notification from a late request.
	reps := w.startReplicas(t, 3, pol, "-log-level", "debug")

	const trials = 5
	type key struct {
		secret string
		id     string
	}
	keys := make([]key, trials)
	for i := range keys {
		secret, k, err := w.store.CreateKey(ctx, "acme", pg.KeyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = key{secret, k.ID}
	}
	for _, r := range reps {
		for _, k := range keys { // every key cached on every replica
			if status, _, body := post(t, r.url+"/v1/chat/completions", chatOnce, "Authorization", "Bearer "+k.secret); status != 200 {
				t.Fatalf("warm-up on %s: %d %s", r.name, status, body)
			}
		}
	}
	waitListeners(t, w.dsn, len(reps))

	var all, stales []time.Duration
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	for trial, k := range keys {
		t0 := time.Now()
		if _, err := w.store.RevokeKeyHash(ctx, k.id); err != nil {
			t.Fatal(err)
		}
		committed := time.Since(t0)
		took := make([]time.Duration, len(reps))  // the first 401's answer
		stale := make([]time.Duration, len(reps)) // the last 200's sending
		var wg sync.WaitGroup
		for i, r := range reps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					sent := time.Since(t0) - committed
					status, err := chatStatus(client, r.url, k.secret)
					if err != nil {
						t.Errorf("%s: %v", r.name, err)
						return
					}
					if status == 401 {
						took[i] = time.Since(t0) - committed
						return
					}
					if status != 200 {
						t.Errorf("%s answered %d for the key being revoked", r.name, status)
						return
					}
					stale[i] = sent
					if time.Since(t0) > 2*time.Second {
						t.Errorf("%s still accepts the revoked key after 2s", r.name)
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		wg.Wait()
		t.Logf("trial %d: revoked at %s, commit %v; after the commit, per replica: first 401 back %v, last 200 sent %v",
			trial, t0.UTC().Format("15:04:05.000000"), committed.Round(10*time.Microsecond), roundAll(took), roundAll(stale))
		all = append(all, took...)
		stales = append(stales, stale...)
	}
	worst := slices.Max(all)
	slices.Sort(all)
	t.Logf("REPLICAS-EVICTION replicas=%d trials=%d max=%v median=%v (from the revoking UPDATE's commit, which NOTIFY waits for, to each replica's first 401; polled ~every ms)",
		len(reps), trials, worst.Round(100*time.Microsecond), all[len(all)/2].Round(100*time.Microsecond))
	if last := slices.Max(stales); last >= 100*time.Millisecond {
		t.Errorf("a request sent %v after the commit was served with the revoked key, want none after 100ms", last)
		for _, r := range reps {
			for line := range strings.Lines(r.logText()) {
				if strings.Contains(line, "tenant cache eviction applied") {
					t.Logf("%s: %s", r.name, strings.TrimSpace(line))
				}
			}
		}
	}
}

// chatStatus sends one non-streamed chat request and returns its status.
func chatStatus(c *http.Client, gw, key string) (int, error) {
	req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatOnce))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond)
	}
	return out
}

// balancer is what a Service or an ingress does in front of the replicas:
// round robin over the replicas in rotation, whose readiness it probes
// every period. A failed probe takes a replica out of rotation only after
// lag (endpoint propagation: kubelet → EndpointSlice → kube-proxy or the
// ingress), so a replica whose listener closes sooner than that still gets
// requests; their connections are refused and they are retried on another
// replica, as Envoy's and NGINX's connect-failure retries do.
type balancer struct {
	period, lag time.Duration

	mu      sync.Mutex
	reps    []*replica
	failing map[*replica]time.Time // first failed probe of a replica in a run of failures
	in      map[*replica]bool
	next    int

	stop chan struct{}
	done chan struct{}
}

func newBalancer(period, lag time.Duration, reps ...*replica) *balancer {
	b := &balancer{period: period, lag: lag, reps: reps, failing: map[*replica]time.Time{}, in: map[*replica]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, r := range reps {
		b.in[r] = true
	}
	go b.probe()
	return b
}

// add registers a replica; it takes traffic from its first good probe.
func (b *balancer) add(r *replica) {
	b.mu.Lock()
	b.reps = append(b.reps, r)
	b.mu.Unlock()
}

func (b *balancer) probe() {
	defer close(b.done)
	tick := time.NewTicker(b.period)
	defer tick.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
		b.mu.Lock()
		reps := slices.Clone(b.reps)
		b.mu.Unlock()
		for _, r := range reps {
			ok := r.ready()
			now := time.Now()
			b.mu.Lock()
			switch {
			case ok:
				delete(b.failing, r)
				b.in[r] = true
			case b.failing[r].IsZero():
				b.failing[r] = now
			case now.Sub(b.failing[r]) >= b.lag:
				b.in[r] = false
			}
			b.mu.Unlock()
		}
	}
}

func (b *balancer) close() { close(b.stop); <-b.done }

// pick returns the next replica in rotation other than not.
func (b *balancer) pick(not *replica) *replica {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range len(b.reps) {
		r := b.reps[b.next%len(b.reps)]
		b.next++
		if b.in[r] && r != not {
			return r
		}
	}
	return nil
}

// streamOutcome is one client stream through the balancer.
type streamOutcome struct {
	served         *replica // the replica that answered
	started, ended time.Time
	retried        []string // why earlier attempts were retried
	err            error    // non-nil: the stream failed (cut, wrong text, bad status)
}

// stream sends one streamed chat request through b and reads it to the end.
func (b *balancer) stream(t *testing.T, client *http.Client, key, want string) streamOutcome {
	var out streamOutcome
	var last *replica
	for attempt := 0; attempt < 5; attempt++ {
		r := b.pick(last)
		if r == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		last = r
		out.started = time.Now()
		req, _ := http.NewRequest("POST", r.url+"/v1/chat/completions", strings.NewReader(
			`{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			// No response byte: nothing was served; a load balancer
			// retries these on another endpoint.
			why := "error before response"
			if errors.Is(err, syscall.ECONNREFUSED) {
				why = "connection refused"
			}
			out.retried = append(out.retried, r.name+": "+why)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		out.served, out.ended = r, time.Now()
		switch text, done := sseText(t, body); {
		case resp.StatusCode != 200:
			out.err = fmt.Errorf("%s: status %d: %s", r.name, resp.StatusCode, tail(string(body), 300))
		case err != nil || !done || text != want:
			out.err = fmt.Errorf("%s: stream cut (err=%v done=%v) after %q", r.name, err, done, tail(text, 80))
		}
		return out
	}
	out.err = fmt.Errorf("no replica took the request (%v)", out.retried)
	return out
}

// TestReplicasRollingRestart: three replicas behind a round-robin balancer
// carry a steady load of streams (TTFT 50 ms, 20 tokens 20 ms apart); one
// gets SIGTERM (readiness fails at once, its listener closes after
// -shutdown-delay, its open streams run to the end) and a replacement
// starts. Every stream must end with [DONE] and its whole text, the
// drained replica must exit 0, and the call log must hold one row per
// stream served, the drained replica's included.
func TestReplicasRollingRestart(t *testing.T) {
	const (
		workers       = 24
		tokens        = 20
		shutdownDelay = 100 * time.Millisecond
		// The balancer sees a failed probe only after propagation, longer
		// than the shutdown delay: for a while requests still reach the
		// closed listener and are retried. (In production -shutdown-delay
		// is set longer than propagation and none are; deploy/helm.)
		probePeriod = 50 * time.Millisecond
		propagation = 300 * time.Millisecond
	)
	w := newBudgetWorld(t, 1_000_000_000)
	ctx := context.Background()
	if err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: 1_000_000_000,
		Limits: tenant.Limits{RPM: 1_000_000, TPM: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	_, mockURL := startMock(t, mockllm.Config{TTFT: 50 * time.Millisecond, Tokens: tokens, InterToken: 20 * time.Millisecond})
	var want strings.Builder
	for i := 0; i < tokens; i++ {
		fmt.Fprintf(&want, "tok%d ", i)
	}
	pol := w.replicaPolicy(t, mockURL)
	delayFlag := []string{"-shutdown-delay", shutdownDelay.String()}
	reps := w.startReplicas(t, 3, pol, delayFlag...)
	warm := int64(0)
	for _, r := range reps {
		if status, _, body := w.chat(t, r.url, chatOnce); status != 200 {
			t.Fatalf("warm-up on %s: %d %s", r.name, status, body)
		}
		warm++
	}

	lb := newBalancer(probePeriod, propagation, reps...)
	defer lb.close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	outcomes := make(chan streamOutcome, 4096) // far more than the ~200 streams of a run
	stop := make(chan struct{})
	var load sync.WaitGroup
	stopLoad := sync.OnceFunc(func() { close(stop); load.Wait() })
	defer stopLoad() // also on t.Fatal
	for i := 0; i < workers; i++ {
		load.Add(1)
		go func() {
			defer load.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				outcomes <- lb.stream(t, client, w.key, want.String())
			}
		}()
	}

	time.Sleep(time.Second) // steady state on three replicas
	old := reps[0]
	sigterm := time.Now()
	if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The replacement starts beside the drain (a StatefulSet's order: the
	// old pod goes first; a Deployment with maxSurge starts the new one
	// first, the easier case).
	fresh := w.startReplica(t, "r3", pol, delayFlag...)
	fresh.waitReady(t)
	lb.add(fresh)
	select {
	case <-old.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the drained replica has not exited 10s after SIGTERM")
	}
	if old.err != nil {
		t.Errorf("drained replica exited with %v", old.err)
	}
	time.Sleep(time.Second) // steady state on the new set
	stopLoad()
	close(outcomes)

	var (
		total, failed                int
		perReplica                   = map[string]int{}
		openAtSIGTERM, duringDrain   int
		retried                      int
		refusedRetries, otherRetries int
	)
	for o := range outcomes {
		total++
		if o.err != nil {
			failed++
			if failed <= 5 {
				t.Errorf("stream failed: %v", o.err)
			}
			continue
		}
		perReplica[o.served.name]++
		if o.served == old && o.started.Before(sigterm) && o.ended.After(sigterm) {
			openAtSIGTERM++
		}
		if o.served == old && o.started.After(sigterm) {
			duringDrain++
		}
		if len(o.retried) > 0 {
			retried++
		}
		for _, why := range o.retried {
			if strings.HasSuffix(why, "connection refused") {
				refusedRetries++
			} else {
				otherRetries++
			}
		}
	}
	drained := old.exitedAt.Sub(sigterm)
	t.Logf("REPLICAS-ROLLING-RESTART streams=%d cut_or_failed=%d per_replica=%v open_on_drained_at_sigterm=%d "+
		"accepted_by_drained_after_sigterm=%d retried_streams=%d (attempts refused=%d, other=%d) drained_exit_after=%v "+
		"workers=%d probe=%v propagation=%v shutdown_delay=%v",
		total, failed, perReplica, openAtSIGTERM, duringDrain, retried, refusedRetries, otherRetries, drained.Round(time.Millisecond),
		workers, probePeriod, propagation, shutdownDelay)
	if failed > 0 {
		t.Fatalf("%d of %d streams were cut or failed across the rolling restart", failed, total)
	}
	if openAtSIGTERM == 0 || perReplica[fresh.name] == 0 {
		t.Fatalf("the load did not cover the drain (%d streams open on it at SIGTERM) and the new replica: %v", openAtSIGTERM, perReplica)
	}
	if total < 100 {
		t.Fatalf("only %d streams: the load did not run", total)
	}
	// Nothing the drained replica served is missing from the ledger: it
	// drains its call-log writer before it exits.
	w.waitRows(t, warm+int64(total))
	if _, holds := w.counter(t); holds != "" && holds != "0" {
		t.Errorf("%s µ$ still held after every stream ended", holds)
	}
}

// waitListeners waits until n connections to the Postgres at dsn sit in
// LISTEN on the eviction channel: every gateway's listener is up, and a
// revocation from now on reaches each one by NOTIFY. (A listener that
// comes up later evicts everything at once, which would hide a NOTIFY
// that never arrived, or make a cold first trial look slow.)
func waitListeners(t *testing.T, dsn string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(15 * time.Second)
	for {
		var got int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND query = 'LISTEN '||$1`, pg.EvictChannel).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d eviction listeners up after 15 s", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
