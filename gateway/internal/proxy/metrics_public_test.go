package proxy

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// /metrics is on the public listener only with metrics.public, and there
// only to its bearer token; otherwise the path is unknown.
func TestMetricsOnPublicListener(t *testing.T) {
	tests := []struct {
		name    string
		metrics string // the policy's metrics section
		auth    string
		status  int
		want    string // in the body
	}{
		{"default: not public", "", "", 404, `"code":"unknown_url"`},
		{"default: not public, even with a token", "{token_env: M_TOKEN}", "Bearer mt", 404, `"code":"unknown_url"`},
		{"public with the token", "{public: true, token_env: M_TOKEN}", "Bearer mt", 200, "# TYPE tollgate_inflight_requests gauge"},
		{"public without the token", "{public: true, token_env: M_TOKEN}", "", 401, `"code":"invalid_metrics_token"`},
		{"public with a wrong token", "{public: true, token_env: M_TOKEN}", "Bearer mx", 401, `"code":"invalid_metrics_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := routingPolicy(upstreamYAML("a", closedURL(t), ""), "- {models: [m], upstream: a}")
			if tt.metrics != "" {
				policy += "metrics: " + tt.metrics + "\n"
			}
			p, err := config.Parse([]byte(policy), func(k string) (string, bool) { return "mt", k == "M_TOKEN" })
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := New(p, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			defer func() { srv.Shutdown(0, time.Second); <-done }()

			req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/metrics", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.want) {
				t.Fatalf("status %d, body:\n%.300s\nwant %d with %q", resp.StatusCode, body, tt.status, tt.want)
			}
		})
	}
}
