package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// Prices of the budget tests: 1 µ$ per prompt token, 10 µ$ per completion
// token.
const (
	inputMicrosPerMTok  = 1_000_000
	outputMicrosPerMTok = 10_000_000
)

// budgetWorld is Postgres, Redis, a tenant with a monthly budget, and a
// policy running preflight and budget against them.
type budgetWorld struct {
	pg    *pgtest.Server
	dsn   string
	redis *redistest.Server
	key   string
	store *pg.Store
	// gatewayDSN, if set, is the Postgres the gateways dial instead of dsn
	// (a fault-injecting proxy in front of it); the test's own checks
	// use dsn.
	gatewayDSN string
}

func newBudgetWorld(t *testing.T, budgetMicros int64) *budgetWorld {
	t.Helper()
	srv := pgtest.Start(t)
	ctx := context.Background()
	if err := pgtest.Migrate(ctx, srv.DSN()); err != nil {
		t.Fatal(err)
	}
	st, err := pg.Open(ctx, srv.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := st.CreatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: budgetMicros}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "metered"}); err != nil {
		t.Fatal(err)
	}
	key, _, err := st.CreateKey(ctx, "acme", pg.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"mock-1", "mock-2"} {
		if err := st.SetPrice(ctx, tenant.Price{Model: m, InputMicrosPerMTok: inputMicrosPerMTok, OutputMicrosPerMTok: outputMicrosPerMTok,
			EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	return &budgetWorld{pg: srv, dsn: srv.DSN(), redis: redistest.Start(t), key: key, store: st}
}

func (w *budgetWorld) policy(t *testing.T, mockURL, budgetConfig, callLog string) string {
	return policy(mockURL, "", "mock-1", "mock-*") + w.stores(callLog) + fmt.Sprintf(`plugins:
  - name: preflight
    path: %s
  - name: budget
    path: %s
    config: %s
`, pluginPath(t, "preflight"), pluginPath(t, "budget"), budgetConfig)
}

// stores is the policy block putting tenants and the call log in w's
// Postgres and counters in its Redis; callLog adds call_log settings
// (", key: value" or "").
func (w *budgetWorld) stores(callLog string) string {
	return fmt.Sprintf(`
store:
  kind: postgres
  cache: {ttl: 30s}
redis: {addrs: [%q], timeout: 500ms}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s%s}
`, w.redis.Addr(), callLog)
}

// gateway runs the policy in-process.
func (w *budgetWorld) gateway(t *testing.T, pol string, opts ...proxy.Option) (*proxy.Server, string) {
	t.Helper()
	spool := t.TempDir()
	p, err := config.Parse([]byte(pol), func(k string) (string, bool) {
		switch k {
		case "TOLLGATE_DATABASE_URL":
			if w.gatewayDSN != "" {
				return w.gatewayDSN, true
			}
			return w.dsn, true
		case "TG_TEST_SPOOL":
			return spool, true
		case "TOLLGATE_ADMIN_TOKEN":
			return adminToken, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})), opts...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	var once sync.Once
	stop := func() { once.Do(func() { srv.Shutdown(0, 5*time.Second); <-done }) }
	t.Cleanup(stop)
	return srv, "http://" + ln.Addr().String()
}

func (w *budgetWorld) process(t *testing.T, pol string) (*os.Process, string) {
	cmd, url, logs := gatewayProcess(t, pol, "TOLLGATE_DATABASE_URL="+w.dsn, "TG_TEST_SPOOL="+t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway %s:\n%s", url, tail(logs.String(), 3000))
		}
	})
	return cmd.Process, url
}

