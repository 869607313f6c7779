package e2e

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/mockllm"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/redistest"
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
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="200",upstream="up"}`: "3",
		`tollgate_requests_total{endpoint="/v1/chat/completions",model="mock-1",status="401",upstream="up"}`: "1",
		`tollgate_request_duration_seconds_count{endpoint="/v1/chat/completions",upstream="up"}`:             "4",
		`tollgate_upstream_first_byte_seconds_count{upstream="up"}`:                                          "3",
		`tollgate_tokens_total{tenant="acme",type="completion"}`:                                             "12",
	} {
		if got := scrape(t, m.URL, series); got != want {
			t.Errorf("%s = %q, want %q", series, got, want)
		}
	}
	var lines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, `"msg":"request"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("%d access log lines, want 4:\n%s", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], `"tenant":"acme"`) || !strings.Contains(lines[0], `"status":200`) ||
		!strings.Contains(lines[0], `"completion_tokens":4`) || strings.Contains(lines[0], `"reply_bytes":0`) ||
		strings.Contains(buf.String(), secret) {
		t.Fatalf("access log line: %s", lines[0])
	}
}
