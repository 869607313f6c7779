package observe

import (
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/gateway/internal/obs"
)

// Handler serves Prometheus metrics (every metric is listed in
// docs/OBSERVABILITY.md). Most are read from the components' own counters
// at scrape time; the per-request ones are observed once the reply is
// flushed (Observe); on the request path itself only the plugin callbacks
// are timed (wasmhost.Instruments, a few tens of nanoseconds each).
func (o *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{Registry: o.reg})
}

// Metrics holds the metrics observed as requests happen; the rest are
// read at scrape time (collector, from Sources).
type Metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	upstream   *prometheus.HistogramVec
	ttft       *prometheus.HistogramVec
	phases     *prometheus.HistogramVec
	tokenUsage *prometheus.HistogramVec
	// tenants are the tenant-labelled series (tokens, cost), resolved
	// once per tenant and capped at metrics.max_tenants (tenants.go).
	tenants  *obs.LabelCap[*tenantSeries]
	unpriced *prometheus.CounterVec
	guard    *prometheus.CounterVec
	// plugins times each plugin callback, by plugin and phase; its
	// children are resolved when a policy state is built (attach).
	plugins    *obs.HistogramVec
	rejections *prometheus.CounterVec

	// pgTenants and pgLedger count the statements of the two Postgres
	// pools (they are the pools' tracers).
	pgTenants, pgLedger obs.StatementCounter

	states stateTotals
	src    Sources // set once by SetSources, before the first scrape
}

// Histogram buckets. Those of time to first token and token usage are the
// OpenTelemetry GenAI conventions' advice.
var (
	requestBuckets   = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	firstByteBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
	ttftBuckets      = []float64{.001, .005, .01, .02, .04, .06, .08, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}
	tokenBuckets     = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576}
	pluginBuckets    = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
)

// NewMetrics registers the metrics. It wraps the Postgres tracers of the
// tenant store's and the ledger's pools (nil: none; tests' own still see
// every call), so it runs before the pools are made: they are to trace
// with PGTracers. maxTenants caps the tenant label's values
// (metrics.max_tenants: the first maxTenants tenants seen, the rest as
// other; 0: no tenant label).
func NewMetrics(tenants, ledger pgx.QueryTracer, maxTenants int) *Metrics {
	o := &Metrics{reg: prometheus.NewRegistry()}
	o.states.live = map[*attached]struct{}{}
	o.states.plugins = map[string]*pluginTotals{}
	o.pgTenants.Next, o.pgLedger.Next = tenants, ledger

	o.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_requests_total",
		Help: "Requests that found a route, by endpoint, model, upstream and the status sent to the client."},
		[]string{"endpoint", "model", "upstream", "status"})
	o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_request_duration_seconds",
		Help:    "Time from the request's arrival to the end of its reply (a stream's last event), by endpoint, model, upstream and status (OpenTelemetry gen_ai.server.request.duration).",
		Buckets: requestBuckets},
		[]string{"endpoint", "model", "upstream", "status"})
	o.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_upstream_first_byte_seconds",
		Help:    "Time from the request's arrival to the upstream's response headers (plugins of the request phase and retries included).",
		Buckets: firstByteBuckets},
		[]string{"upstream"})
	o.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_time_to_first_token_seconds",
		Help:    "Time from a streamed request's arrival to the upstream's first event with generated text (OpenTelemetry gen_ai.server.time_to_first_token).",
		Buckets: ttftBuckets},
		[]string{"endpoint", "model", "upstream"})
	o.phases = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_phase_duration_seconds",
		Help: "Duration of a request's phases: admission (arrival to the upstream send: parsing and the request-phase plugins), " +
			"upstream_first_byte (send to the response headers, retries included), stream (response headers to a stream's last event).",
		Buckets: requestBuckets},
		[]string{"phase", "upstream"})
	tenantVecs := o.newTenantSeries(maxTenants)
	o.tokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_request_tokens",
		Help:    "Tokens per request by model and type, prompt or completion (OpenTelemetry gen_ai.client.token.usage, gen_ai.token.type input and output).",
		Buckets: tokenBuckets},
		[]string{"model", "type"})
	o.unpriced = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_budget_unpriced_requests_total",
		Help: "Requests served for a model without a price (pricing.unpriced: free), so charged nothing, by the policy's model name or pattern."},
		[]string{"model"})
	o.guard = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_guard_actions_total",
		Help: "Replies a guard changed or ended, by action (e.g. holdback:stopped, budget:cut, cancelled)."},
		[]string{"action"})
	o.plugins = obs.NewHistogramVec("tollgate_plugin_phase_duration_seconds",
		"Duration of each plugin callback by plugin and phase (request, response_headers, chunk, end): from asking for an instance, so a wait for a free one counts, to the guest's return.",
		pluginBuckets, "plugin", "phase")
	o.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_plugin_rejections_total",
		Help: "Requests a plugin rejected (REJECT in the request or response_headers phase), by plugin."},
		[]string{"plugin"})
	o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&collector{o: o}, o.requests, o.duration, o.upstream, o.ttft, o.phases, o.tokenUsage,
		o.unpriced, o.guard, o.plugins, o.rejections)
	o.reg.MustRegister(tenantVecs...)
	return o
}

// statusLabels are the status label values of the HTTP statuses, made once.
var statusLabels = func() (l [600]string) {
	for i := 100; i < len(l); i++ {
		l[i] = strconv.Itoa(i)
	}
	return l
}()

func statusLabel(status int) string {
	if status >= 100 && status < len(statusLabels) {
		return statusLabels[status]
	}
	return strconv.Itoa(status)
}

// PGTracers are the tracers the tenant store's and the ledger's Postgres
// pools are to use: they count the statements, then call those given to
// NewMetrics.
func (o *Metrics) PGTracers() (tenants, ledger pgx.QueryTracer) {
	return &o.pgTenants, &o.pgLedger
}