// ledger returns the call_log row count, the sum of their costs, and the
// spend_month counter of acme's current month.
func (w *budgetWorld) ledger(t *testing.T) (rows, sum, month int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(cost_micros), 0)::bigint FROM call_log WHERE tenant_id = 'acme'`).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	err = conn.QueryRow(ctx, `SELECT cost_micros FROM spend_month WHERE tenant_id = 'acme' AND month = date_trunc('month', now() AT TIME ZONE 'UTC')::date`).Scan(&month)
	if err != nil && err != pgx.ErrNoRows {
		t.Fatal(err)
	}
	return rows, sum, month
}

// waitRows waits until call_log holds n rows of acme.
func (w *budgetWorld) waitRows(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows, _, _ := w.ledger(t)
		if rows == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("call_log has %d rows of acme, want %d", rows, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counter reads the Redis budget counter of acme's month: spent and the
// micros held ("" for none).
func (w *budgetWorld) counter(t *testing.T) (spent string, holds string) {
	t.Helper()
	keys, err := w.redis.Do("KEYS", "*acme*")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range strings.Split(keys, "\n") {
		switch {
		case strings.HasSuffix(k, ":spent"):
			spent, _ = w.redis.Do("GET", k)
		case strings.HasSuffix(k, ":holds"):
			holds, _ = w.redis.Do("HGET", k, "")
		}
	}
	return spent, holds
}

func (w *budgetWorld) chat(t *testing.T, gw, body string) (int, http.Header, []byte) {
	return post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer "+w.key)
}

const chatMax100 = `{"model":"mock-1","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`

// TestBudgetExactAcrossReplicas: 64 concurrent requests through two gateway
// processes against a budget of exactly 20 of them and 499 µ$ more: 20
// are admitted, 44 refused with insufficient_quota, and the settled total
// is exactly 20 requests' cost.
//
// The bound is exact because each request costs what it holds: its model
// prices prompt tokens at 0 and completion tokens at 10 µ$, it asks for
// max_tokens 50 and the mock generates 50, so hold = cost = 500 µ$. The
// counter's spent + held is then 500 µ$ per request admitted so far,
// whatever the order of holds and settlements across the two replicas,
// and a request is admitted exactly while that leaves room for it. One
// request admitted too many (two replicas both taking the last place)
// is a 21st admission and 10,500 µ$ settled against 10,499.
func TestBudgetExactAcrossReplicas(t *testing.T) {
	const (
		cost     = 50 * outputMicrosPerMTok / 1_000_000 // 500 µ$: held and settled
		admitted = 20
		budget   = admitted*cost + cost - 1
		requests = 64
		body     = `{"model":"mock-exact","max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	)
	w := newBudgetWorld(t, budget)
	if err := w.store.SetPrice(context.Background(), tenant.Price{Model: "mock-exact", InputMicrosPerMTok: 0,
		OutputMicrosPerMTok: outputMicrosPerMTok, EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// TTFT 300 ms: the holds of concurrent requests overlap, so both
	// replicas decide while the other's holds are live.
	_, mockURL := startMock(t, mockllm.Config{Tokens: 50, TTFT: 300 * time.Millisecond})
	pol := w.policy(t, mockURL, `{}`, "")
	_, gwA := w.process(t, pol)
	_, gwB := w.process(t, pol)

	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < requests; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			gw := gwA
			if i%2 == 1 {
				gw = gwB
			}
			<-start
			status, _, resp := w.chat(t, gw, body)
			switch status {
			case 200:
				ok.Add(1)
			case 429:
				e := decodeError(t, resp).Error
				if e.Type != "insufficient_quota" || e.Code == nil || *e.Code != "insufficient_quota" {
					t.Errorf("refusal is not insufficient_quota: %s", resp)
				}
				refused.Add(1)
			default:
				t.Errorf("status %d: %s", status, resp)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	w.waitRows(t, requests)
	rows, sum, month := w.ledger(t)
	spent, holds := w.counter(t)
	t.Logf("admitted %d, refused %d; call_log %d rows, %d µ$ settled; spend_month %d; redis spent %s, holds %s",
		ok.Load(), refused.Load(), rows, sum, month, spent, holds)
	if sum > budget {
		t.Fatalf("settled %d µ$ against a budget of %d", sum, budget)
	}
	if ok.Load() != admitted || refused.Load() != requests-admitted {
		t.Fatalf("admitted %d, refused %d; want exactly %d and %d (budget %d µ$, %d µ$ a request)",
			ok.Load(), refused.Load(), admitted, requests-admitted, budget, cost)
	}
	if sum != admitted*cost {
		t.Fatalf("settled %d µ$ for %d requests; each must cost exactly its hold, %d µ$", sum, admitted, cost)
	}
	if month != sum || spent != fmt.Sprint(sum) {
		t.Fatalf("spend_month %d and the Redis counter %s disagree with call_log's sum %d", month, spent, sum)
	}
	if holds != "0" && holds != "" {
		t.Fatalf("%s µ$ still held after every request ended", holds)
	}
}

// TestBudgetNextRequestSeesSettle: a client's next request finds its
// previous request settled — the settle is made before the reply's last
// byte (proxy: exchange.end). Each request holds 1,000 µ$ (max_tokens 100
// at 10 µ$, the prompt free) and costs 20 µ$ (the mock answers 2 tokens);
// the budget is one hold and 30 costs. One after the other, requests 1 to
// 31 fit — each finds the earlier ones settled at 20 µ$ — and the 32nd
// does not. A settle not yet made when the next request's hold is asked
// for leaves its 1,000 µ$ held beside the new 1,000: that request is
// refused long before the 31st (a settle sent beside the reply, unordered
// with the next admission, failed this within 30 requests in two runs of
// three). Half the requests come on a kept-alive connection, half on a
// new one each.
func TestBudgetNextRequestSeesSettle(t *testing.T) {
	t.Run("budget alone", func(t *testing.T) { budgetNextRequestSeesSettle(t, false) })
	// With ratelimit the admission and the hold are made together, and the
	// end goes after the reply: the next request's admission carries it
	// (docs/adr/0030-ends-after-the-reply.md).
	t.Run("with ratelimit", func(t *testing.T) { budgetNextRequestSeesSettle(t, true) })
}

func budgetNextRequestSeesSettle(t *testing.T, ratelimit bool) {
	const (
		hold   = 100 * outputMicrosPerMTok / 1_000_000 // 1,000 µ$
		cost   = 2 * outputMicrosPerMTok / 1_000_000   // 20 µ$
		budget = hold + 30*cost
		body   = `{"model":"mock-free-prompt","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	)
	w := newBudgetWorld(t, budget)
	if err := w.store.SetPrice(context.Background(), tenant.Price{Model: "mock-free-prompt", InputMicrosPerMTok: 0,
		OutputMicrosPerMTok: outputMicrosPerMTok, EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2, Usage: true})
	pol := w.policy(t, mockURL, `{}`, "")
	if ratelimit {
		pol += fmt.Sprintf("  - name: ratelimit\n    path: %s\n", pluginPath(t, "ratelimit"))
		if err := w.store.UpdatePlan(context.Background(), tenant.Plan{ID: "metered", MonthlyBudgetMicros: budget, Limits: tenant.Limits{RPM: 10_000, TPM: 10_000_000}}); err != nil {
			t.Fatal(err)
		}
	}
	srv, gw := w.gateway(t, pol)
	kept := &http.Client{}
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := 1; i <= 32; i++ {
		c := kept
		if i%2 == 0 {
			c = fresh
		}
		status, _, resp := postWith(t, c, gw+"/v1/chat/completions", body, "Authorization", "Bearer "+w.key)
		switch {
		case i <= 31 && status != 200:
			spent, holds := w.counter(t)
			t.Fatalf("request %d: %d %s (Redis now: spent %s, held %s); want 200: the earlier %d requests settled at %d µ$ leave room for a %d µ$ hold",
				i, status, resp, spent, holds, i-1, cost, hold)
		case i == 32 && status != 429:
			t.Fatalf("request 32: %d %s; want 429: 31 requests settled leave %d µ$, less than a hold", status, resp, budget-31*cost)
		}
	}
	w.waitRows(t, 32)
	if _, sum, _ := w.ledger(t); sum != 31*cost {
		t.Fatalf("settled %d µ$, want %d", sum, 31*cost)
	}
	m := httptest.NewServer(srv.MetricsHandler())
	defer m.Close()
	text, err := httpGet(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	mv := metricValues(t, text)
	after, before := mv[`tollgate_meter_ends_total{when="after_reply"}`], mv[`tollgate_meter_ends_total{when="before_last_byte"}`]
	t.Logf("ends after the reply %v, before the last byte %v, carried %v", after, before, mv["tollgate_meter_ends_carried_total"])
	// 31 settles; with ratelimit the refused 32nd request's token
	// correction too, an end without a settle, made before its last byte.
	if ratelimit && (after < 25 || after+before != 32) || !ratelimit && (after != 0 || before != 31) {
		t.Errorf("ends: %v after the reply, %v before the last byte; want 31 settled, after the reply with ratelimit", after, before)
	}
}

// TestBudgetSettlement: the hold is released and the real cost charged on
// success, on an upstream error and when the client disconnects.
func TestBudgetSettlement(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 40, InterToken: 5 * time.Millisecond, Usage: true})
	_ = mock
	srvOK, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))

	// Success: 40 completion tokens at 10 µ$ plus the prompt.
	if status, _, body := w.chat(t, gw, chatMax100); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	w.waitRows(t, 1)
	_, sum, _ := w.ledger(t)
	if sum < 400 || sum > 420 {
		t.Fatalf("settled %d µ$ for 40 completion tokens", sum)
	}

	// Upstream error: nothing used, nothing charged, hold released.
	failing := startUpstream(t, func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(500)
		rw.Write([]byte(`{"error":{"message":"boom","type":"server_error"}}`))
	})
	_, gwFail := w.gateway(t, w.policy(t, failing, `{}`, ""))
	if status, _, _ := w.chat(t, gwFail, chatMax100); status != 500 {
		t.Fatalf("upstream error passed through as %d", status)
	}
	w.waitRows(t, 2)
	if _, sum2, _ := w.ledger(t); sum2 != sum {
		t.Fatalf("an upstream error cost %d µ$", sum2-sum)
	}

	// Client disconnect mid-stream: the tokens received so far are charged.
	conn, err := net.Dial("tcp", strings.TrimPrefix(gw, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"mock-1","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", w.key, len(body), body)
	br := bufio.NewReader(conn)
	events := 0
	for events < 10 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content"`) {
			events++
		}
	}
	conn.Close()
	w.waitRows(t, 3)
	_, sum3, month := w.ledger(t)
	cut := sum3 - sum
	if cut < 10*10 || cut >= 40*10 {
		t.Fatalf("a stream cut after ~10 of 40 tokens cost %d µ$", cut)
	}
	spent, holds := w.counter(t)
	if spent != fmt.Sprint(sum3) || month != sum3 || (holds != "0" && holds != "") {
		t.Fatalf("counter %s, spend_month %d, call_log %d, held %s", spent, month, sum3, holds)
	}

	// The admin API reports spend, holds and what is left.
	adm := httptest.NewServer(srvOK.AdminHandler())
	defer adm.Close()
	req, _ := http.NewRequest("GET", adm.URL+"/v1/admin/tenants/acme/usage", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var u struct {
		SpendMicros        int64  `json:"spend_micros"`
		BudgetMicros       int64  `json:"budget_micros"`
		CounterSpendMicros *int64 `json:"counter_spend_micros"`
		ReservedMicros     *int64 `json:"reserved_micros"`
		RemainingMicros    *int64 `json:"remaining_micros"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || resp.StatusCode != 200 {
		t.Fatalf("usage: %d %v", resp.StatusCode, err)
	}
	if u.SpendMicros != sum3 || u.BudgetMicros != 1_000_000 || u.CounterSpendMicros == nil || *u.CounterSpendMicros != sum3 ||
		u.ReservedMicros == nil || *u.ReservedMicros != 0 || u.RemainingMicros == nil || *u.RemainingMicros != 1_000_000-sum3 {
		t.Fatalf("usage %+v, want spend %d of 1000000, nothing held", u, sum3)
	}
}

// TestBudgetCutsStream: a stream without max_tokens grows its hold as it
// goes and is cut, with a final event that says why, when the budget
// cannot cover more.
func TestBudgetCutsStream(t *testing.T) {
	const budget = 5_000
	w := newBudgetWorld(t, budget)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2000, Usage: true})
	_, gw := w.gateway(t, w.policy(t, mockURL, `{default_max_tokens: 100, extend_tokens: 100}`, ""))
	status, _, body := w.chat(t, gw, `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hello there"}]}`)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	text, done := sseText(t, body)
	if !done || !strings.Contains(text, "monthly budget is exhausted") || !strings.Contains(string(body), `"finish_reason":"length"`) {
		t.Fatalf("stream not cut with a reason (done=%v): ...%s", done, tail(string(body), 600))
	}
	w.waitRows(t, 1)
	_, sum, _ := w.ledger(t)
	if sum > budget {
		t.Fatalf("a cut stream settled %d µ$ against a budget of %d", sum, budget)
	}
	// The hold counts every streamed byte as a token, plus one per event
	// (a token is at least a byte): what was streamed, counted so, is
	// within the budget at 10 µ$ a token, and the cut did not come long
	// before (the hold keeps 256 tokens of slack ahead of the reply).
	// (sseText leaves escapes as they are: the cut message's "\n\n" reads "nn".)
	streamed, _, _ := strings.Cut(text, "nn[The reply was cut")
	used := int64(len(streamed) + strings.Count(streamed, "tok"))
	if used*10 > budget || used*10 < budget/4 {
		t.Fatalf("cut after %d bytes and events (%d µ$ at 10 a token) of a budget of %d", used, used*10, budget)
	}
	// What is left (the budget less what the cut stream cost) cannot hold
	// a 500-token reply.
	if status, _, body := w.chat(t, gw, `{"model":"mock-1","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`); status != 429 {
		t.Fatalf("after the budget ran out: %d %s", status, body)
	}
}

// TestBudgetLeaseExpiry: a replica killed mid-stream leaves its hold; the
// hold expires with its lease and the budget is usable again.
func TestBudgetLeaseExpiry(t *testing.T) {
	const lease = 3 * time.Second
	w := newBudgetWorld(t, 1_500)
	_, slowURL := startMock(t, mockllm.Config{Tokens: 5, TTFT: 30 * time.Second})
	_, fastURL := startMock(t, mockllm.Config{Tokens: 5})
	procA, gwA := w.process(t, w.policy(t, slowURL, `{lease: 3s}`, ""))
	_, gwB := w.gateway(t, w.policy(t, fastURL, `{lease: 3s}`, ""))

	go func() {
		req, _ := http.NewRequest("POST", gwA+"/v1/chat/completions", strings.NewReader(
			`{"model":"mock-1","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`))
		req.Header.Set("Authorization", "Bearer "+w.key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body) // open until A dies
			resp.Body.Close()
		}
	}()
	// The stream waits for its first token; its hold is in Redis.
	var held time.Time
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, holds := w.counter(t); holds != "" && holds != "0" {
			t.Logf("held %s µ$", holds)
			held = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no hold appeared")
		}
	}
	procA.Signal(syscall.SIGKILL)
	if status, _, body := w.chat(t, gwB, chatMax100); status != 429 {
		t.Fatalf("while the dead replica's hold is live (%v after it was taken): %d %s", time.Since(held), status, body)
	}
	time.Sleep(time.Until(held.Add(lease + 200*time.Millisecond)))
	if status, _, body := w.chat(t, gwB, chatMax100); status != 200 {
		t.Fatalf("after the lease: %d %s", status, body)
	}
}

