package config

import (
	"net/url"
	"strings"
)

// Tracing configures OpenTelemetry tracing: one span per request, with a
// child span per plugin phase, for the upstream's first byte and for the
// stream, exported over OTLP/HTTP. Off unless an endpoint is configured
// here or in the environment.
type Tracing struct {
	// OTLPEndpoint is the base URL of an OTLP/HTTP collector, e.g.
	// http://otel-collector:4318; spans are posted to its /v1/traces
	// (https for TLS). It wins over the environment. Left empty, the
	// standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is) or
	// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/traces appended) turns tracing
	// on; with neither, tracing is off. OTEL_SDK_DISABLED=true turns it
	// off in every case. Other OTEL_EXPORTER_OTLP_* variables (headers,
	// timeout, compression) apply either way.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// SampleRatio is the share of new traces that are recorded, from 0 to
	// 1 (default 1). A request that arrives with a W3C traceparent follows
	// its caller's sampling decision.
	SampleRatio *float64 `yaml:"sample_ratio"`

	// Enabled is true when spans are exported; resolved at load.
	Enabled bool `yaml:"-"`
	// TracesURL is the URL spans are posted to; "" with Enabled means the
	// exporter takes it from the environment. Resolved at load.
	TracesURL string `yaml:"-"`
	// Ratio is SampleRatio or its default; resolved at load.
	Ratio float64 `yaml:"-"`
}

// DefaultSampleRatio records every trace.
const DefaultSampleRatio = 1.0

// Same reports whether t and u configure the same tracing.
func (t Tracing) Same(u Tracing) bool {
	return t.Enabled == u.Enabled && t.TracesURL == u.TracesURL && t.Ratio == u.Ratio
}

func (p *Policy) validateTracing(lookupEnv func(string) (string, bool), ps *Problems) {
	t := &p.Tracing
	t.Ratio = DefaultSampleRatio
	if r := t.SampleRatio; r != nil {
		if *r < 0 || *r > 1 {
			ps.add("tracing.sample_ratio", "must be between 0 and 1, got %g", *r)
		}
		t.Ratio = *r
	}
	if t.OTLPEndpoint != "" {
		u, err := url.Parse(t.OTLPEndpoint)
		switch {
		case err != nil:
			ps.add("tracing.otlp_endpoint", "not a URL: %v", err)
			return
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add("tracing.otlp_endpoint", "scheme must be http or https, got %q", u.Scheme)
			return
		case u.Host == "":
			ps.add("tracing.otlp_endpoint", "has no host")
			return
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			ps.add("tracing.otlp_endpoint", "must not carry a query, fragment or user info")
			return
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		t.TracesURL, t.Enabled = u.String(), true
	} else {
		for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if v, ok := lookupEnv(k); ok && strings.TrimSpace(v) != "" {
				t.Enabled = true
			}
		}
	}
	if v, ok := lookupEnv("OTEL_SDK_DISABLED"); ok && strings.EqualFold(strings.TrimSpace(v), "true") {
		t.Enabled, t.TracesURL = false, ""
	}
}
