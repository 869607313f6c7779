package config

import (
	"fmt"
	"net"
	"strings"
)

// Metrics configures where Prometheus /metrics is served, behind what, and
// how many tenants its tenant label names (docs/OBSERVABILITY.md). Its
// series hold spend by tenant, so it is never on the public listener
// unless asked for, and then only with a token
// (docs/adr/0023-closed-metrics.md). It applies at start: a reload keeps
// the running gateway's.
type Metrics struct {
	// Listen is the address of a listener of its own for /metrics, e.g.
	// 127.0.0.1:9090. Empty: /metrics is served on the admin listener
	// (admin.listen), and not at all without one.
	Listen string `yaml:"listen"`
	// Public also serves /metrics on the public listener (server.listen),
	// instead of the admin listener or Listen; it requires TokenEnv.
	Public bool `yaml:"public"`
	// TokenEnv names the environment variable holding a bearer token
	// that /metrics then requires (Authorization: Bearer <token>),
	// wherever it is served. Unset: no token (the listener's address keeps
	// it private).
	TokenEnv string `yaml:"token_env"`
	// MaxTenants caps the values of the tenant label (tokens and cost by
	// tenant): the first MaxTenants tenants seen get their own, the rest
	// are counted as tenant="other" (default 100, at most 10000; 0 drops
	// the tenant label).
	MaxTenants *int `yaml:"max_tenants"`

	// Token is resolved from TokenEnv; never logged.
	Token string `yaml:"-"`
	// TenantLabels is MaxTenants or its default; resolved at load.
	TenantLabels int `yaml:"-"`
}

// Same reports whether m and n configure the same metrics.
func (m Metrics) Same(n Metrics) bool {
	return m.Listen == n.Listen && m.Public == n.Public && m.Token == n.Token && m.TenantLabels == n.TenantLabels
}

// Bounds of metrics.max_tenants.
const (
	DefaultMetricsMaxTenants = 100
	// MaxMetricsTenants bounds the series a scrape carries: with a
	// tenant's 3 series each, 30k series, and admitting a tenant copies
	// the admitted set (obs.LabelCap).
	MaxMetricsTenants = 10000
)

// Where /metrics is served (Policy.MetricsWhere).
const (
	MetricsOff    = ""       // nowhere: no admin listener and no metrics.listen
	MetricsAdmin  = "admin"  // on the admin listener
	MetricsOwn    = "listen" // on metrics.listen
	MetricsPublic = "public" // on the public listener
)

// MetricsWhere says which listener serves /metrics: one of MetricsOff,
// MetricsAdmin, MetricsOwn, MetricsPublic. Call it on a validated policy.
func (p *Policy) MetricsWhere() string {
	switch {
	case p.Metrics.Public:
		return MetricsPublic
	case p.Metrics.Listen != "":
		return MetricsOwn
	case p.Admin.Listen != "":
		return MetricsAdmin
	}
	return MetricsOff
}

func (p *Policy) validateMetrics(lookupEnv func(string) (string, bool), ps *Problems) {
	m := &p.Metrics
	m.TenantLabels = DefaultMetricsMaxTenants
	if n := m.MaxTenants; n != nil {
		if *n < 0 || *n > MaxMetricsTenants {
			ps.add("metrics.max_tenants", "must be between 0 (no tenant label) and %d, got %d", MaxMetricsTenants, *n)
		}
		m.TenantLabels = *n
	}
	if m.Listen != "" {
		_, port, err := net.SplitHostPort(m.Listen)
		if err != nil || port == "" {
			ps.add("metrics.listen", "%q is not host:port", m.Listen)
		}
		for _, other := range []struct{ path, addr string }{{"server.listen", p.Server.Listen}, {"admin.listen", p.Admin.Listen}} {
			// Port 0 picks a free port for each listener (tests).
			if port != "0" && other.addr == m.Listen {
				ps.add("metrics.listen", "%q is also %s: leave metrics.listen empty to serve /metrics on the admin listener, or give it an address of its own", m.Listen, other.path)
			}
		}
	}
	if m.Public && m.Listen != "" {
		ps.add("metrics.public", "serves /metrics on the public listener; metrics.listen (%s) would be a second place: set one of them", m.Listen)
	}
	if m.TokenEnv != "" {
		v, ok := lookupEnv(m.TokenEnv)
		switch {
		case !ok || v == "":
			ps.add("metrics.token_env", "environment variable %s is not set", m.TokenEnv)
		case strings.ContainsAny(v, "\r\n\x00 "):
			ps.add("metrics.token_env", "the value of %s contains a space, CR, LF or NUL", m.TokenEnv)
		}
		m.Token = v
	} else if m.Public {
		ps.add("metrics.token_env", "is required with metrics.public: true: on the public listener /metrics (spend by tenant) needs a bearer token")
	}
}

// MetricsSummary names where /metrics is served, and how, for the start
// log line.
func (p *Policy) MetricsSummary() string {
	auth := "no token"
	if p.Metrics.Token != "" {
		auth = "bearer token"
	}
	switch p.MetricsWhere() {
	case MetricsPublic:
		return fmt.Sprintf("public listener %s, %s", p.Server.Listen, auth)
	case MetricsOwn:
		return fmt.Sprintf("%s, %s", p.Metrics.Listen, auth)
	case MetricsAdmin:
		return fmt.Sprintf("admin listener %s, %s", p.Admin.Listen, auth)
	}
	return "off (no admin.listen or metrics.listen)"
}
