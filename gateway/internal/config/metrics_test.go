package config

import (
	"strings"
	"testing"
)

// Where /metrics is served, behind what, and how many tenant labels.
func TestMetrics(t *testing.T) {
	tok := map[string]string{"TOLLGATE_ADMIN_TOKEN": "adm", "M_TOKEN": "mt"}
	tests := []struct {
		name    string
		yaml    string
		where   string
		token   string
		tenants int
	}{
		{"no admin listener: not served", "", MetricsOff, "", 100},
		{"default: the admin listener, no token", "admin: {listen: '127.0.0.1:8081'}\n", MetricsAdmin, "", 100},
		{"admin listener with a token", "admin: {listen: '127.0.0.1:8081'}\nmetrics: {token_env: M_TOKEN}\n", MetricsAdmin, "mt", 100},
		{"a listener of its own", "admin: {listen: '127.0.0.1:8081'}\nmetrics: {listen: '127.0.0.1:9090'}\n", MetricsOwn, "", 100},
		{"public with a token", "metrics: {public: true, token_env: M_TOKEN, max_tenants: 5}\n", MetricsPublic, "mt", 5},
		{"no tenant label", "metrics: {max_tenants: 0}\n", MetricsOff, "", 0},
		{"the most tenants", "metrics: {max_tenants: 10000}\n", MetricsOff, "", 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(valid+tt.yaml), env(tok))
			if err != nil {
				t.Fatal(err)
			}
			if got := p.MetricsWhere(); got != tt.where {
				t.Errorf("where %q, want %q", got, tt.where)
			}
			if p.Metrics.Token != tt.token || p.Metrics.TenantLabels != tt.tenants {
				t.Errorf("token %q, tenants %d; want %q, %d", p.Metrics.Token, p.Metrics.TenantLabels, tt.token, tt.tenants)
			}
		})
	}
}

func TestMetricsProblems(t *testing.T) {
	tok := map[string]string{"TOLLGATE_ADMIN_TOKEN": "adm", "M_TOKEN": "mt", "SPACED": "a b"}
	tests := []struct{ name, yaml, want string }{
		{"public without a token", "metrics: {public: true}\n",
			"metrics.token_env: is required with metrics.public: true"},
		{"token variable unset", "metrics: {token_env: NOPE}\n", "metrics.token_env: environment variable NOPE is not set"},
		{"token with a space", "metrics: {token_env: SPACED}\n", "metrics.token_env: the value of SPACED contains a space"},
		{"public and a listener", "metrics: {public: true, token_env: M_TOKEN, listen: '127.0.0.1:9090'}\n",
			"metrics.public: serves /metrics on the public listener; metrics.listen (127.0.0.1:9090) would be a second place"},
		{"not host:port", "metrics: {listen: '9090'}\n", `metrics.listen: "9090" is not host:port`},
		{"the admin listener's address", "admin: {listen: '127.0.0.1:8081'}\nmetrics: {listen: '127.0.0.1:8081'}\n",
			`metrics.listen: "127.0.0.1:8081" is also admin.listen`},
		{"the public listener's address", "metrics: {listen: '127.0.0.1:8080'}\n", `metrics.listen: "127.0.0.1:8080" is also server.listen`},
		{"negative cap", "metrics: {max_tenants: -1}\n", "metrics.max_tenants: must be between 0 (no tenant label) and 10000, got -1"},
		{"cap too large", "metrics: {max_tenants: 10001}\n", "metrics.max_tenants: must be between 0 (no tenant label) and 10000, got 10001"},
		{"unknown key", "metrics: {port: 9090}\n", "metrics.port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(valid+tt.yaml), env(tok))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// Same compares what was resolved, not how it was written.
func TestMetricsSame(t *testing.T) {
	vars := map[string]string{"A": "x", "B": "y"}
	parse := func(y string) Metrics {
		t.Helper()
		p, err := Parse([]byte(valid+y), env(vars))
		if err != nil {
			t.Fatal(err)
		}
		return p.Metrics
	}
	base := parse("")
	tests := []struct {
		yaml string
		same bool
	}{
		{"metrics: {max_tenants: 100}\n", true},
		{"metrics: {max_tenants: 5}\n", false},
		{"metrics: {listen: '127.0.0.1:9090'}\n", false},
		{"metrics: {token_env: A}\n", false},
	}
	for _, tt := range tests {
		if got := base.Same(parse(tt.yaml)); got != tt.same {
			t.Errorf("%q: Same %v, want %v", tt.yaml, got, tt.same)
		}
	}
}
