package obs

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
)

// Observations land in the right buckets (upper bounds inclusive), and the
// exposition is a valid cumulative Prometheus histogram.
func TestHistogramVec(t *testing.T) {
	v := NewHistogramVec("test_duration_seconds", "Test durations.", []float64{.001, .01, .1}, "plugin", "phase")
	h := v.With("p", "request")
	if v.With("p", "request") != h || v.With("p", "chunk") == h {
		t.Fatal("With does not return one histogram per label values")
	}
	for _, s := range []float64{.0005, .001, .002, .01, .05, .5, 2} {
		h.Observe(s)
	}
	if h.Count() != 7 {
		t.Fatalf("count %d", h.Count())
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(v)
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := `# HELP test_duration_seconds Test durations.
# TYPE test_duration_seconds histogram
test_duration_seconds_bucket{phase="chunk",plugin="p",le="0.001"} 0
test_duration_seconds_bucket{phase="chunk",plugin="p",le="0.01"} 0
test_duration_seconds_bucket{phase="chunk",plugin="p",le="0.1"} 0
test_duration_seconds_bucket{phase="chunk",plugin="p",le="+Inf"} 0
test_duration_seconds_sum{phase="chunk",plugin="p"} 0
test_duration_seconds_count{phase="chunk",plugin="p"} 0
test_duration_seconds_bucket{phase="request",plugin="p",le="0.001"} 2
test_duration_seconds_bucket{phase="request",plugin="p",le="0.01"} 4
test_duration_seconds_bucket{phase="request",plugin="p",le="0.1"} 5
test_duration_seconds_bucket{phase="request",plugin="p",le="+Inf"} 7
test_duration_seconds_sum{phase="request",plugin="p"} 2.5635
test_duration_seconds_count{phase="request",plugin="p"} 7
`
	if got := rec.Body.String(); got != want {
		t.Fatalf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

// Concurrent observations are all counted; Observe allocates nothing.
func TestHistogramConcurrent(t *testing.T) {
	h := NewHistogramVec("c_seconds", "c", []float64{.001}).With()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10000; j++ {
				h.Observe(.0001)
			}
		}()
	}
	wg.Wait()
	if h.Count() != 40000 || h.counts[0].Load() != 40000 {
		t.Fatalf("count %d", h.Count())
	}
	if a := testing.AllocsPerRun(1000, func() { h.Observe(.5) }); a != 0 {
		t.Fatalf("%.1f allocations per observation", a)
	}
}

// A traceparent read by Extract and written by AppendTraceContext
// round-trips; invalid ones are ignored.
func TestTraceContext(t *testing.T) {
	tests := []struct {
		name, traceparent, tracestate string
		valid                         bool
		want                          string
	}{
		{"sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "", true,
			"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"},
		{"not sampled, with state", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "vendor=a,other=b", true,
			"traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\r\ntracestate: vendor=a,other=b\r\n"},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", false, ""},
		{"garbage", "hello", "", false, ""},
		{"absent", "", "", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := Extract(context.Background(), func(k string) string {
				switch k {
				case "traceparent":
					return tt.traceparent
				case "tracestate":
					return tt.tracestate
				}
				return ""
			})
			sc := trace.SpanContextFromContext(ctx)
			if sc.IsValid() != tt.valid {
				t.Fatalf("valid %v", sc.IsValid())
			}
			if got := string(AppendTraceContext([]byte("X: y\r\n"), sc)); got != "X: y\r\n"+tt.want {
				t.Errorf("got %q", got)
			}
		})
	}
}