// TestQueryBudgetRedis counts round trips with preflight, ratelimit and
// budget on Postgres and Redis: before its first byte a warm request sends
// one Redis command for both plugins (they defer their calls, and the host
// serves the admission and the hold in one script call) and no Postgres
// statement; its end, one more (the token correction and the settle).
func TestQueryBudgetRedis(t *testing.T) {
	w := newBudgetWorld(t, 10_000_000)
	// The reply's first byte goes out with its first token; the tokens
	// that follow are 200 ms apart, so the end phase (which talks to
	// Redis again) cannot have run when the first byte is seen.
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3, TTFT: 100 * time.Millisecond, InterToken: 200 * time.Millisecond, Usage: true})
	pol := w.policy(t, mockURL, `{}`, "") + fmt.Sprintf(`  - name: ratelimit
    path: %s
`, pluginPath(t, "ratelimit"))
	var tenantPG, ledgerPG countingTracer
	srv, gw := w.gateway(t, pol, proxy.WithPGTracer(&tenantPG), proxy.WithLedgerPGTracer(&ledgerPG))

	// The plan has limits so ratelimit has work to do.
	ctx := context.Background()
	if err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: 10_000_000, Limits: tenant.Limits{RPM: 1000, TPM: 1_000_000}}); err != nil {
		t.Fatal(err)
	}
	stream := `{"model":"mock-1","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	for i := 0; i < 2; i++ { // cold: key lookup, counter seeding
		if status, _, body := w.chat(t, gw, stream); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
	}
	w.waitRows(t, 2)
	time.Sleep(50 * time.Millisecond) // the writer's commit has returned
	if _, err := w.redis.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	pgBefore := tenantPG.n.Load() + ledgerPG.n.Load()
	pollsBefore := srv.CancelStats().Polls
	req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(stream))
	req.Header.Set("Authorization", "Bearer "+w.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The first byte has arrived (Do returns with the headers, which go
	// out with the first event).
	redisBefore := scriptCalls(t, w.redis) - int(srv.CancelStats().Polls-pollsBefore)
	pgFirstByte := tenantPG.n.Load() + ledgerPG.n.Load() - pgBefore
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	w.waitRows(t, 3)
	// The cancel poller also calls while the stream is in flight.
	polls := srv.CancelStats().Polls - pollsBefore
	redisTotal := scriptCalls(t, w.redis) - int(polls)
	t.Logf("HOTPATH-BUDGET redis_before_first_byte=%d redis_total=%d pg_before_first_byte=%d", redisBefore, redisTotal, pgFirstByte)
	if redisBefore != 1 {
		t.Errorf("Redis commands before the first byte = %d, want 1 (the admission and the hold in one script call)", redisBefore)
	}
	if pgFirstByte != 0 {
		t.Errorf("Postgres statements before the first byte = %d, want 0", pgFirstByte)
	}
	if redisTotal > 2 {
		t.Errorf("Redis commands for the whole request = %d, want at most 2 (admit+reserve, adjust+settle)", redisTotal)
	}
}

// load sends n requests from c concurrent clients and returns how many got
// a 200.
func (w *budgetWorld) load(t *testing.T, gw, body string, n, c int) int64 {
	var ok atomic.Int64
	var wg sync.WaitGroup
	jobs := make(chan struct{})
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				status, _, b := w.chat(t, gw, body)
				if status == 200 {
					ok.Add(1)
				} else {
					t.Errorf("status %d: %s", status, b)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	return ok.Load()
}

// TestLedgerGroupCommit: at 32 concurrent clients the writer commits many
// rows per transaction, and the ledger adds up.
func TestLedgerGroupCommit(t *testing.T) {
	w := newBudgetWorld(t, 0) // no budget: the ledger still prices usage
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5})
	srv, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))
	w.load(t, gw, chatMax100, 64, 32) // warm
	w.waitRows(t, 64)
	before := srv.AccountingStats().Ledger
	served := w.load(t, gw, chatMax100, 1500, 32)
	w.waitRows(t, 64+served)
	st := srv.AccountingStats().Ledger
	rows, txs := st.Rows-before.Rows, st.Transactions-before.Transactions
	perTx := float64(rows) / float64(max(txs, 1))
	t.Logf("LEDGER-GROUP-COMMIT concurrency=32 rows=%d transactions=%d rows_per_tx=%.1f max_tx_rows=%d inline=%d",
		rows, txs, perTx, st.MaxTxRows, st.InlineWrites)
	if perTx < 10 {
		t.Errorf("%.1f rows per transaction at 32 concurrent, want at least 10", perTx)
	}
	_, sum, month := w.ledger(t)
	if sum == 0 || month != sum {
		t.Errorf("spend_month %d, call_log sum %d", month, sum)
	}
}

// TestLedgerPostgresOutage stops Postgres under load: warm requests keep
// being served, rows go to the spool and are replayed once Postgres is
// back; nothing is lost or written twice.
func TestLedgerPostgresOutage(t *testing.T) {
	w := newBudgetWorld(t, 100_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5})
	srv, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))
	served := w.load(t, gw, chatMax100, 40, 8) // warm: key cached, counter seeded
	w.waitRows(t, served)

	done := make(chan int64)
	go func() { done <- w.load(t, gw, chatMax100, 400, 8) }()
	time.Sleep(50 * time.Millisecond)
	if err := w.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := w.pg.Start(); err != nil {
		t.Fatal(err)
	}
	served += <-done
	w.waitRows(t, served)
	rows, sum, month := w.ledger(t)
	st := srv.AccountingStats().Ledger
	t.Logf("served %d; call_log %d rows, sum %d, spend_month %d; spooled %d, replayed %d", served, rows, sum, month, st.SpooledRows, st.ReplayedRows)
	if rows != served || month != sum {
		t.Fatalf("served %d but call_log has %d rows; spend_month %d vs sum %d", served, rows, month, sum)
	}
	if st.SpooledRows == 0 || st.ReplayedRows != st.SpooledRows {
		t.Fatalf("spooled %d, replayed %d: the outage did not exercise the spool", st.SpooledRows, st.ReplayedRows)
	}
	spent, _ := w.counter(t)
	if spent != fmt.Sprint(sum) {
		t.Fatalf("Redis counter %s, call_log sum %d", spent, sum)
	}
}

// TestLedgerDrainOnSIGTERM: the writer is stuck behind a locked counter row
// with its queue full when SIGTERM arrives; the gateway drains every row
// before it exits.
func TestLedgerDrainOnSIGTERM(t *testing.T) {
	w := newBudgetWorld(t, 0)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	proc, gw := w.process(t, w.policy(t, mockURL, `{}`, ", queue_size: 8"))
	served := w.load(t, gw, chatMax100, 5, 1)
	w.waitRows(t, served)

	// Hold the counter row locked: every ledger transaction waits.
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT * FROM spend_month WHERE tenant_id = 'acme' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	// Requests end before their rows are written: the queue fills, and
	// the last ones block writing inline, so run them in the background.
	var wg sync.WaitGroup
	var more atomic.Int64
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(chatMax100))
				req.Header.Set("Authorization", "Bearer "+w.key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				var b [4096]byte
				readFull(resp.Body, b[:])
				resp.Body.Close()
				if resp.StatusCode == 200 {
					more.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	if rows, _, _ := w.ledger(t); rows != served {
		t.Fatalf("rows were written while the counter row was locked (%d)", rows)
	}
	proc.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	tx.Rollback(ctx) // Postgres frees up; the drain can finish
	exited := make(chan struct{})
	go func() { proc.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not exit after SIGTERM")
	}
	wg.Wait()
	served += more.Load()
	rows, sum, month := w.ledger(t)
	t.Logf("served %d, call_log %d rows", served, rows)
	if rows != served || month != sum {
		t.Fatalf("served %d, call_log %d rows; spend_month %d vs sum %d", served, rows, month, sum)
	}
}

// TestLedgerReconcile injects drift into spend_month and the Redis counter;
// the reconcile job corrects both and counts the drift.
func TestLedgerReconcile(t *testing.T) {
	w := newBudgetWorld(t, 100_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3})
	pol := strings.Replace(w.policy(t, mockURL, `{}`, ""), "reconcile_interval: 0s", "reconcile_interval: 1s", 1)
	srv, gw := w.gateway(t, pol)
	served := w.load(t, gw, chatMax100, 10, 2)
	w.waitRows(t, served)
	_, sum, _ := w.ledger(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE spend_month SET cost_micros = cost_micros + 777 WHERE tenant_id = 'acme'`); err != nil {
		t.Fatal(err)
	}
	keys, _ := w.redis.Do("KEYS", "*acme*:spent")
	if _, err := w.redis.Do("SET", strings.TrimSpace(keys), "5"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, s, month := w.ledger(t)
		spent, _ := w.counter(t)
		if month == s && spent == fmt.Sprint(s) && s == sum {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reconciled: spend_month %d, Redis %s, call_log %d", month, spent, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := srv.AccountingStats(); st.ReconcileDriftMicros < 777 || st.ReconcileRuns == 0 {
		t.Fatalf("reconcile stats %+v: the 777 µ$ drift was not counted", st)
	}
}

