package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestCallLogRecordsServingUpstreamAndAttempts: a route over a failing and
// a healthy upstream, with the Postgres ledger. Each call_log row names the
// upstream that served and the attempts it took, exactly as the upstreams
// saw them; a request whose every attempt failed names the last upstream.
func TestCallLogRecordsServingUpstreamAndAttempts(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000_000)
	down, downURL := startMock(t, mockllm.Config{FailStatus: 503})
	_, upURL := startMock(t, mockllm.Config{Tokens: 4})
	var mu sync.Mutex
	sawDown := map[string]int{}
	down.SetOnRequest(func(h http.Header, _ []byte) {
		mu.Lock()
		sawDown[h.Get("X-Request-Id")]++
		mu.Unlock()
	})
	pol := fmt.Sprintf(`
version: 1
server: {drain_timeout: 2s}
upstreams:
  - {name: down, base_url: %s/v1, timeouts: {first_byte: 5s}}
  - {name: up, base_url: %s/v1, timeouts: {first_byte: 5s}}
routes:
  - models: [mock-1]
    upstreams: [{name: down}, {name: up}]
  - models: [mock-2]
    upstream: down
    retry: {attempts: 3, backoff: 5ms}
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%q], timeout: 500ms}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - name: preflight
    path: %s
`, downURL, upURL, w.redis.Addr(), pluginPath(t, "preflight"))
	_, gw := w.gateway(t, pol)

	const n = 20
	for i := range n {
		status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+w.key, "X-Request-Id", fmt.Sprintf("route-%d", i))
		if status != 200 {
			t.Fatalf("request %d: %d %s", i, status, body)
		}
	}
	status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-2","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+w.key, "X-Request-Id", "route-down")
	if status != 503 {
		t.Fatalf("every attempt failing: %d %s, want the upstream's 503", status, body)
	}
	w.waitRows(t, n+1)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT request_id, upstream, attempts, status FROM call_log WHERE tenant_id = 'acme'`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		upstream         string
		attempts, status int
	}
	got := map[string]row{}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.upstream, &r.attempts, &r.status); err != nil {
			t.Fatal(err)
		}
		got[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	retried := 0
	for i := range n {
		id := fmt.Sprintf("route-%d", i)
		want := row{upstream: "up", attempts: 1 + sawDown[id], status: 200}
		if got[id] != want {
			t.Errorf("%s: call_log %+v, want %+v", id, got[id], want)
		}
		retried += sawDown[id]
	}
	if retried == 0 {
		t.Error("no request went to the failing upstream first: the test proves nothing")
	}
	if want := (row{upstream: "down", attempts: 3, status: 503}); got["route-down"] != want || sawDown["route-down"] != 3 {
		t.Errorf("route-down: call_log %+v (upstream saw %d), want %+v", got["route-down"], sawDown["route-down"], want)
	}
}
