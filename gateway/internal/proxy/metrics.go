package proxy

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/gateway/internal/limiter"
)

// MetricsHandler serves Prometheus metrics. Everything is read from the
// components' own counters at scrape time: nothing is added to the request
// path.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.obs.reg, promhttp.HandlerOpts{Registry: s.obs.reg})
}

// observer holds the per-request metrics; they are observed by the
// finisher, after the reply is out.
type observer struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	tokens   *prometheus.CounterVec
	cost     *prometheus.CounterVec
	guard    *prometheus.CounterVec
}

func newObserver(s *Server) *observer {
	o := &observer{reg: prometheus.NewRegistry()}
	o.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_requests_total",
		Help: "Requests that found a route, by endpoint, model, upstream and the status sent to the client."},
		[]string{"endpoint", "model", "upstream", "status"})
	o.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_request_duration_seconds",
		Help:    "Time from the request's arrival to the end of its reply (a stream's last event).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}},
		[]string{"endpoint", "upstream"})
	o.upstream = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_upstream_first_byte_seconds",
		Help:    "Time from the request's arrival to the upstream's response headers (plugins of the request phase included).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
		[]string{"upstream"})
	o.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tokens_total",
		Help: "Tokens used by tenant and type (the upstream's usage, else the gateway's count)."},
		[]string{"tenant", "type"})
	o.cost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_cost_usd_micros_total",
		Help: "Cost of the requests by tenant, in USD micros."}, []string{"tenant"})
	o.guard = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_guard_actions_total",
		Help: "Replies a guard changed or ended, by action (e.g. holdback:stopped, budget:cut, cancelled)."},
		[]string{"action"})
	o.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&serverCollector{s: s}, o.requests, o.duration, o.upstream, o.tokens, o.cost, o.guard)
	return o
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

	if rc := s.acct.redis; rc != nil {
		counter(mRedisCommands, rc.Commands())
		counter(mRedisFailures, rc.Failures())
	}
	if rl, ok := s.acct.limiter.(*limiter.Redis); ok {
		st := rl.Stats()
		counter(mLimiter, st.Admitted, "admitted")
		counter(mLimiter, st.Rejected, "rejected")
		counter(mLimiter, st.Fallbacks, "fallback")
		counter(mLimiterErrors, st.Errors)
	}

	if st := s.acquireState(); st != nil {
		defer st.release()
		for _, p := range st.pipeline.Plugins() {
			ps := p.Stats()
			counter(mPluginCalls, ps.Calls.Load(), p.Name())
			counter(mPluginTraps, ps.Traps.Load(), p.Name())
			counter(mPluginTimeouts, ps.Timeouts.Load(), p.Name())
			counter(mPluginWaits, ps.PoolWaits.Load(), p.Name())
			ps.Events.Range(func(k, v any) bool {
				counter(mPluginEvents, v.(*atomic.Int64).Load(), p.Name(), k.(string))
				return true
			})
		}
	}
}
