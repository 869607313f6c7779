package config

import (
	"strings"
	"testing"
)

func TestTracing(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		enabled bool
		url     string
		ratio   float64
	}{
		{"off by default", "", nil, false, "", 1},
		{"policy endpoint", "tracing: {otlp_endpoint: http://otel:4318, sample_ratio: 0.25}\n", nil, true, "http://otel:4318/v1/traces", 0.25},
		{"policy endpoint with a path", "tracing: {otlp_endpoint: \"https://otel.example/otlp/\"}\n", nil, true, "https://otel.example/otlp/v1/traces", 1},
		{"policy wins over the environment", "tracing: {otlp_endpoint: http://a:4318}\n",
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:4318"}, true, "http://a:4318/v1/traces", 1},
		{"environment endpoint", "", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:4318"}, true, "", 1},
		{"environment traces endpoint", "tracing: {sample_ratio: 0}\n",
			map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces"}, true, "", 0},
		{"SDK disabled", "tracing: {otlp_endpoint: http://a:4318}\n", map[string]string{"OTEL_SDK_DISABLED": "true"}, false, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(valid+tt.yaml), env(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			tr := p.Tracing
			if tr.Enabled != tt.enabled || tr.TracesURL != tt.url || tr.Ratio != tt.ratio {
				t.Errorf("got enabled %v, url %q, ratio %g; want %v, %q, %g", tr.Enabled, tr.TracesURL, tr.Ratio, tt.enabled, tt.url, tt.ratio)
			}
		})
	}
}

func TestTracingProblems(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"tracing: {otlp_endpoint: \"otel:4318\"}\n", "tracing.otlp_endpoint: scheme must be http or https"},
		{"tracing: {otlp_endpoint: \"http://\"}\n", "tracing.otlp_endpoint: has no host"},
		{"tracing: {otlp_endpoint: \"http://u:p@otel:4318\"}\n", "tracing.otlp_endpoint: must not carry"},
		{"tracing: {sample_ratio: 1.5}\n", "tracing.sample_ratio: must be between 0 and 1"},
		{"tracing: {endpoint: x}\n", "tracing.endpoint"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(valid+tt.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.yaml, err, tt.want)
		}
	}
}
