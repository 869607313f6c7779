package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/console"
	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
)

// metricsHandler is /metrics behind the policy's metrics token, if any.
func metricsHandler(p *config.Policy, srv *proxy.Server) http.Handler {
	return obs.RequireBearer(p.Metrics.Token, srv.MetricsHandler())
}

// adminMux is the admin listener's handler: the admin API under /v1/,
// /metrics beside it unless the policy puts it elsewhere (metrics.listen,
// metrics.public), behind metrics.token_env, not the admin token
// (docs/adr/0023-closed-metrics.md), and every other path the operator
// console (static files, no credentials needed to load them; the console
// signs in to the admin API).
func adminMux(p *config.Policy, srv *proxy.Server) http.Handler {
	mux := http.NewServeMux()
	if p.MetricsWhere() == config.MetricsAdmin {
		mux.Handle("/metrics", metricsHandler(p, srv))
	}
	mux.Handle("/v1/", srv.AdminHandler())
	mux.Handle("/", console.Handler())
	return mux
}

// serveMetrics starts metrics.listen, the listener of /metrics alone,
// when the policy has one, and returns its address (nil without one:
// metrics.public is served by the proxy itself, the admin listener's by
// adminMux). stop closes it.
func serveMetrics(p *config.Policy, srv *proxy.Server, log *slog.Logger) (addr net.Addr, stop func(), err error) {
	log.Info("metrics", "served", p.MetricsSummary(), "max_tenants", p.Metrics.TenantLabels)
	if p.MetricsWhere() != config.MetricsOwn {
		return nil, func() {}, nil
	}
	ln, err := net.Listen("tcp", p.Metrics.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(p, srv))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return ln.Addr(), func() { hs.Close() }, nil
}

// logDrainWarnings warns of what a drain would cut (config.DrainWarnings).
func logDrainWarnings(p *config.Policy, log *slog.Logger) {
	for _, w := range p.DrainWarnings() {
		log.Warn("drain shorter than a stream may last", "detail", w)
	}
}
