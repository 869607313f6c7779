package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/mockllm"
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
