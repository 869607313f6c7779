package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// The response cache (docs/adr/0028-response-cache.md) with the built-in
// cache plugin, two tenants, real Redis and gateways in-process: what one
// replica stored another serves, a tenant never sees another's entry,
// streams are replayed as streams and served whole, a reply a guard
// stopped is not stored, entries expire, Redis going away only makes
// misses, and identical requests in flight make one upstream call when
// the plugin coalesces them.

// cachePolicy is a memory-store policy with tenants "a" and "b", preflight,
// holdback (stops a reply carrying "forbidden.example") and the cache
// plugin configured with cacheConfig, Redis at redisAddr.
func cachePolicy(mockURL, redisAddr, cacheConfig, cacheSection string) string {
	return policy(mockURL, "", "mock-1", "mock-*") + fmt.Sprintf(`
redis: {addrs: [%q], timeout: 1s}
store:
  kind: memory
tenants:
  plans:
    - {id: basic}
  tenants:
    - {id: a, plan: basic, keys: [{id: a-1, key_sha256: %s}]}
    - {id: b, plan: basic, keys: [{id: b-1, key_sha256: %s}]}
  prices:
    - {model: mock-1, input_usd_per_mtok: 1000, output_usd_per_mtok: 2000, effective_from: 2026-01-01T00:00:00Z}
%s
plugins:
  - name: preflight
    builtin: preflight
  - name: holdback
    builtin: holdback
    config: {markers: [forbidden.example]}
  - name: cache
    builtin: cache
    config: %s
`, redisAddr, sha("tg_cache_a"), sha("tg_cache_b"), cacheSection, cacheConfig)
}

// countingMock is the mock model, counting the requests it serves.
func countingMock(t *testing.T) (url string, calls *atomic.Int64) {
	m, url := startMock(t, mockllm.Config{})
	calls = new(atomic.Int64)
	m.SetOnRequest(func(http.Header, []byte) { calls.Add(1) })
	return url, calls
}

func cachedChat(content string, stream bool, extra string) string {
	return fmt.Sprintf(`{"model":"mock-1","temperature":0,"stream":%t,"messages":[{"role":"user","content":%q}]%s}`, stream, content, extra)
}

// ask posts a chat request with tenant key and returns the status, the
// X-Tollgate-Cache header and the reply's text (a stream's concatenated).
func ask(t *testing.T, gw, key, body string, hdr ...string) (int, string, string) {
	t.Helper()
	status, h, b := post(t, gw+"/v1/chat/completions", body, append([]string{"Authorization", "Bearer " + key}, hdr...)...)
	if status != 200 {
		return status, h.Get("X-Tollgate-Cache"), string(b)
	}
	if strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		text, done := sseText(t, b)
		if !done {
			t.Errorf("stream without [DONE]: %s", b)
		}
		return status, h.Get("X-Tollgate-Cache"), text
	}
	var reply struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || reply.Object != "chat.completion" || len(reply.Choices) != 1 {
		t.Fatalf("not a chat.completion (%v): %s", err, b)
	}
	return status, h.Get("X-Tollgate-Cache"), reply.Choices[0].Message.Content
}

