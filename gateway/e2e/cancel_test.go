package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

const pollInterval = 200 * time.Millisecond

// cancelPolicy: two tenants on the memory store, preflight, Redis, and a
// 200 ms cancel poll.
func cancelPolicy(t *testing.T, mockURL, redisAddr string) string {
	pol := policy(mockURL, "", "mock-1", "mock-*")
	pol = strings.Replace(pol, "drain_timeout: 2s", "drain_timeout: 2s\n  cancel_poll_interval: 200ms", 1)
	return pol + fmt.Sprintf(`
redis: {addrs: [%q]}
store:
  kind: memory
tenants:
  plans: [{id: p}]
  tenants:
    - {id: acme, plan: p, keys: [{id: a1, key_sha256: %s}]}
    - {id: globex, plan: p, keys: [{id: g1, key_sha256: %s}]}
plugins:
  - name: preflight
    path: %s
`, redisAddr, sha("tg_acme_c"), sha("tg_globex_c"), pluginPath(t, "preflight"))
}

// openStream starts a stream with the given request id and returns a
// reader positioned after its first content event.
func openStream(t *testing.T, gw, key, id string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(
		`{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"count"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Request-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != id {
		t.Fatalf("stream: %d, request id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content"`) {
			return resp, br
		}
	}
}

// rest reads the stream to its end and returns what remained.
func rest(br *bufio.Reader) string {
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String()
		}
	}
}

func cancelCall(t *testing.T, gw, key, id string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", gw+"/v1/requests/"+id+"/cancel", nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b [2048]byte
	n, _ := readFull(resp.Body, b[:])
	return resp.StatusCode, string(b[:n])
}

// TestCancelAcrossReplicas: a stream on replica A is cancelled through
// replica B within one poll interval plus a round trip; another tenant's
// key gets the same 404 as an unknown id.
func TestCancelAcrossReplicas(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 400, InterToken: 20 * time.Millisecond})
	pol := cancelPolicy(t, mockURL, rds.Addr())
	_, gwA, _ := gatewayProcess(t, pol)
	_, gwB, _ := gatewayProcess(t, pol)

	resp, br := openStream(t, gwA, "tg_acme_c", "req-cancel-1")
	defer resp.Body.Close()
	time.Sleep(2 * pollInterval) // A has announced it

	// Another tenant, and an unknown id: the same 404.
	st1, body1 := cancelCall(t, gwB, "tg_globex_c", "req-cancel-1")
	st2, body2 := cancelCall(t, gwB, "tg_globex_c", "req-never-was")
	if st1 != 404 || st2 != 404 || strings.Replace(body1, "req-cancel-1", "X", 1) != strings.Replace(body2, "req-never-was", "X", 1) {
		t.Fatalf("foreign cancel %d %s; unknown %d %s", st1, body1, st2, body2)
	}
	if st, body := cancelCall(t, gwB, "", "req-cancel-1"); st != 401 {
		t.Fatalf("cancel without a key: %d %s", st, body)
	}

	start := time.Now()
	if st, body := cancelCall(t, gwB, "tg_acme_c", "req-cancel-1"); st != 200 || !strings.Contains(body, `"status":"cancelled"`) {
		t.Fatalf("cancel through B: %d %s", st, body)
	}
	tailText := rest(br)
	took := time.Since(start)
	t.Logf("CANCEL-ACROSS-REPLICAS poll_interval=%v cancel_to_stream_end=%v", pollInterval, took)
	if !strings.Contains(tailText, "request_cancelled") || strings.Contains(tailText, "[DONE]") {
		t.Fatalf("stream did not end with a cancel event:\n%s", tail(tailText, 500))
	}
	if took > pollInterval+150*time.Millisecond {
		t.Fatalf("cancel took %v, want within the poll interval (%v) plus a round trip", took, pollInterval)
	}
	// Gone now: once A's next poll has withdrawn it, a second cancel is
	// a 404.
	time.Sleep(pollInterval + 100*time.Millisecond)
	if st, _ := cancelCall(t, gwB, "tg_acme_c", "req-cancel-1"); st != 404 {
		t.Fatalf("cancelling an ended request: %d", st)
	}
}

