package proxy

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/obs"
)

// MetricsHandler serves Prometheus metrics (every metric is listed in
// docs/OBSERVABILITY.md). Most are read from the components' own counters
// at scrape time; the per-request ones are observed once the reply is
// flushed (finish.go); on the request path itself only the plugin callbacks
// are timed (wasm.Instruments, a few tens of nanoseconds each).
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.obs.reg, promhttp.HandlerOpts{Registry: s.obs.reg})
}

// observer holds the metrics observed as requests happen; the rest are
// read at scrape time (serverCollector).
type observer struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	upstream   *prometheus.HistogramVec
	ttft       *prometheus.HistogramVec
	phases     *prometheus.HistogramVec
	tokens     *prometheus.CounterVec
	tokenUsage *prometheus.HistogramVec
	cost       *prometheus.CounterVec
	guard      *prometheus.CounterVec
	// plugins times each plugin callback, by plugin and phase; its
	// children are resolved when a policy state is built (attach).
	plugins    *obs.HistogramVec
	rejections *prometheus.CounterVec

	// pgTenants and pgLedger count the statements of the two Postgres
	// pools (they are the pools' tracers).
	pgTenants, pgLedger obs.StatementCounter

	states stateTotals
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

// newObserver registers the metrics. It wraps the server's Postgres
// tracers (tests' own, from WithPGTracer, still see every call), so it
// runs before the pools are made.
func newObserver(s *Server) *observer {
	o := &observer{reg: prometheus.NewRegistry()}
	o.states.live = map[*state]struct{}{}
	o.states.plugins = map[string]*pluginTotals{}
	o.pgTenants.Next, o.pgLedger.Next = s.pgTracer, s.ledgerTracer
	s.pgTracer, s.ledgerTracer = &o.pgTenants, &o.pgLedger

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
	o.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tokens_total",
		Help: "Tokens used by tenant and type, prompt or completion (the upstream's usage, else the gateway's count; OpenTelemetry gen_ai.usage.input_tokens, gen_ai.usage.output_tokens)."},
		[]string{"tenant", "type"})
	o.tokenUsage = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_request_tokens",
		Help:    "Tokens per request by model and type, prompt or completion (OpenTelemetry gen_ai.client.token.usage, gen_ai.token.type input and output).",
		Buckets: tokenBuckets},
		[]string{"model", "type"})
	o.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_cost_usd_micros_total",
		Help: "Cost of the requests by tenant, in USD micros."}, []string{"tenant"})
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
		&serverCollector{s: s}, o.requests, o.duration, o.upstream, o.ttft, o.phases, o.tokens, o.tokenUsage,
		o.cost, o.guard, o.plugins, o.rejections)
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