func TestCacheAcrossReplicasAndTenants(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	pol := cachePolicy(mockURL, rds.Addr(), `{ttl: 1h}`, "")
	_, gw1 := startGateway(t, pol, nil)
	_, gw2 := startGateway(t, pol, nil)
	const keyA, keyB = "tg_cache_a", "tg_cache_b"
	text := []string{mockllm.HeaderText, "the%20stored%20reply"}

	want := func(gw, key, body, outcome string, upstream int64) string {
		t.Helper()
		status, got, reply := ask(t, gw, key, body, text...)
		if status != 200 || got != outcome || calls.Load() != upstream {
			t.Fatalf("%s: status %d, X-Tollgate-Cache %q (want %q), upstream calls %d (want %d): %s", body, status, got, outcome, calls.Load(), upstream, reply)
		}
		return reply
	}
	// A whole reply stored by one replica is served by the other, whole and
	// as a stream.
	first := want(gw1, keyA, cachedChat("q1", false, ""), "miss", 1)
	if first != "the stored reply" {
		t.Fatalf("reply %q", first)
	}
	if got := want(gw2, keyA, cachedChat("q1", false, ""), "hit", 1); got != first {
		t.Fatalf("hit %q, stored %q", got, first)
	}
	if got := want(gw2, keyA, cachedChat("q1", true, ""), "hit", 1); got != first {
		t.Fatalf("streamed hit %q, stored %q", got, first)
	}
	// Another tenant never sees tenant a's entry.
	want(gw2, keyB, cachedChat("q1", false, ""), "miss", 2)
	want(gw1, keyB, cachedChat("q1", false, ""), "hit", 2)
	// A stream stored by one replica is replayed by the other and served
	// whole; the key ignores stream, stream_options and user.
	streamed := want(gw1, keyA, cachedChat("q2", true, ""), "miss", 3)
	if got := want(gw2, keyA, cachedChat("q2", true, `,"stream_options":{"include_usage":true},"user":"u9"`), "hit", 3); got != streamed {
		t.Fatalf("replayed %q, stored %q", got, streamed)
	}
	if got := want(gw2, keyA, cachedChat("q2", false, ""), "hit", 3); got != streamed {
		t.Fatalf("whole from a stream %q, stored %q", got, streamed)
	}
	// A different sampling parameter is a different request.
	want(gw2, keyA, cachedChat("q2", false, `,"max_tokens":7`), "miss", 4)
	// A request that is not deterministic is not cached; a client's
	// no-store keeps it out, its no-cache refreshes the entry.
	if _, got, _ := ask(t, gw1, keyA, strings.Replace(cachedChat("q1", false, ""), `"temperature":0`, `"temperature":0.7`, 1), text...); got != "bypass" || calls.Load() != 5 {
		t.Fatalf("temperature 0.7: %q, %d calls", got, calls.Load())
	}
	if _, got, _ := ask(t, gw1, keyA, cachedChat("q1", false, ""), append(text, "Cache-Control", "no-store")...); got != "bypass" || calls.Load() != 6 {
		t.Fatalf("no-store: %q, %d calls", got, calls.Load())
	}
	want(gw1, keyA, cachedChat("q1", false, ""), "hit", 6)
	if _, got, _ := ask(t, gw2, keyA, cachedChat("q1", false, ""), mockllm.HeaderText, "refreshed", "Cache-Control", "no-cache"); got != "miss" || calls.Load() != 7 {
		t.Fatalf("no-cache: %q, %d calls", got, calls.Load())
	}
	// The replica that refreshed serves the new reply at once (the
	// others once their in-process copy is older than cache.local_ttl).
	if got := want(gw2, keyA, cachedChat("q1", false, ""), "hit", 7); got != "refreshed" {
		t.Fatalf("after a refresh: %q", got)
	}
}

// TestCacheGuardedReplyNotStored: a reply the guard stopped is not stored,
// and a hit still passes the guards.
func TestCacheGuardedReplyNotStored(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	_, gw := startGateway(t, cachePolicy(mockURL, rds.Addr(), `{ttl: 1h}`, ""), nil)
	bad := []string{mockllm.HeaderText, "see%20https%3A%2F%2Fforbidden.example%2Fx"}
	for i, stream := range []bool{true, false, true} {
		status, got, reply := ask(t, gw, "tg_cache_a", cachedChat("g", stream, ""), bad...)
		if status != 200 || got != "miss" || calls.Load() != int64(i+1) || strings.Contains(reply, "forbidden.example") {
			t.Fatalf("%d: status %d, %q, %d calls: %q", i, status, got, calls.Load(), reply)
		}
	}
}

// TestCacheTTL: an entry is not served past its time to live, by either
// layer.
func TestCacheTTL(t *testing.T) {
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	_, gw := startGateway(t, cachePolicy(mockURL, rds.Addr(), `{ttl: 400ms}`, ""), nil)
	body := cachedChat("ttl", false, "")
	for i, want := range []string{"miss", "hit"} {
		if _, got, _ := ask(t, gw, "tg_cache_a", body); got != want {
			t.Fatalf("%d: %q, want %q", i, got, want)
		}
	}
	time.Sleep(600 * time.Millisecond)
	if _, got, _ := ask(t, gw, "tg_cache_a", body); got != "miss" || calls.Load() != 2 {
		t.Fatalf("after the TTL: %q, %d upstream calls", got, calls.Load())
	}
}

