package callout

import "github.com/prometheus/client_golang/prometheus"

// Outcome is how one call-out ended, the outcome label of
// tollgate_plugin_callouts_total.
type Outcome int

// Outcomes.
const (
	OutcomeOK          Outcome = iota // a 2xx answer from the service
	OutcomeErrorStatus                // any other status (redirects included: never followed)
	OutcomeTimeout                    // the grant's timeout passed
	OutcomeTooLarge                   // the body was above max_response_bytes
	OutcomeBusy                       // max_in_flight was reached: refused at once
	OutcomeUnavailable                // connection refused or reset, DNS, TLS; or abandoned
	OutcomeCached                     // answered from the cache, no call made
	OutcomeDenied                     // the URL is not granted (or no grant at all)
	outcomes
)

var outcomeNames = [outcomes]string{"ok", "error_status", "timeout", "too_large", "busy", "unavailable", "cached", "denied"}

func (o Outcome) String() string { return outcomeNames[o] }

// Metrics are the call-outs' Prometheus metrics, by plugin. They outlive
// the Services of policy reloads: make them once and register
// Collectors.
type Metrics struct {
	calls    *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// calloutBuckets span a fast local classifier to a slow remote one.
var calloutBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewMetrics makes the metrics (not registered).
func NewMetrics() *Metrics {
	return &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_plugin_callouts_total",
			Help: "Plugins' HTTP call-outs by plugin and outcome: ok (2xx), error_status (any other status), timeout, too_large, busy (max_in_flight reached), unavailable (connection failed), cached (answered from the cache), denied (URL not granted)."},
			[]string{"plugin", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_plugin_callout_seconds",
			Help:    "Duration of plugins' HTTP call-outs that went out (not cached, busy or denied), from the start to the last byte of the answer, by plugin.",
			Buckets: calloutBuckets}, []string{"plugin"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tollgate_plugin_callouts_in_flight",
			Help: "Plugins' HTTP call-outs in flight, by plugin."}, []string{"plugin"}),
	}
}

// Collectors are what to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.calls, m.seconds, m.inFlight}
}

// pluginMetrics are one plugin's children, looked up once per Service.
type pluginMetrics struct {
	calls    [outcomes]prometheus.Counter
	seconds  prometheus.Observer
	inFlight prometheus.Gauge
}

func (m *Metrics) forPlugin(name string) *pluginMetrics {
	pm := new(pluginMetrics)
	if m == nil {
		m = NewMetrics() // unregistered: counted, never exported
	}
	for o := range outcomes {
		pm.calls[o] = m.calls.WithLabelValues(name, outcomeNames[o])
	}
	pm.seconds = m.seconds.WithLabelValues(name)
	pm.inFlight = m.inFlight.WithLabelValues(name)
	return pm
}
