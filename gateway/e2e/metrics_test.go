package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// scrape returns the value of the series whose line starts with series.
func scrape(t *testing.T, url, series string) string {
	t.Helper()
	resp, err := httpGet(url)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(resp, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			return rest
		}
	}
	return ""
}

func httpGet(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestMetricsCountRateLimits: /metrics moves by the expected counts.
func TestMetricsCountRateLimits(t *testing.T) {
	rds := redistest.Start(t)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 1})
	srv, gw := startGateway(t, limitedPolicy(t, mockURL, rds.Addr(), 3, 0, `{}`), nil)
	m := httptest.NewServer(srv.MetricsHandler())
	defer m.Close()
	for i := 0; i < 5; i++ {
		post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_rl_1")
	}
	time.Sleep(50 * time.Millisecond) // the end phase runs after the reply
	for series, want := range map[string]string{
		`tollgate_ratelimit_decisions_total{result="admitted"}`:            "3",
		`tollgate_ratelimit_decisions_total{result="rejected"}`:            "2",
		`tollgate_plugin_events_total{name="rejected",plugin="ratelimit"}`: "2",
		`tollgate_inflight_requests`:                                       "0",
	} {
		if got := scrape(t, m.URL, series); got != want {
			t.Errorf("%s = %q, want %q", series, got, want)
		}
	}
	if got := scrape(t, m.URL, `tollgate_plugin_calls_total{plugin="preflight"}`); got != "5" {
		t.Errorf("preflight calls = %q, want 5", got)
	}
}

// TestRequestMetricsAndAccessLog: per-request counters and histograms move
// by the expected counts, and the access log has one JSON line per request
// with no prompt text.
func TestRequestMetricsAndAccessLog(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 4})
	pol := strings.Replace(tenantsPolicy(t, mockURL), "drain_timeout: 2s", "drain_timeout: 2s\n  access_log: true", 1)
	p, err := config.Parse([]byte(pol), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var logs syncWriter
	var buf strings.Builder
	logs.w = &buf
	srv, err := proxy.New(p, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	defer func() { srv.Shutdown(0, 2*time.Second); <-done }()
	gw := "http://" + ln.Addr().String()
	m := httptest.NewServer(srv.MetricsHandler())
	defer m.Close()

	secret := "the-prompt-text-must-not-be-logged"
	body := `{"model":"mock-1","messages":[{"role":"user","content":"` + secret + `"}]}`
	for i := 0; i < 3; i++ {
		if status, _, b := post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer tg_active"); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	}
	post(t, gw+"/v1/chat/completions", body, "Authorization", "Bearer tg_wrong") // 401, no tenant
	time.Sleep(100 * time.Millisecond)                                           // recorded after the reply
	for series, want := range map[string]string{
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="200",upstream="up"}`:                 "3",
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="401",upstream="up"}`:                 "1",
		`tollgate_request_duration_seconds_count{endpoint="/v1/chat/completions",model="mock-1",status="200",upstream="up"}`: "3",
		`tollgate_request_duration_seconds_count{endpoint="/v1/chat/completions",model="mock-1",status="401",upstream="up"}`: "1",
		`tollgate_upstream_first_byte_seconds_count{upstream="up"}`:                                                          "3",
		`tollgate_tokens_total{tenant="acme",type="completion"}`:                                                             "12",
	} {
		if got := scrape(t, m.URL, series); got != want {
			t.Errorf("%s = %q, want %q", series, got, want)
		}
	}
	// A stream: its line has a time to first token.
	streamBody := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"` + secret + `"}]}`
	if status, _, b := post(t, gw+"/v1/chat/completions", streamBody, "Authorization", "Bearer tg_active"); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	time.Sleep(100 * time.Millisecond)
	if got := scrape(t, m.URL, `tollgate_time_to_first_token_seconds_count{endpoint="/v1/chat/completions",model="mock-1",upstream="up"}`); got != "1" {
		t.Errorf("time to first token count = %q, want 1", got)
	}
	logs.mu.Lock()
	all := buf.String()
	logs.mu.Unlock()
	var lines []map[string]any
	for _, l := range strings.Split(all, "\n") {
		if !strings.Contains(l, `"msg":"request"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("access log line is not JSON: %v: %s", err, l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 5 {
		t.Fatalf("%d access log lines, want 5:\n%s", len(lines), all)
	}
	// Lines are written after each reply went out, so two requests in
	// quick succession may log in either order: put them back in request
	// order by the gateway's request id counter (req_<run>_<n>).
	seq := func(l map[string]any) int {
		id, _ := l["request_id"].(string)
		n, _ := strconv.Atoi(id[strings.LastIndexByte(id, '_')+1:])
		return n
	}
	sort.SliceStable(lines, func(i, j int) bool { return seq(lines[i]) < seq(lines[j]) })
	if strings.Contains(all, secret) || strings.Contains(all, "tg_active") || strings.Contains(all, "tg_wrong") {
		t.Fatalf("the log holds prompt text or a key:\n%s", all)
	}
	fields := []string{"request_id", "tenant", "key_id", "endpoint", "model", "upstream", "status", "stream", "first_byte_ms",
		"ttft_ms", "total_ms", "prompt_tokens", "completion_tokens", "cost_micros", "reply_bytes", "guard_action", "attempts"}
	for i, l := range lines {
		for _, f := range fields {
			if _, ok := l[f]; !ok {
				t.Errorf("line %d has no %s: %v", i, f, l)
			}
		}
		if _, ok := l["trace_id"]; ok {
			t.Errorf("line %d has a trace_id with tracing off: %v", i, l)
		}
	}
	num := func(l map[string]any, k string) float64 { v, _ := l[k].(float64); return v }
	for i, want := range []struct {
		status          float64
		tenant, key     string
		stream          bool
		completion      float64
		ttft, firstByte bool // known (not -1)
	}{
		{200, "acme", "k-active", false, 4, false, true},
		{200, "acme", "k-active", false, 4, false, true},
		{200, "acme", "k-active", false, 4, false, true},
		{401, "", "", false, 0, false, false},
		{200, "acme", "k-active", true, 4, true, true},
	} {
		l := lines[i]
		if num(l, "status") != want.status || l["tenant"] != want.tenant || l["key_id"] != want.key || l["stream"] != want.stream ||
			num(l, "completion_tokens") != want.completion || l["model"] != "mock-1" || l["upstream"] != "up" ||
			l["endpoint"] != "/v1/chat/completions" || l["request_id"] == "" {
			t.Errorf("line %d = %v, want %+v", i, l, want)
		}
		ttft, fb, total := num(l, "ttft_ms"), num(l, "first_byte_ms"), num(l, "total_ms")
		if (ttft >= 0) != want.ttft || (fb >= 0) != want.firstByte || total <= 0 ||
			want.ttft && !(fb <= ttft && ttft <= total) || want.firstByte && fb > total {
			t.Errorf("line %d timings: first byte %v, ttft %v, total %v", i, fb, ttft, total)
		}
		if want.status == 200 && (num(l, "prompt_tokens") <= 0 || num(l, "reply_bytes") <= 0) {
			t.Errorf("line %d: no prompt tokens or reply bytes: %v", i, l)
		}
	}
}

