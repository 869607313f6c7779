package observe

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/gateway/internal/accounting"
	"github.com/tollgate/tollgate/gateway/internal/alerts"
	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// Sources are the components the scrape-time metrics read. Fields are
// set once, by SetSources; a nil one is left out.
type Sources struct {
	// Inflight counts requests being forwarded; Reloads successful
	// policy reloads.
	Inflight, Reloads *atomic.Int64
	// Panics counts the requests whose handling panicked, by where:
	// Panics[0] while the handler ran, Panics[1] while a stream was sent.
	Panics     *[2]atomic.Int64
	Accounting *accounting.Accounting
	Cancels    *cancels.Registry
	// Services are the host services' decisions; they outlive reloads.
	Services *hostsvc.Counts
	// Upstreams calls read with the current policy's upstreams, in
	// policy order, while it holds the policy (not at all after a
	// shutdown).
	Upstreams func(read func([]*balance.Upstream))
}

// SetSources names the components the scrape-time metrics read. Call it
// once, before the metrics are served.
func (o *Metrics) SetSources(src Sources) { o.src = src }

// collector reports the metrics read at scrape time.
type collector struct{ o *Metrics }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	mInflight        = desc("tollgate_inflight_requests", "Requests being forwarded (streams included).")
	mReloads         = desc("tollgate_policy_reloads_total", "Successful policy reloads.")
	mPanics          = desc("tollgate_panics_total", "Requests whose handling panicked (a bug, logged with its stack): the request failed, the gateway went on. where: handler (answered 500 internal_error), stream (the connection closed mid-stream).", "where")
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
	mAlertsFired     = desc("tollgate_budget_alerts_total", "Budget alerts this gateway stored in the outbox (a threshold reached in a period; repeats are not counted), by threshold in percent.", "threshold")
	mAlertDeliveries = desc("tollgate_budget_alert_deliveries_total", "Budget alert delivery attempts by outcome: delivered (a 2xx), failed (retried), gave_up (failed past alerts.max_age).", "outcome")
	mAlertQueue      = desc("tollgate_budget_alert_queue_depth", "Budget alerts pending delivery in the outbox (shared by the gateways on Postgres), as this gateway last counted.")
	mAlertLocal      = desc("tollgate_budget_alert_local_queue_depth", "Budget alerts waiting in this gateway to be stored in the outbox.")
	mAlertWaits      = desc("tollgate_budget_alert_enqueue_waits_total", "Budget alert reports that waited for room in the local queue (the outbox was behind).")
	mAlertsLost      = desc("tollgate_budget_alerts_lost_total", "Budget alerts not stored: the gateway shut down while the outbox refused them, or the outbox rejected them as bad data (logged).")
	mCancelPolls     = desc("tollgate_cancel_polls_total", "Cancel poll rounds (one Redis script call each).")
	mCancelFailures  = desc("tollgate_cancel_poll_failures_total", "Cancel polls that could not reach Redis (cancels stay in-process meanwhile).")
	mCancelFallbacks = desc("tollgate_cancel_fallback_polls_total", "Cancel polls sent one command per key because Redis refused the script.")
	mCancelRemote    = desc("tollgate_cancel_remote_total", "Requests cancelled through another replica.")
	mRedisCommands   = desc("tollgate_redis_commands_total", "Commands sent to Redis (a script call is one).")
	mReplicasLive    = desc("tollgate_replicas_live", "Gateway replicas sharing this Redis, this one included, at this gateway's last heartbeat that reached Redis (0: none has); the rate limiter's fail_open share divides by it.")
	mRedisFailures   = desc("tollgate_redis_failures_total", "Redis commands that failed without a reply (refused, lost, timed out).")
	mLimiter         = desc("tollgate_ratelimit_decisions_total", "Rate-limit admissions by result; fallback counts those decided in-process while Redis failed.", "result")
	mLimiterErrors   = desc("tollgate_ratelimit_errors_total", "Rate-limit calls that failed because of Redis.")
	mPluginCalls     = desc("tollgate_plugin_calls_total", "Plugin callbacks run.", "plugin")
	mPluginTraps     = desc("tollgate_plugin_traps_total", "Plugin callbacks that trapped.", "plugin")
	mPluginTimeouts  = desc("tollgate_plugin_timeouts_total", "Plugin callbacks stopped at their deadline.", "plugin")
	mPluginWaits     = desc("tollgate_plugin_pool_waits_total", "Callbacks that waited for a free instance.", "plugin")
	mPluginEvents    = desc("tollgate_plugin_events_total", "Counters plugins add to (metric_add).", "plugin", "name")
)

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mInflight, mReloads, mPanics, mLedgerRows, mLedgerTx, mLedgerInline, mLedgerSpooled,
		mLedgerReplayed, mLedgerRejected, mLedgerLost, mLedgerQueue, mLedgerSpool, mReconcileRuns, mReconcileDrift,
		mCancelPolls, mCancelFailures, mCancelFallbacks, mCancelRemote, mRedisCommands, mRedisFailures, mReplicasLive, mLimiter,
		mLimiterErrors, mPluginCalls, mPluginTraps, mPluginTimeouts, mPluginWaits, mPluginEvents} {
		ch <- d
	}
	for _, d := range stateDescs {
		ch <- d
	}
	redisx.DescribeDurations(ch)
	describeUpstreams(ch)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	src := &c.o.src
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	gauge(mInflight, src.Inflight.Load())
	counter(mReloads, src.Reloads.Load())
	if p := src.Panics; p != nil {
		counter(mPanics, p[0].Load(), "handler")
		counter(mPanics, p[1].Load(), "stream")
	}

	a := src.Accounting.Stats()
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
	if src.Accounting.AlertDispatcher != nil {
		collectAlerts(ch, a.Alerts)
	}

	cs := src.Cancels.Stats()
	counter(mCancelPolls, cs.Polls)
	counter(mCancelFailures, cs.PollFailures)
	counter(mCancelFallbacks, cs.FallbackPolls)
	counter(mCancelRemote, cs.RemoteCancels)

	if rc := src.Accounting.Redis; rc != nil {
		counter(mRedisCommands, rc.Commands())
		counter(mRedisFailures, rc.Failures())
		rc.CollectDurations(ch)
	}
	if f := src.Accounting.Fleet; f != nil {
		gauge(mReplicasLive, int64(f.Live()))
	}
	if rl, ok := src.Accounting.Limiter.(*limiter.Redis); ok {
		st := rl.Stats()
		counter(mLimiter, st.Admitted, "admitted")
		counter(mLimiter, st.Rejected, "rejected")
		counter(mLimiter, st.Fallbacks, "fallback")
		counter(mLimiterErrors, st.Errors)
	}

	// Plugins' and tenant caches' counters, summed over policy states.
	c.o.collectStates(ch)

	if src.Upstreams != nil {
		src.Upstreams(func(health []*balance.Upstream) { collectUpstreams(ch, health) })
	}
}

// collectAlerts reports the budget alert dispatcher's metrics.
func collectAlerts(ch chan<- prometheus.Metric, st alerts.Stats) {
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	// The thresholds are the plans' (a handful of percentages), so the
	// label stays bounded.
	for t, n := range st.Fired {
		counter(mAlertsFired, n, strconv.Itoa(t))
	}
	counter(mAlertDeliveries, st.Delivered, "delivered")
	counter(mAlertDeliveries, st.Failed, "failed")
	counter(mAlertDeliveries, st.GaveUp, "gave_up")
	counter(mAlertWaits, st.EnqueueWaits)
	counter(mAlertsLost, st.Lost)
	ch <- prometheus.MustNewConstMetric(mAlertQueue, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(mAlertLocal, prometheus.GaugeValue, float64(st.Queued))
}
