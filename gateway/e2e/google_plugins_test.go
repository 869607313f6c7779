package e2e

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The built-in plugins in front of Google upstreams, as `make run`'s
// default policy has them: preflight, ratelimit, budget and holdback see
// the translated replies as they see an OpenAI upstream's.

// googlePluginsExtra is a memory-store tenant with a normal key and one
// limited to two requests a minute, prices for both models, and the four
// built-in plugins.
func googlePluginsExtra() string {
	return fmt.Sprintf(`
store:
  kind: memory
tenants:
  plans:
    - {id: metered, rpm: 1000, tpm: 1000000, monthly_budget_usd: 5, max_tokens: 1024}
  tenants:
    - id: acme
      plan: metered
      keys:
        - {id: k-1, key_sha256: %s}
        - {id: k-limited, key_sha256: %s, rpm: 2}
  prices:
    - {model: gemini-x, input_usd_per_mtok: 1, output_usd_per_mtok: 10, effective_from: 2000-01-01T00:00:00Z}
    - {model: vertex-x, input_usd_per_mtok: 1, output_usd_per_mtok: 10, effective_from: 2000-01-01T00:00:00Z}
plugins:
  - name: preflight
    builtin: preflight
  - name: ratelimit
    builtin: ratelimit
    config: {default_max_tokens: 64}
  - name: budget
    builtin: budget
    config: {default_max_tokens: 64}
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: %s
`, sha("tg-google"), sha("tg-google-limited"), hbConfig)
}

var costLine = regexp.MustCompile(`msg=request request_id=(\S+) .*cost_micros=(\d+)`)

// accessCost waits for request id's access log line and returns its
// settled cost.
func accessCost(t *testing.T, logs *lockedBuffer, id string) int64 {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, m := range costLine.FindAllStringSubmatch(logs.String(), -1) {
			if m[1] == id {
				n, _ := strconv.ParseInt(m[2], 10, 64)
				return n
			}
		}
	}
	t.Fatalf("no access log line with a cost for %s", id)
	return 0
}