type serverCollector struct{ s *Server }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	mInflight        = desc("tollgate_inflight_requests", "Requests being forwarded (streams included).")
	mReloads         = desc("tollgate_policy_reloads_total", "Successful policy reloads.")
	mLedgerRows      = desc("tollgate_calllog_rows_total", "Call-log rows committed to Postgres.")
	mLedgerTx        = desc("tollgate_calllog_transactions_total", "Call-log transactions committed.")
	mLedgerInline    = desc("tollgate_calllog_inline_writes_total", "Rows written by the request's goroutine because the queue was full.")
	mLedgerSpooled   = desc("tollgate_calllog_spooled_rows_total", "Rows written to the local spool while Postgres was unreachable.")
	mLedgerReplayed  = desc("tollgate_calllog_replayed_rows_total", "Spooled rows replayed to Postgres.")
	mLedgerRejected  = desc("tollgate_calllog_rejected_rows_total", "Rows Postgres refused as bad data (logged with their request id).")
	mLedgerLost      = desc("tollgate_calllog_lost_rows_total", "Rows stored neither in Postgres nor in the spool.")
	mLedgerQueue     = desc("tollgate_calllog_queue_depth", "Rows waiting for the writer.")
	mLedgerSpool     = desc("tollgate_calllog_spool_bytes", "Size of the local spool.")
	mReconcileRuns   = desc("tollgate_budget_reconcile_runs_total", "Reconcile runs made by this gateway.")
	mReconcileDrift  = desc("tollgate_budget_reconcile_drift_micros_total", "Absolute spend corrected by the reconcile job, in USD micros.")
	mCancelPolls     = desc("tollgate_cancel_polls_total", "Cancel poll rounds (one Redis script call each).")
	mCancelFailures  = desc("tollgate_cancel_poll_failures_total", "Cancel polls that could not reach Redis (cancels stay in-process meanwhile).")
	mCancelFallbacks = desc("tollgate_cancel_fallback_polls_total", "Cancel polls sent one command per key because Redis refused the script.")
	mCancelRemote    = desc("tollgate_cancel_remote_total", "Requests cancelled through another replica.")
	mRedisCommands   = desc("tollgate_redis_commands_total", "Commands sent to Redis (a script call is one).")
	mRedisFailures   = desc("tollgate_redis_failures_total", "Redis commands that failed without a reply (refused, lost, timed out).")
	mLimiter         = desc("tollgate_ratelimit_decisions_total", "Rate-limit admissions by result; fallback counts those decided in-process while Redis failed.", "result")
	mLimiterErrors   = desc("tollgate_ratelimit_errors_total", "Rate-limit calls that failed because of Redis.")
	mPluginCalls     = desc("tollgate_plugin_calls_total", "Plugin callbacks run.", "plugin")
	mPluginTraps     = desc("tollgate_plugin_traps_total", "Plugin callbacks that trapped.", "plugin")
	mPluginTimeouts  = desc("tollgate_plugin_timeouts_total", "Plugin callbacks stopped at their deadline.", "plugin")
	mPluginWaits     = desc("tollgate_plugin_pool_waits_total", "Callbacks that waited for a free instance.", "plugin")
	mPluginEvents    = desc("tollgate_plugin_events_total", "Counters plugins add to (metric_add).", "plugin", "name")
)

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mInflight, mReloads, mLedgerRows, mLedgerTx, mLedgerInline, mLedgerSpooled,
		mLedgerReplayed, mLedgerRejected, mLedgerLost, mLedgerQueue, mLedgerSpool, mReconcileRuns, mReconcileDrift,
		mCancelPolls, mCancelFailures, mCancelFallbacks, mCancelRemote, mRedisCommands, mRedisFailures, mLimiter,
		mLimiterErrors, mPluginCalls, mPluginTraps, mPluginTimeouts, mPluginWaits, mPluginEvents} {
		ch <- d
	}
	for _, d := range stateDescs {
		ch <- d
	}
	describeUpstreams(ch)
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(mInflight, s.inflight.Load())
	counter(mReloads, s.reloads.Load())

	a := s.AccountingStats()
	l := a.Ledger
	counter(mLedgerRows, l.Rows)
	counter(mLedgerTx, l.Transactions)
	counter(mLedgerInline, l.InlineWrites)
	counter(mLedgerSpooled, l.SpooledRows)
	counter(mLedgerReplayed, l.ReplayedRows)
	counter(mLedgerRejected, l.Rejected)
	counter(mLedgerLost, l.Lost)
	gauge(mLedgerQueue, int64(l.QueueDepth))
	gauge(mLedgerSpool, l.SpoolBytes)
	counter(mReconcileRuns, a.ReconcileRuns)
	counter(mReconcileDrift, a.ReconcileDriftMicros)

	cs := s.CancelStats()
	counter(mCancelPolls, cs.Polls)
	counter(mCancelFailures, cs.PollFailures)
	counter(mCancelFallbacks, cs.FallbackPolls)
	counter(mCancelRemote, cs.RemoteCancels)

	if rc := s.acct.Redis; rc != nil {
		counter(mRedisCommands, rc.Commands())
		counter(mRedisFailures, rc.Failures())
	}
	if rl, ok := s.acct.Limiter.(*limiter.Redis); ok {
		st := rl.Stats()
		counter(mLimiter, st.Admitted, "admitted")
		counter(mLimiter, st.Rejected, "rejected")
		counter(mLimiter, st.Fallbacks, "fallback")
		counter(mLimiterErrors, st.Errors)
	}

	// Plugins' and tenant caches' counters, summed over policy states.
	s.obs.collectStates(ch, s)

	if st := s.acquireState(); st != nil {
		defer st.release()
		collectUpstreams(ch, st)
	}
}
