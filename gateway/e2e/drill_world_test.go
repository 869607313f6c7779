package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// The reliability drills (drills_*_test.go) run the gateway under
// streaming load, inject one fault each, and check two things: that the
// gateway did what docs/ promise for that fault, and that nothing was
// lost — every request the gateway answered has exactly one call_log
// row, spend_month equals the SUM of call_log's cost for the tenant and
// month, and no stream was cut but those the drill cut.
//
// By default they are short (a few seconds each, small loads: part of
// `make test`). TOLLGATE_DRILLS=long (`make drills`) runs them with more
// load for longer and writes each drill's measured row into the table of
// docs/RELIABILITY.md.

// drillLong is the long form.
var drillLong = os.Getenv("TOLLGATE_DRILLS") == "long"

// scaled is short in the short form, long in the long one.
func scaled[T any](short, long T) T {
	if drillLong {
		return long
	}
	return short
}

// drillMockConfig is the drills' model: each stream sends its first token
// after 20 ms, then drillTokens tokens 10 ms apart, and reports its usage.
var drillMockConfig = mockllm.Config{TTFT: 20 * time.Millisecond, Tokens: drillTokens, InterToken: 10 * time.Millisecond, Usage: true}

// drillCost is what a whole drill reply costs in µ$: one prompt token and
// drillTokens completion tokens at the budget world's prices.
const drillCost = 1*inputMicrosPerMTok/1_000_000 + drillTokens*outputMicrosPerMTok/1_000_000

// drillWorld is Postgres, Redis and the mock model, with a plan every
// drill tenant is on: a budget no drill exhausts and limits no drill
// reaches, so ratelimit and budget do their Redis work on every request.
type drillWorld struct {
	*budgetWorld
	mock    *mockllm.Server
	mockURL string
}

func newDrillWorld(t *testing.T) *drillWorld {
	t.Helper()
	w := &drillWorld{budgetWorld: newBudgetWorld(t, 1_000_000_000)}
	if err := w.store.UpdatePlan(context.Background(), tenant.Plan{ID: "metered", MonthlyBudgetMicros: 1_000_000_000,
		Limits: tenant.Limits{RPM: 1_000_000, TPM: 1_000_000_000}}); err != nil {
		t.Fatal(err)
	}
	w.mock, w.mockURL = startMock(t, drillMockConfig)
	return w
}

// tenant creates a tenant on the world's plan and returns a key of it.
// Each drill has its own tenant, so its ledger is its own.
func (w *drillWorld) tenant(t *testing.T, id string) string {
	t.Helper()
	ctx := context.Background()
	if err := w.store.CreateTenant(ctx, tenant.Tenant{ID: id, PlanID: "metered"}); err != nil {
		t.Fatal(err)
	}
	key, _, err := w.store.CreateKey(ctx, id, pg.KeyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// drillPolicy shapes the drills' policy.
type drillPolicy struct {
	ratelimitOnRedis string // default fail_open
	budgetOnRedis    string // default fail_closed
	replicas         int    // ratelimit's replicas (default 1)
	lease            string // budget lease (default 15m)
	drain            string // server.drain_timeout (default 10s)
	timeouts         string // the upstream's timeouts
	reconcile        string // call_log.reconcile_interval (default 0s: off)
	wal              string // call_log.wal (default: none, the defaults)
	queueSize        int    // call_log.queue_size (default 0: the default)
	plugins          string // more plugins, after budget (YAML list items)
	upstreams        string // more upstreams (YAML list items)
	route            string // the route's target (default "upstream: up")
	cache            string // store.cache (default "{ttl: 3s}")
	redisAddr        string // the Redis the gateway dials (default the world's)
	redisTimeout     string // redis.timeout (default 1s)
}

// policy is policies/production.yaml's plugin chain against the world:
// preflight, ratelimit (fail_open), budget (fail_closed). The Redis
// timeout is 1 s rather than production's 100 ms: the drills count
// outcomes on a shared 2-core machine, where a starved round trip past
// 100 ms would be a refusal the fault did not cause.
func (w *drillWorld) policy(t *testing.T, o drillPolicy) string {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.ratelimitOnRedis, "fail_open")
	def(&o.budgetOnRedis, "fail_closed")
	def(&o.lease, "15m")
	def(&o.drain, "10s")
	def(&o.timeouts, "{connect: 1s, first_byte: 5s, idle: 5s, total: 1m}")
	def(&o.reconcile, "0s")
	def(&o.cache, "{ttl: 3s}")
	def(&o.redisAddr, w.redis.Addr())
	def(&o.redisTimeout, "1s")
	if o.replicas == 0 {
		o.replicas = 1
	}
	base := policy(w.mockURL, o.upstreams, "mock-1", "mock-*")
	if o.route != "" {
		base = strings.Replace(base, "    upstream: up\n", "    "+o.route+"\n", 1)
	}
	base = strings.Replace(base, "drain_timeout: 2s", "drain_timeout: "+o.drain, 1)
	base = strings.Replace(base, "timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}", "timeouts: "+o.timeouts, 1)
	return base + fmt.Sprintf(`
store:
  kind: postgres
  cache: %s
redis: {addrs: [%q], timeout: %s}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: %s%s%s}
plugins:
  - name: preflight
    path: %s
  - name: ratelimit
    path: %s
    config: {on_redis_error: %s, replicas: %d}
  - name: budget
    path: %s
    config: {on_redis_error: %s, lease: %s}
%s`, o.cache, o.redisAddr, o.redisTimeout, o.reconcile, walField(o.wal), queueField(o.queueSize), pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), o.ratelimitOnRedis, o.replicas,
		pluginPath(t, "budget"), o.budgetOnRedis, o.lease, o.plugins)
}