// metricValues parses a Prometheus text exposition into its series
// (name{labels} exactly as written) and values.
func metricValues(t *testing.T, text string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

// promtoolCheck checks text as `promtool check metrics` does: promtool
// reads the exposition with promlint (the Prometheus client's linter,
// which parses it with expfmt's text decoder) and fails on a parse error
// or on any problem the linter reports. Running the same linter in-process
// spares the test machine Debian's prometheus package (96 MB installed)
// for this one check; TestPromtoolCheckCatches shows what it rejects.
func promtoolCheck(t *testing.T, text string) {
	t.Helper()
	if err := lintMetrics(text); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, text)
	}
}

// lintMetrics returns promtool's verdict on a text exposition: the parse
// error, or the linter's problems one a line ("metric text", as promtool
// prints them), or nil.
func lintMetrics(text string) error {
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		return fmt.Errorf("error while linting: %w", err)
	}
	if len(problems) == 0 {
		return nil
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.Metric + " " + p.Text
	}
	return fmt.Errorf("%d lint problems:\n%s", len(problems), strings.Join(lines, "\n"))
}

// TestPromtoolCheckCatches: the in-process check fails what `promtool check
// metrics` fails (an unparsable exposition, or a lint problem) and passes a
// clean exposition. Each want names the problem promtool 2.42 prints for
// the same input.
func TestPromtoolCheckCatches(t *testing.T) {
	tests := []struct {
		name, text, want string // want "" means the exposition passes
	}{
		{"clean", "# HELP tollgate_requests_total Requests.\n# TYPE tollgate_requests_total counter\ntollgate_requests_total{status=\"200\"} 3\n" +
			"# HELP tollgate_inflight_requests In flight.\n# TYPE tollgate_inflight_requests gauge\ntollgate_inflight_requests 0\n", ""},
		{"counter without _total", "# HELP tollgate_requests Requests.\n# TYPE tollgate_requests counter\ntollgate_requests 3\n", `counter metrics should have "_total" suffix`},
		{"no help", "# TYPE tollgate_requests_total counter\ntollgate_requests_total 3\n", "no help text"},
		{"camel case", "# HELP tollgate_inFlight In flight.\n# TYPE tollgate_inFlight gauge\ntollgate_inFlight 1\n", "snake_case"},
		{"milliseconds", "# HELP tollgate_wait_milliseconds Wait.\n# TYPE tollgate_wait_milliseconds gauge\ntollgate_wait_milliseconds 1\n", `use base unit "seconds"`},
		{"unclosed labels", "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"1\" 3\n", "error while linting"},
		{"bad value", "# HELP x_total X.\n# TYPE x_total counter\nx_total three\n", "error while linting"},
		{"type after sample", "# HELP x_total X.\nx_total 1\n# TYPE x_total counter\n", "error while linting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := lintMetrics(tt.text)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("rejected a clean exposition: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("passed; promtool fails it (%s)", tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("failed with %q, want %q", err, tt.want)
			}
		})
	}
}

