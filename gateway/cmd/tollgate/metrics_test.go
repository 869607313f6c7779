package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
)

const metricsPolicy = `
version: 1
server: {drain_timeout: 1s}
upstreams: [{name: a, base_url: 'http://127.0.0.1:9/v1'}]
routes: [{models: [m], upstream: a}]
admin: {listen: '127.0.0.1:0'}
`

// newMetricsServer builds a gateway (not serving) for metricsPolicy plus
// the metrics section given, with M_TOKEN=mt.
func newMetricsServer(t *testing.T, metrics string) (*config.Policy, *proxy.Server) {
	t.Helper()
	vars := map[string]string{"TOLLGATE_ADMIN_TOKEN": "adm", "M_TOKEN": "mt"}
	p, err := config.Parse([]byte(metricsPolicy+metrics), func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(0, time.Second) })
	return p, srv
}

// get returns the status and body of GET url with the Authorization given.
func get(t *testing.T, h http.Handler, url, auth string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if h != nil {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	req, _ = http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const exposition = "# TYPE tollgate_inflight_requests gauge"

// The admin listener serves /metrics by default, behind metrics.token_env
// when set (not the admin token), and not once metrics has a listener of
// its own, which then serves it.
func TestMetricsListeners(t *testing.T) {
	tests := []struct {
		name     string
		metrics  string
		auth     string
		onAdmin  int // /metrics status on the admin listener
		ownAuth  int // on metrics.listen with the metrics token (0: no such listener)
		ownNoTok int // on metrics.listen without a token
	}{
		{"default: on the admin listener, no token", "", "", 200, 0, 0},
		{"admin listener with a metrics token, presented", "metrics: {token_env: M_TOKEN}\n", "Bearer mt", 200, 0, 0},
		{"admin listener with a metrics token, absent", "metrics: {token_env: M_TOKEN}\n", "", 401, 0, 0},
		{"the admin token is not the metrics token", "metrics: {token_env: M_TOKEN}\n", "Bearer adm", 401, 0, 0},
		{"own listener with a token", "metrics: {listen: '127.0.0.1:0', token_env: M_TOKEN}\n", "Bearer mt", 0, 200, 401},
		{"own listener without a token", "metrics: {listen: '127.0.0.1:0'}\n", "", 0, 200, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, srv := newMetricsServer(t, tt.metrics)
			status, body := get(t, adminMux(p, srv), "/metrics", tt.auth)
			if tt.onAdmin != 0 {
				if status != tt.onAdmin || (status == 200) != strings.Contains(body, exposition) {
					t.Fatalf("admin listener: status %d, body %.200q; want %d", status, body, tt.onAdmin)
				}
			} else if strings.Contains(body, exposition) {
				t.Fatalf("admin listener still serves /metrics (status %d)", status)
			}
			addr, stop, err := serveMetrics(p, srv, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if (addr != nil) != (tt.ownAuth != 0) {
				t.Fatalf("metrics listener %v, want one: %v", addr, tt.ownAuth != 0)
			}
			if addr == nil {
				return
			}
			url := "http://" + addr.String() + "/metrics"
			if status, body := get(t, nil, url, tt.auth); status != tt.ownAuth || !strings.Contains(body, exposition) {
				t.Errorf("metrics listener with the token: status %d, body %.200q", status, body)
			}
			if status, _ := get(t, nil, url, ""); status != tt.ownNoTok {
				t.Errorf("metrics listener without a token: status %d, want %d", status, tt.ownNoTok)
			}
		})
	}
}

// The admin listener: /v1/ is the admin API, /metrics
// the metrics, every other path the console's, with the console's headers.
func TestAdminMuxRoutes(t *testing.T) {
	p, srv := newMetricsServer(t, "")
	h := adminMux(p, srv)
	tests := []struct {
		path, auth string
		status     int
		contains   string
		console    bool
	}{
		{"/", "", 200, "<title>Tollgate console</title>", true},
		{"/index.html", "", 200, "<title>Tollgate console</title>", true},
		{"/nope", "", 404, "not found", true},
		// The admin API's JSON errors (status 0: any error status).
		{"/v1/admin/tenants/x/keys", "", 0, `{"error":{`, false},
		{"/v1/nope", "Bearer adm", 0, `{"error":{`, false},
		{"/metrics", "", 200, exposition, false},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", tt.path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if (tt.status == 0 && rec.Code < 400) || (tt.status != 0 && rec.Code != tt.status) || !strings.Contains(rec.Body.String(), tt.contains) {
			t.Errorf("GET %s: %d %.200q, want %d with %q", tt.path, rec.Code, rec.Body.String(), tt.status, tt.contains)
		}
		if got := rec.Header().Get("Content-Security-Policy") != ""; got != tt.console {
			t.Errorf("GET %s: CSP set %v, want %v", tt.path, got, tt.console)
		}
	}
}