// TestCallLogRecordsGuard: a stream the holdback guard stopped is logged
// with its guard action and the reply bytes the client actually received.
func TestCallLogRecordsGuard(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	text := "Here it is: https://img.evil.example/a.png and more text after it."
	_, mockURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 5, Usage: true})
	pol := w.policy(t, mockURL, `{}`, "") + fmt.Sprintf(`  - name: holdback
    path: %s
    config: {markers: [evil.example], correction: "[removed]"}
`, pluginPath(t, "holdback"))
	_, gw := w.gateway(t, pol)
	status, _, body := w.chat(t, gw, `{"model":"mock-1","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"show me"}]}`)
	got, done := sseText(t, body)
	if status != 200 || !done || !strings.HasSuffix(got, "[removed]") || strings.Contains(got, "evil.example") {
		t.Fatalf("%d done=%v %q", status, done, got)
	}
	w.waitRows(t, 1)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var action string
	var reply int64
	if err := conn.QueryRow(ctx, `SELECT guard_action, reply_bytes FROM call_log WHERE tenant_id = 'acme'`).Scan(&action, &reply); err != nil {
		t.Fatal(err)
	}
	if action != "holdback:stopped" || reply != int64(len(got)) {
		t.Fatalf("call_log: guard_action %q, reply_bytes %d; the client received %d bytes", action, reply, len(got))
	}
}