// TestCacheRedisDown: with Redis gone every request is served by the
// upstream (a miss), none fails; the in-process layer is off here so that
// every lookup asks Redis.
func TestCacheRedisDown(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	_, gw := startGateway(t, cachePolicy(mockURL, rds.Addr(), `{ttl: 1h}`, "cache: {local: false, timeout: 200ms}"), nil)
	body := cachedChat("down", false, "")
	for i, want := range []string{"miss", "hit"} {
		if _, got, _ := ask(t, gw, "tg_cache_a", body); got != want {
			t.Fatalf("%d: %q, want %q", i, got, want)
		}
	}
	if err := rds.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		status, got, reply := ask(t, gw, "tg_cache_a", body)
		if status != 200 || got != "miss" || reply == "" {
			t.Fatalf("%d with Redis down: status %d, %q: %s", i, status, got, reply)
		}
	}
	if calls.Load() != 4 {
		t.Fatalf("%d upstream calls, want 4", calls.Load())
	}
}

// TestCacheCoalesce: identical requests in flight together make one
// upstream call; every client gets the reply.
func TestCacheCoalesce(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	_, gw := startGateway(t, cachePolicy(mockURL, rds.Addr(), `{ttl: 1h, coalesce: true}`, ""), nil)
	const n = 8
	var wg sync.WaitGroup
	replies := make([]string, n)
	outcomes := make([]string, n)
	for i := range n {
		wg.Go(func() {
			// The first token after 300ms: the others arrive while it is
			// in flight.
			_, outcomes[i], replies[i] = ask(t, gw, "tg_cache_a", cachedChat("same", i%2 == 0, ""), mockllm.HeaderTTFT, "300ms", mockllm.HeaderText, "once")
		})
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("%d upstream calls for %d identical requests (outcomes %v)", calls.Load(), n, outcomes)
	}
	for i, r := range replies {
		if r != "once" {
			t.Fatalf("client %d got %q (%s)", i, r, outcomes[i])
		}
	}
}