// TestCancelPolling: one poll for 200 in-flight streams is one Redis
// command on the gateway's connection, and an idle gateway sends none.
func TestCancelPolling(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 300, InterToken: 20 * time.Millisecond})
	srv, gw := startGateway(t, cancelPolicy(t, mockURL, rds.Addr()), nil)

	// Idle: no poll at all.
	time.Sleep(3 * pollInterval)
	if st := srv.CancelStats(); st.Polls != 0 {
		t.Fatalf("%d polls with nothing in flight", st.Polls)
	}
	// A local cancel (same replica) needs no poll.
	resp, br := openStream(t, gw, "tg_acme_c", "req-local")
	if st, body := cancelCall(t, gw, "tg_acme_c", "req-local"); st != 200 {
		t.Fatalf("local cancel: %d %s", st, body)
	}
	if out := rest(br); !strings.Contains(out, "request_cancelled") {
		t.Fatalf("local cancel: %s", tail(out, 300))
	}
	resp.Body.Close()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var bodies []*http.Response
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			resp, _ := openStream(t, gw, "tg_acme_c", "req-poll-"+strconv.Itoa(i))
			mu.Lock()
			bodies = append(bodies, resp)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	defer func() {
		for _, b := range bodies {
			b.Body.Close()
		}
	}()
	// Settle: the first polls load the script (EVALSHA, NOSCRIPT, EVAL).
	time.Sleep(3 * pollInterval)
	// A poll may be in flight at either end of the window: bound the
	// count by the polls started before and after each end.
	p0 := srv.CancelStats().Polls
	if _, err := rds.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	s1 := srv.CancelStats()
	p1 := s1.Polls
	time.Sleep(5*pollInterval + pollInterval/2)
	s2 := srv.CancelStats()
	p2 := s2.Polls
	info, _ := rds.Do("INFO", "stats") // first: its own connection is the only one of ours
	cmds := int64(commandCount(t, rds, "evalsha"))
	reloads := commandCount(t, rds, "eval")
	p3 := srv.CancelStats().Polls
	conns := -1
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_connections_received:"); ok {
			conns, _ = strconv.Atoi(v)
		}
	}
	t.Logf("CANCEL-POLL in_flight=200 polls=%d..%d evalsha=%d eval=%d new_connections=%d stats=%+v", p2-p1, p3-p0, cmds, reloads, conns, srv.CancelStats())
	// A poll that timed out on a starved machine before the script was
	// loaded makes the next one reload it (EVAL) once; one that timed out
	// in the window may never have reached Redis.
	failed := s2.PollFailures - s1.PollFailures
	if p2-p1 < 4 || cmds < p2-p1-failed || cmds > p3-p0 || reloads > 1 {
		t.Fatalf("%d..%d polls sent %d script calls; want one per poll", p2-p1, p3-p0, cmds)
	}
	// RESETSTAT zeroes the counter; INFO's own connection is one. rueidis
	// may open its second multiplexed connection once, lazily, the first
	// time two commands overlap; a connection per poll would be five or
	// more.
	if conns < 1 || conns > 2 {
		t.Fatalf("%d connections opened during %d polls", conns, p2-p1)
	}
}

// TestCancelSettles: a cancelled stream is settled (budget) and logged
// with guard_action "cancelled"; the admin API cancels any tenant's request.
func TestCancelSettles(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 400, InterToken: 20 * time.Millisecond, Usage: true})
	pol := strings.Replace(w.policy(t, mockURL, `{}`, ""), "drain_timeout: 2s", "drain_timeout: 2s\n  cancel_poll_interval: 200ms", 1)
	srv, gw := w.gateway(t, pol)

	req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(
		`{"model":"mock-1","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"count"}]}`))
	req.Header.Set("Authorization", "Bearer "+w.key)
	req.Header.Set("X-Request-Id", "req-settle-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for events := 0; events < 10; {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content"`) {
			events++
		}
	}
	found, err := srv.AdminCancel(context.Background(), "req-settle-1")
	if err != nil || !found {
		t.Fatalf("admin cancel: %v %v", found, err)
	}
	if out := rest(br); !strings.Contains(out, "request_cancelled") {
		t.Fatalf("no cancel event: %s", tail(out, 300))
	}
	w.waitRows(t, 1)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var action string
	var cost, completion int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(guard_action, ''), cost_micros, completion_tokens FROM call_log WHERE request_id = 'req-settle-1'`).Scan(&action, &cost, &completion); err != nil {
		t.Fatal(err)
	}
	spent, held := w.counter(t)
	t.Logf("cancelled stream: %d completion tokens, %d µ$; counter spent %s, held %s", completion, cost, spent, held)
	if action != "cancelled" || completion < 10 || completion >= 400 || cost <= 0 || spent != fmt.Sprint(cost) || (held != "0" && held != "") {
		t.Fatalf("row action %q, completion %d, cost %d; counter %s held %s", action, completion, cost, spent, held)
	}
}

// TestCancelWithoutScripts: a Redis that refuses scripts gets one command
// per key; a Redis that is down leaves in-process cancels working.
func TestCancelWithoutScripts(t *testing.T) {
	rds := redistest.Start(t, "--rename-command", "EVALSHA", "", "--rename-command", "EVAL", "")
	_, mockURL := startMock(t, mockllm.Config{Tokens: 400, InterToken: 20 * time.Millisecond})
	srvA, gwA := startGateway(t, cancelPolicy(t, mockURL, rds.Addr()), nil)
	_, gwB := startGateway(t, cancelPolicy(t, mockURL, rds.Addr()), nil)

	resp, br := openStream(t, gwA, "tg_acme_c", "req-noscript")
	defer resp.Body.Close()
	time.Sleep(2 * pollInterval)
	if st, body := cancelCall(t, gwB, "tg_acme_c", "req-noscript"); st != 200 {
		t.Fatalf("cancel through B without scripts: %d %s", st, body)
	}
	if out := rest(br); !strings.Contains(out, "request_cancelled") {
		t.Fatalf("no cancel event: %s", tail(out, 300))
	}
	if st := srvA.CancelStats(); st.FallbackPolls == 0 || st.RemoteCancels != 1 {
		t.Fatalf("stats %+v: want fallback polls and one remote cancel", st)
	}

	// Redis down: local cancels still work; polls fail and are counted.
	if err := rds.Kill(); err != nil {
		t.Fatal(err)
	}
	resp2, br2 := openStream(t, gwA, "tg_acme_c", "req-down")
	defer resp2.Body.Close()
	time.Sleep(2 * pollInterval)
	if st, body := cancelCall(t, gwA, "tg_acme_c", "req-down"); st != 200 {
		t.Fatalf("local cancel with Redis down: %d %s", st, body)
	}
	if out := rest(br2); !strings.Contains(out, "request_cancelled") {
		t.Fatalf("no cancel event: %s", tail(out, 300))
	}
	if st := srvA.CancelStats(); st.PollFailures == 0 {
		t.Fatalf("stats %+v: poll failures not counted", st)
	}
}