func TestGooglePlugins(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := startGoogleWorld(t, mockllm.Config{Text: googleText, ChunkSize: 5}, googlePluginsExtra())
	models := []string{"gemini-x", "vertex-x"}

	t.Run("usage settles the rate limit and the budget", func(t *testing.T) {
		for _, model := range models {
			for _, stream := range []bool{false, true} {
				id := fmt.Sprintf("g-usage-%s-%v", model, stream)
				body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"Hello there, mock"}]}`, model, stream)
				status, _, got := post(t, w.gw+"/v1/chat/completions", body, "Authorization", "Bearer tg-google", "X-Request-Id", id)
				if status != 200 {
					t.Fatalf("%s: %d %s", id, status, got)
				}
				tenant, _, st, prompt, completion := accessLog(t, w.logs, id)
				// 4 prompt tokens at 1 µ$ and 7 completion tokens at 10 µ$.
				if tenant != "acme" || st != 200 || prompt != 4 || completion != 7 {
					t.Errorf("%s: access log tenant %q status %d tokens %d+%d, want acme 200 4+7", id, tenant, st, prompt, completion)
				}
				if cost := accessCost(t, w.logs, id); cost != 74 {
					t.Errorf("%s: settled cost %d µ$, want 74", id, cost)
				}
			}
		}
	})

	t.Run("ratelimit refuses the third request of a minute", func(t *testing.T) {
		for i, model := range []string{"gemini-x", "vertex-x", "gemini-x"} {
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, model)
			status, hdr, got := post(t, w.gw+"/v1/chat/completions", body, "Authorization", "Bearer tg-google-limited")
			want := 200
			if i == 2 {
				want = 429
			}
			if status != want || (want == 429 && (hdr.Get("Retry-After") == "" || !strings.Contains(string(got), "rate_limit"))) {
				t.Errorf("request %d to %s: %d %s", i, model, status, got)
			}
		}
	})

	t.Run("holdback stops a stream on a marker URL", func(t *testing.T) {
		urlAt, markerAt := strings.Index(hbText, "https://"), strings.Index(hbText, hbMarker)
		for _, model := range models {
			for _, cuts := range [][]int{{markerAt + 3}, {urlAt, markerAt + 10}} {
				id := fmt.Sprintf("g-hb-%s-%d", model, cuts[0])
				body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"draw a cat"}]}`, model)
				status, _, raw := post(t, w.gw+"/v1/chat/completions", body, "Authorization", "Bearer tg-google", "X-Request-Id", id,
					mockllm.HeaderText, url.QueryEscape(hbText), mockllm.HeaderSplit, hbSplit(cuts...))
				if status != 200 {
					t.Fatalf("%s: %d %s", id, status, raw)
				}
				events, done := hbStream(t, raw)
				last := events[len(events)-1]
				if got := hbContent(events); got != hbText[:markerAt]+hbCorrection || !done || last.FinishReason == nil || *last.FinishReason != "content_filter" {
					t.Errorf("%s: content %q, done %v, last %+v", id, got, done, last)
				}
				if strings.Contains(string(raw), hbMarker) {
					t.Errorf("%s: the marker reached the client", id)
				}
			}
			// Not streamed: the reply's text is checked whole.
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"draw a cat"}]}`, model)
			status, _, raw := post(t, w.gw+"/v1/chat/completions", body, "Authorization", "Bearer tg-google", mockllm.HeaderText, url.QueryEscape(hbText))
			if status != 200 || strings.Contains(string(raw), hbMarker) || !strings.Contains(string(raw), hbCorrection) {
				t.Errorf("%s not streamed: %d %s", model, status, raw)
			}
		}
	})
}

// TestGoogleBudgetLedger: the budget settles, and the Postgres call log
// records, the tokens Google reported, through both providers, streamed
// and not.
func TestGoogleBudgetLedger(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 1_000_000)
	for _, m := range []string{"gemini-x", "vertex-x"} {
		if err := w.store.SetPrice(context.Background(), tenant.Price{Model: m, InputMicrosPerMTok: inputMicrosPerMTok,
			OutputMicrosPerMTok: outputMicrosPerMTok, EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	m := startGoogleMock(t, mockllm.Config{Text: googleText, ChunkSize: 5})
	tokenURL, _ := startTokenServer(t)
	pol := googlePolicy(m.url, serviceAccountFile(t, tokenURL), fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%q], timeout: 500ms}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - name: preflight
    builtin: preflight
  - name: budget
    builtin: budget
`, w.redis.Addr()))
	_, gw := startGateway(t, pol, map[string]string{"GEMINI_API_KEY": googleCred, "TOLLGATE_DATABASE_URL": w.dsn, "TG_TEST_SPOOL": t.TempDir()})
	var ids []string
	for _, model := range []string{"gemini-x", "vertex-x"} {
		for _, stream := range []bool{false, true} {
			id := fmt.Sprintf("g-led-%s-%v", model, stream)
			body := fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":50,"messages":[{"role":"user","content":"Hello there, mock"}]}`, model, stream)
			if status, _, got := post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer "+w.key, "X-Request-Id", id); status != 200 {
				t.Fatalf("%s: %d %s", id, status, got)
			}
			ids = append(ids, id)
		}
	}
	w.waitRows(t, int64(len(ids)))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// 4 prompt tokens at 1 µ$, 7 completion tokens at 10 µ$.
	const cost = 4*inputMicrosPerMTok/1_000_000 + 7*outputMicrosPerMTok/1_000_000
	for _, id := range ids {
		var prompt, completion, micros int64
		var up string
		if err := conn.QueryRow(ctx, `SELECT prompt_tokens, completion_tokens, cost_micros, upstream FROM call_log WHERE request_id = $1`, id).
			Scan(&prompt, &completion, &micros, &up); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if want := strings.SplitN(strings.TrimPrefix(id, "g-led-"), "-", 2)[0]; prompt != 4 || completion != 7 || micros != cost || up != want {
			t.Errorf("%s: call_log %d+%d tokens, %d µ$, upstream %q; want 4+7, %d µ$, %s", id, prompt, completion, micros, up, cost, want)
		}
	}
	spent, holds := w.counter(t)
	if spent != fmt.Sprint(len(ids)*cost) || (holds != "0" && holds != "") {
		t.Errorf("budget counter spent %s, held %s; want %d spent, nothing held", spent, holds, len(ids)*cost)
	}
}