// sseDataEvents counts the data events of an SSE body, [DONE] included.
func sseDataEvents(body []byte) int {
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	return n
}

// TestMetricsPhasesAndPromtool: real traffic through four plugins moves
// the per-phase histograms, rejections and request counters by exactly
// what happened, and the exposition passes promtool's checks.
func TestMetricsPhasesAndPromtool(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 4})
	probe, err := wasmbuild.Cached(repoRoot(t) + "/sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	// preflight and ratelimit (5 requests a minute) in the request phase,
	// the test plugin in response_headers and end, holdback on chunks.
	pol := limitedPolicy(t, mockURL, "", 5, 0, `{}`) + fmt.Sprintf(`  - name: phases
    path: %s
    config: {response_headers: continue, end: continue, phases: [response_headers, end]}
  - name: holdback
    path: %s
    config: %s
`, probe, pluginPath(t, "holdback"), hbConfig)
	srv, gw := startGateway(t, pol, nil)
	m := httptest.NewServer(srv.MetricsHandler())
	defer m.Close()
	read := func() string {
		body, err := httpGet(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	before := metricValues(t, read())

	const whole, streams, limited = 3, 2, 2
	key := []string{"Authorization", "Bearer tg_rl_1"}
	for i := 0; i < whole; i++ {
		if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, key...); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	}
	events := 0
	for i := 0; i < streams; i++ {
		status, _, b := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`, key...)
		if status != 200 {
			t.Fatalf("%d %s", status, b)
		}
		events += sseDataEvents(b)
	}
	for i := 0; i < limited; i++ {
		if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, key...); status != 429 {
			t.Fatalf("%d %s, want 429", status, b)
		}
	}
	if status, _, b := post(t, gw+"/v1/chat/completions", chatOnce, "Authorization", "Bearer tg_wrong"); status != 401 {
		t.Fatalf("%d %s, want 401", status, b)
	}
	served := whole + streams
	all := served + limited + 1
	if events < streams*4 {
		t.Fatalf("%d stream events, want at least %d", events, streams*4)
	}
	// The end phase, metrics and the access log come after the reply.
	var text string
	var delta func(string) float64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		text = read()
		after := metricValues(t, text)
		delta = func(series string) float64 { return after[series] - before[series] }
		if delta(`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="401",upstream="up"}`) == 1 &&
			delta(`tollgate_plugin_phase_duration_seconds_count{phase="end",plugin="phases"}`) == float64(all) || time.Now().After(deadline) {
			break
		}
	}
	promtoolCheck(t, text)

	for series, want := range map[string]int{
		// Each plugin's callbacks, by phase: the wrong key stops at
		// preflight, the limited requests at ratelimit; the end phase
		// runs for every request.
		`tollgate_plugin_phase_duration_seconds_count{phase="request",plugin="preflight"}`:         all,
		`tollgate_plugin_phase_duration_seconds_count{phase="request",plugin="ratelimit"}`:         all - 1 + limited, // on_request; on_call_response only for a refusal (an admission is an expected answer)
		`tollgate_plugin_phase_duration_seconds_count{phase="response_headers",plugin="phases"}`:   served,
		`tollgate_plugin_phase_duration_seconds_count{phase="end",plugin="phases"}`:                all,
		`tollgate_plugin_phase_duration_seconds_count{phase="chunk",plugin="holdback"}`:            whole + events,
		`tollgate_plugin_phase_duration_seconds_bucket{phase="chunk",plugin="holdback",le="+Inf"}`: whole + events,
		`tollgate_plugin_calls_total{plugin="holdback"}`:                                           whole + events,
		`tollgate_plugin_rejections_total{plugin="preflight"}`:                                     1,
		`tollgate_plugin_rejections_total{plugin="ratelimit"}`:                                     limited,
		`tollgate_plugin_rejections_total{plugin="phases"}`:                                        0,
		`tollgate_ratelimit_rejections_total{reason="requests"}`:                                   limited,
		`tollgate_ratelimit_rejections_total{reason="tokens"}`:                                     0,

		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="200",upstream="up"}`:                 served,
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="429",upstream="up"}`:                 limited,
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="401",upstream="up"}`:                 1,
		`tollgate_request_duration_seconds_count{endpoint="/v1/chat/completions",model="mock-1",status="200",upstream="up"}`: served,
		`tollgate_time_to_first_token_seconds_count{endpoint="/v1/chat/completions",model="mock-1",upstream="up"}`:           streams,
		`tollgate_phase_duration_seconds_count{phase="admission",upstream="up"}`:                                             served,
		`tollgate_phase_duration_seconds_count{phase="upstream_first_byte",upstream="up"}`:                                   served,
		`tollgate_phase_duration_seconds_count{phase="stream",upstream="up"}`:                                                streams,
		`tollgate_upstream_first_byte_seconds_count{upstream="up"}`:                                                          served,

		`tollgate_tokens_total{tenant="acme",type="completion"}`:          served * 4,
		`tollgate_request_tokens_count{model="mock-1",type="completion"}`: served,
		`tollgate_request_tokens_sum{model="mock-1",type="completion"}`:   served * 4,

		// Seven lookups of the valid key (one miss, then the cache) and
		// one of the wrong key.
		`tollgate_tenant_cache_lookups_total{result="miss"}`: 2,
		`tollgate_inflight_requests`:                         0,
	} {
		if got := delta(series); got != float64(want) {
			t.Errorf("%s moved by %v, want %d", series, got, want)
		}
	}
	if got := delta(`tollgate_tenant_cache_lookups_total{result="hit"}`) + delta(`tollgate_tenant_cache_lookups_total{result="stale"}`); got != float64(all-2) {
		t.Errorf("tenant cache hits and stale hits moved by %v, want %d", got, all-2)
	}
	for _, series := range []string{
		`tollgate_plugin_phase_duration_seconds_sum{phase="request",plugin="preflight"}`,
		`tollgate_plugin_phase_duration_seconds_sum{phase="chunk",plugin="holdback"}`,
		`tollgate_time_to_first_token_seconds_sum{endpoint="/v1/chat/completions",model="mock-1",upstream="up"}`,
	} {
		if got := delta(series); got <= 0 || got > 10 {
			t.Errorf("%s moved by %v seconds", series, got)
		}
	}
}