// faultPluginPath builds gateway/e2e/testdata/faultplugin once per source
// change.
func faultPluginPath(t *testing.T) string {
	t.Helper()
	p, err := wasmbuild.Cached(repoRoot(t) + "/gateway/e2e/testdata/faultplugin")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ledgerCheck is the accounting of one tenant after a drill.
type ledgerCheck struct {
	answered int // outcomes the gateway answered that must have a row
	rows     int // the tenant's call_log rows
	// missing: answered outcomes without a row; excused: those of them
	// the drill excuses (a gateway killed before it wrote them).
	missing, excused int
	dupes            int // request ids with more than one row
	strangers        int // rows of request ids the load never sent
	sum, spend       int64
	months           int // months whose spend_month differs from SUM(cost)
}

// lost says what was lost, "nothing" when nothing was.
func (c ledgerCheck) lost() string {
	var parts []string
	if n := c.missing - c.excused; n > 0 {
		parts = append(parts, fmt.Sprintf("%d call_log rows", n))
	}
	if c.excused > 0 {
		parts = append(parts, fmt.Sprintf("%d rows of requests the killed gateway finished in its last moments (the crash window of ADR 0004)", c.excused))
	}
	if c.dupes > 0 {
		parts = append(parts, fmt.Sprintf("%d request ids logged twice", c.dupes))
	}
	if c.strangers > 0 {
		parts = append(parts, fmt.Sprintf("%d rows no client request explains", c.strangers))
	}
	if c.months > 0 {
		parts = append(parts, fmt.Sprintf("spend_month %d µ$ vs SUM(call_log) %d µ$", c.spend, c.sum))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// evidence is what the ledger holds: "1877 rows for 1877 answered
// requests; spend_month = SUM(cost) = 377277 µ$".
func (c ledgerCheck) evidence() string {
	return fmt.Sprintf("%d call_log rows for %d answered requests; spend_month = SUM(cost) = %d µ$", c.rows, c.answered, c.sum)
}

// mustHaveRow reports whether the gateway owes o a call_log row: it
// answered, and its tenant was known by then. A refusal before the
// plugins ran (shutting down, tenant store unreachable) has none; a reply
// cut by a killed gateway or never sent may have one or not.
func mustHaveRow(o *drillOutcome) bool {
	switch o.kind {
	case cut, noReply:
		return false
	case refused:
		// call_log_unavailable: refused before it cost anything, or its
		// reply withheld (its row may still be stored).
		return o.code != "shutting_down" && o.code != "tenant_service_unavailable" && o.code != "call_log_unavailable"
	}
	return true
}

// checkLedger waits (up to a bound) until every outcome that must have
// a row has one, then checks tenant's ledger against outs. excuse, if not
// nil, names missing rows the drill allows.
func (w *drillWorld) checkLedger(t *testing.T, tenantID string, outs []drillOutcome, excuse func(o *drillOutcome) bool) ledgerCheck {
	t.Helper()
	sent := make(map[string]*drillOutcome, len(outs))
	for i := range outs {
		sent[outs[i].id] = &outs[i]
	}
	var c ledgerCheck
	var logged map[string]int
	deadline := time.Now().Add(scaled(20*time.Second, 60*time.Second))
	for {
		logged = w.loggedIDs(t, tenantID)
		c = ledgerCheck{}
		for i := range outs {
			o := &outs[i]
			if !mustHaveRow(o) {
				continue
			}
			c.answered++
			if logged[o.id] == 0 {
				c.missing++
				if excuse != nil && excuse(o) {
					c.excused++
				}
			}
		}
		if c.missing == c.excused || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	for id, n := range logged {
		c.rows += n
		if n > 1 {
			c.dupes++
		}
		if sent[id] == nil {
			c.strangers++
		}
	}
	c.sum, c.spend, c.months = w.spendCheck(t, tenantID)
	return c
}

// expectNothingLost fails the test unless the ledger lost nothing but
// what the drill excused.
func expectNothingLost(t *testing.T, c ledgerCheck) {
	t.Helper()
	if c.missing != c.excused || c.dupes > 0 || c.strangers > 0 || c.months > 0 {
		t.Errorf("the ledger lost %s (%+v)", c.lost(), c)
	}
}

// loggedIDs returns the tenant's call_log request ids and their row counts.
func (w *drillWorld) loggedIDs(t *testing.T, tenantID string) map[string]int {
	t.Helper()
	return queryMap[string, int](t, w.dsn, `SELECT request_id, count(*) FROM call_log WHERE tenant_id = $1 GROUP BY request_id`, tenantID)
}

// queryMap runs a query of two columns on the Postgres at dsn and returns
// its rows as a map from the first column to the second.
func queryMap[K comparable, V any](t *testing.T, dsn, query string, args ...any) map[K]V {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[K]V)
	for rows.Next() {
		var k K
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// spendCheck compares spend_month with SUM(call_log.cost_micros) month by
// month for the tenant; it returns the totals and how many months differ.
func (w *drillWorld) spendCheck(t *testing.T, tenantID string) (sum, spend int64, differ int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `
SELECT coalesce(sum(c.cost), 0)::bigint, coalesce(sum(s.cost_micros), 0)::bigint,
       count(*) FILTER (WHERE coalesce(c.cost, 0) <> coalesce(s.cost_micros, 0))
FROM (SELECT date_trunc('month', started_at AT TIME ZONE 'UTC')::date AS month, sum(cost_micros) AS cost
      FROM call_log WHERE tenant_id = $1 GROUP BY 1) c
FULL JOIN (SELECT month, cost_micros FROM spend_month WHERE tenant_id = $1) s ON s.month = c.month`, tenantID).Scan(&sum, &spend, &differ)
	if err != nil {
		t.Fatal(err)
	}
	return sum, spend, differ
}

// rowsOf returns the call_log status, completion tokens and cost of the
// given request ids.
func (w *drillWorld) rowsOf(t *testing.T, ids []string) map[string][3]int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT request_id, status, coalesce(completion_tokens, 0), coalesce(cost_micros, 0) FROM call_log WHERE request_id = ANY($1)`, ids)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string][3]int64{}
	for rows.Next() {
		var id string
		var v [3]int64
		if err := rows.Scan(&id, &v[0], &v[1], &v[2]); err != nil {
			t.Fatal(err)
		}
		m[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// budgetCounter returns the tenant's own Redis budget counter (its
// tenant scope), summed over periods: what it has spent and what it holds
// for requests in flight.
func (w *drillWorld) budgetCounter(t *testing.T, tenantID string) (spent, held int64) {
	t.Helper()
	keys, err := w.redis.Do("KEYS", "*{"+tenantID+"}:tenant:*")
	if err != nil {
		t.Fatalf("redis KEYS: %v", err)
	}
	for _, k := range strings.Split(keys, "\n") {
		var v string
		switch {
		case strings.HasSuffix(k, ":spent"):
			v, _ = w.redis.Do("GET", k)
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			spent += n
		case strings.HasSuffix(k, ":holds"):
			v, _ = w.redis.Do("HGET", k, "")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			held += n
		}
	}
	return spent, held
}

// waitReleased waits up to within until the tenant's budget holds are
// all released, and returns what is still held. Held is read as the next
// call on the counter would find it (budget.Counter.Status): a hold whose
// lease has ended on Redis's clock is given back, though the hash keeps
// it until a call touches the counter, and after a drill's load nothing
// may. A hold in the hash without a lease is never given back, so it
// stays counted.
func (w *drillWorld) waitReleased(t *testing.T, tenantID string, within time.Duration) int64 {
	t.Helper()
	var held int64
	for end := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if held = w.liveHeld(t, tenantID); held == 0 || time.Now().After(end) {
			return held
		}
	}
}

// liveHeld is what the tenant's own budget counter holds, less the holds
// whose lease has ended (what the scripts' purge would drop).
func (w *drillWorld) liveHeld(t *testing.T, tenantID string) int64 {
	t.Helper()
	do := func(args ...string) string {
		v, err := w.redis.Do(args...)
		if err != nil {
			t.Fatalf("redis %s: %v", args[0], err)
		}
		return strings.TrimSpace(v)
	}
	clock := strings.Fields(do("TIME"))
	if len(clock) != 2 {
		t.Fatalf("redis TIME: %q", clock)
	}
	sec, _ := strconv.ParseInt(clock[0], 10, 64)
	usec, _ := strconv.ParseInt(clock[1], 10, 64)
	now := strconv.FormatInt(sec*1_000_000+usec, 10)
	var held int64
	for _, k := range strings.Split(do("KEYS", "*{"+tenantID+"}:tenant:*:holds"), "\n") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		total, _ := strconv.ParseInt(do("HGET", k, ""), 10, 64)
		held += total
		leases := strings.TrimSuffix(k, ":holds") + ":leases"
		ended := strings.Fields(do("ZRANGEBYSCORE", leases, "-inf", now))
		if len(ended) == 0 {
			continue
		}
		for _, v := range strings.Split(do(append([]string{"HMGET", k}, ended...)...), "\n") {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			held -= n
		}
	}
	return held
}

// metric sums the samples of a Prometheus metric whose labels contain
// match ("" for all) in h's exposition.
func metric(t *testing.T, h http.Handler, name, match string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var sum float64
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') || !strings.Contains(rest, match) {
			continue
		}
		f := strings.Fields(rest)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// dur renders a duration for a report: 1.2 s, 340 ms.
func dur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

func queueField(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", queue_size: %d", n)
}

func walField(v string) string {
	if v == "" {
		return ""
	}
	return ", wal: " + v
}
