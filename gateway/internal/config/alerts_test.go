package config

import (
	"strings"
	"testing"
	"time"
)

func TestAlerts(t *testing.T) {
	const secret = "0123456789abcdef"
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		want    Alerts
		enabled bool
	}{
		{"off by default", "", nil, Alerts{SecretEnv: "TOLLGATE_ALERTS_SECRET", Timeout: 5 * time.Second,
			MaxAge: 24 * time.Hour, QueueSize: 1024}, false},
		{"webhook with the default secret variable", "alerts: {webhook_url: \"https://ops.example/hook\"}\n",
			map[string]string{"TOLLGATE_ALERTS_SECRET": secret},
			Alerts{WebhookURL: "https://ops.example/hook", SecretEnv: "TOLLGATE_ALERTS_SECRET", Timeout: 5 * time.Second,
				MaxAge: 24 * time.Hour, QueueSize: 1024, Secret: secret}, true},
		{"every field", "alerts: {webhook_url: \"http://127.0.0.1:9/h\", secret_env: HOOK_KEY, timeout: 2s, max_age: 1h, queue_size: 10}\n",
			map[string]string{"HOOK_KEY": secret + "x"},
			Alerts{WebhookURL: "http://127.0.0.1:9/h", SecretEnv: "HOOK_KEY", Timeout: 2 * time.Second,
				MaxAge: time.Hour, QueueSize: 10, Secret: secret + "x"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(valid+tt.yaml), env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if p.Alerts != tt.want || p.Alerts.Enabled() != tt.enabled {
				t.Errorf("got %+v (enabled %v), want %+v (%v)", p.Alerts, p.Alerts.Enabled(), tt.want, tt.enabled)
			}
		})
	}
}

func TestAlertsProblems(t *testing.T) {
	good := map[string]string{"TOLLGATE_ALERTS_SECRET": "0123456789abcdef"}
	tests := []struct {
		yaml string
		env  map[string]string
		want string
	}{
		{"alerts: {webhook_url: \"https://h/x\"}\n", nil, "alerts.secret_env: environment variable TOLLGATE_ALERTS_SECRET must hold"},
		{"alerts: {webhook_url: \"https://h/x\"}\n", map[string]string{"TOLLGATE_ALERTS_SECRET": "short"}, "at least 16 bytes (has 5)"},
		{"alerts: {webhook_url: \"ops.example/hook\"}\n", good, "alerts.webhook_url: scheme must be http or https"},
		{"alerts: {webhook_url: \"https://\"}\n", good, "alerts.webhook_url: has no host"},
		{"alerts: {webhook_url: \"https://h/x\", timeout: 2m}\n", good, "alerts.timeout: must be between"},
		{"alerts: {max_age: 30s}\n", nil, "alerts.max_age: must be at least 1m"},
		{"alerts: {queue_size: -1}\n", nil, "alerts.queue_size: must not be negative"},
		{"alerts: {url: x}\n", nil, "alerts.url"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(valid+tt.yaml), env(tt.env))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.yaml, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "short") {
			t.Errorf("a problem shows the secret: %v", err)
		}
	}
}