// TestMetricsPostgresLedger: with the Postgres store and the call log,
// the Postgres statement counters, the group-commit histogram and the
// budget and Redis counters move by what the requests did.
func TestMetricsPostgresLedger(t *testing.T) {
	w := newBudgetWorld(t, 10_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 4})
	srv, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))
	m := httptest.NewServer(srv.MetricsHandler())
	defer m.Close()
	read := func() map[string]float64 {
		body, err := httpGet(m.URL)
		if err != nil {
			t.Fatal(err)
		}
		return metricValues(t, body)
	}
	before := read()
	const n = 6
	for i := 0; i < n; i++ {
		if status, _, b := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+w.key); status != 200 {
			t.Fatalf("%d %s", status, b)
		}
	}
	var after map[string]float64
	delta := func(series string) float64 { return after[series] - before[series] }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after = read()
		if delta(`tollgate_calllog_rows_total`) == n || time.Now().After(deadline) {
			break
		}
	}
	body, err := httpGet(m.URL)
	if err != nil {
		t.Fatal(err)
	}
	promtoolCheck(t, body)
	for series, want := range map[string]float64{
		`tollgate_calllog_rows_total`:                                            n,
		`tollgate_calllog_transaction_rows_sum`:                                  n,
		`tollgate_calllog_transaction_rows_count`:                                delta(`tollgate_calllog_transactions_total`),
		`tollgate_calllog_transaction_rows_bucket{le="+Inf"}`:                    delta(`tollgate_calllog_transactions_total`),
		`tollgate_calllog_inline_writes_total`:                                   0,
		`tollgate_calllog_queue_depth`:                                           0,
		`tollgate_budget_reservations_total{op="reserve",result="held"}`:         n,
		`tollgate_budget_reservations_total{op="reserve",result="insufficient"}`: 0,
		// The key and the model's price are read once each; then the
		// cache answers.
		`tollgate_postgres_statements_total{pool="tenants"}`: 2,
		`tollgate_tenant_cache_lookups_total{result="miss"}`: 2,
	} {
		if got := delta(series); got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	if delta(`tollgate_calllog_transactions_total`) < 1 || delta(`tollgate_postgres_statements_total{pool="ledger"}`) < 3 ||
		delta(`tollgate_redis_commands_total`) < 2*n || delta(`tollgate_cost_usd_micros_total{tenant="acme"}`) <= 0 {
		t.Errorf("transactions %v, ledger statements %v, redis commands %v, cost %v", delta(`tollgate_calllog_transactions_total`),
			delta(`tollgate_postgres_statements_total{pool="ledger"}`), delta(`tollgate_redis_commands_total`),
			delta(`tollgate_cost_usd_micros_total{tenant="acme"}`))
	}
}