// TestCacheBudgetAndCallLog: on the production stack (Postgres ledger,
// Redis counters, budget plugin before the cache) a hit costs nothing, the
// call log marks the miss and the hit, and the hit's saved_micros is what
// the stored reply cost.
func TestCacheBudgetAndCallLog(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 1_000_000_000)
	mockURL, calls := countingMock(t)
	pol := policy(mockURL, "", "mock-1", "mock-*") + w.stores("") + `plugins:
  - {name: preflight, builtin: preflight}
  - {name: budget, builtin: budget, config: {on_redis_error: fail_closed}}
  - {name: cache, builtin: cache}
`
	_, gw := w.gateway(t, pol)
	for i, want := range []string{"miss", "hit"} {
		status, got, reply := ask(t, gw, w.key, cachedChat("ledger", i == 1, ""), mockllm.HeaderTokens, "5")
		if status != 200 || got != want {
			t.Fatalf("%d: status %d, %q (want %q): %s", i, status, got, want, reply)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("%d upstream calls", calls.Load())
	}
	w.waitRows(t, 2)
	conn, err := pgx.Connect(t.Context(), w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, err := conn.Query(t.Context(), `SELECT cache, cost_micros, saved_micros, coalesce(upstream, ''), prompt_tokens, completion_tokens
		FROM call_log WHERE tenant_id = 'acme' ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		cache              string
		cost, saved        int64
		upstream           string
		prompt, completion int64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.cache, &r.cost, &r.saved, &r.upstream, &r.prompt, &r.completion); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 2 {
		t.Fatalf("rows %+v", got)
	}
	miss, hit := got[0], got[1]
	if miss.cache != "miss" || miss.cost <= 0 || miss.saved != 0 || miss.upstream != "up" {
		t.Errorf("miss row %+v", miss)
	}
	if hit.cache != "hit" || hit.cost != 0 || hit.saved != miss.cost || hit.upstream != "cache" || hit.prompt != 0 || hit.completion != 0 {
		t.Errorf("hit row %+v (the miss cost %d)", hit, miss.cost)
	}
	if _, sum, month := w.ledger(t); sum != miss.cost || month != miss.cost {
		t.Errorf("ledger sum %d, month %d, want the miss's %d alone", sum, month, miss.cost)
	}
}

// TestPluginAnswers: a plugin's own answer (respond, RESPOND) reaches the
// client streamed or whole as it asked, the chunk phase of a later plugin
// runs on it, and nothing goes upstream.
func TestPluginAnswers(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	mockURL, calls := countingMock(t)
	answer := `{"id":"chatcmpl-p","object":"chat.completion","created":1,"model":"mock-1","choices":[{"index":0,"message":{"role":"assistant","content":"from the plugin"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	cfg, err := json.Marshal(map[string]any{"request": []string{"set_response_header:X-Answered=yes", "respond:200 " + answer}})
	if err != nil {
		t.Fatal(err)
	}
	_, gw := startGateway(t, withPlugins(t, policy(mockURL, ""), "fail_closed", string(cfg), `{"chunk":"replace_upper"}`), nil)
	for _, stream := range []bool{false, true} {
		status, h, body := post(t, gw+"/v1/chat/completions", fmt.Sprintf(`{"model":"mock-1","stream":%t,"messages":[{"role":"user","content":"hi"}]}`, stream))
		if status != 200 || h.Get("X-Answered") != "yes" {
			t.Fatalf("stream %v: %d %v %s", stream, status, h, body)
		}
		var text string
		if stream {
			var done bool
			text, done = sseText(t, body)
			if !done || strings.Contains(string(body), `"usage"`) {
				t.Errorf("stream: done %v, a usage chunk the client did not ask for: %s", done, body)
			}
		} else {
			text = jsonString(string(body), `"content":`)
		}
		if text != "FROM THE PLUGIN" {
			t.Errorf("stream %v: text %q: %s", stream, text, body)
		}
	}
	// An endpoint the gateway cannot answer refuses the answer: the
	// request goes upstream.
	status, _, body := post(t, gw+"/v1/responses", `{"model":"mock-1","input":"hi"}`)
	if calls.Load() != 1 || status == 500 {
		t.Errorf("responses: %d upstream calls, status %d: %s", calls.Load(), status, body)
	}
}

// TestCacheHitCountsForRPM: with ratelimit before the cache, a hit still
// counts one request against the tenant's requests per minute.
func TestCacheHitCountsForRPM(t *testing.T) {
	t.Parallel() // checks no time: the limit is per minute and the test lasts a second
	mockURL, calls := countingMock(t)
	rds := redistest.Start(t)
	pol := policy(mockURL, "", "mock-1", "mock-*") + fmt.Sprintf(`
redis: {addrs: [%q], timeout: 1s}
store:
  kind: memory
tenants:
  plans:
    - {id: two, rpm: 2}
  tenants:
    - {id: a, plan: two, keys: [{id: a-1, key_sha256: %s}]}
plugins:
  - {name: preflight, builtin: preflight}
  - {name: ratelimit, builtin: ratelimit, config: {on_redis_error: fail_closed}}
  - {name: cache, builtin: cache}
`, rds.Addr(), sha("tg_cache_a"))
	_, gw := startGateway(t, pol, nil)
	for i, want := range []string{"miss", "hit"} {
		if status, got, reply := ask(t, gw, "tg_cache_a", cachedChat("rpm", false, "")); status != 200 || got != want {
			t.Fatalf("%d: status %d, %q (want %q): %s", i, status, got, want, reply)
		}
	}
	if status, _, reply := ask(t, gw, "tg_cache_a", cachedChat("rpm", false, "")); status != 429 {
		t.Fatalf("a third request within the minute (a would-be hit): status %d, want 429: %s", status, reply)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d upstream calls", calls.Load())
	}
}
