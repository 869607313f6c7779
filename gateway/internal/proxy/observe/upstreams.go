package observe

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/gateway/internal/balance"
)

// Per-upstream health metrics, read from balance.Upstream's counters at
// scrape time. They belong to the current policy: a reload starts them
// (and the breakers) afresh.
var (
	mUpAttempts     = desc("tollgate_upstream_attempts_total", "Attempts sent to the upstream by outcome: success, client_error (4xx but 429), rate_limited (429), server_error (5xx), timeout, unreachable, cancelled, pool_full (nothing sent: every connection busy).", "upstream", "outcome")
	mUpRetries      = desc("tollgate_upstream_retries_total", "Attempts to the upstream that repeated a request after an earlier attempt failed.", "upstream")
	mUpInflight     = desc("tollgate_upstream_inflight_requests", "Attempts holding one of the upstream's slots (a stream until it ends).", "upstream")
	mUpLimit        = desc("tollgate_upstream_max_concurrent", "The upstream's max_concurrent (upstreams with a limit only).", "upstream")
	mUpWaits        = desc("tollgate_upstream_concurrency_waits_total", "Requests that found every upstream of their route at max_concurrent and waited for a slot, this one among them.", "upstream")
	mUpWaitTimeouts = desc("tollgate_upstream_concurrency_wait_timeouts_total", "Waits for a slot that ran out (the request got 503 upstream_saturated or its last attempt's failure).", "upstream")
	mUpSkips        = desc("tollgate_upstream_breaker_skips_total", "Times a request passed the upstream over because its circuit breaker was open.", "upstream")
	mUpState        = desc("tollgate_upstream_breaker_state", "1 for the circuit breaker's current state (closed, open, half_open), 0 for the others (upstreams with a breaker only).", "upstream", "state")
	mUpTransitions  = desc("tollgate_upstream_breaker_transitions_total", "Circuit breaker state changes, by the state entered.", "upstream", "state")
)

var upstreamDescs = []*prometheus.Desc{mUpAttempts, mUpRetries, mUpInflight, mUpLimit, mUpWaits, mUpWaitTimeouts, mUpSkips, mUpState, mUpTransitions}

func describeUpstreams(ch chan<- *prometheus.Desc) {
	for _, d := range upstreamDescs {
		ch <- d
	}
}

// collectUpstreams reports the health metrics of a policy's upstreams.
func collectUpstreams(ch chan<- prometheus.Metric, health []*balance.Upstream) {
	metric := func(d *prometheus.Desc, t prometheus.ValueType, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, float64(v), labels...)
	}
	outcomes := balance.Outcomes()
	for _, u := range health {
		name := u.Name()
		s := u.Stats()
		for _, o := range outcomes {
			metric(mUpAttempts, prometheus.CounterValue, s.Attempts[o], name, o.String())
		}
		metric(mUpRetries, prometheus.CounterValue, s.Retries, name)
		metric(mUpInflight, prometheus.GaugeValue, s.InFlight, name)
		if s.MaxConcurrent > 0 {
			metric(mUpLimit, prometheus.GaugeValue, s.MaxConcurrent, name)
			metric(mUpWaits, prometheus.CounterValue, s.Waits, name)
			metric(mUpWaitTimeouts, prometheus.CounterValue, s.WaitTimeouts, name)
		}
		if !s.Breaker {
			continue
		}
		metric(mUpSkips, prometheus.CounterValue, s.Skipped, name)
		for _, bs := range balance.BreakerStates() {
			v := int64(0)
			if s.State == bs {
				v = 1
			}
			metric(mUpState, prometheus.GaugeValue, v, name, bs.String())
			metric(mUpTransitions, prometheus.CounterValue, s.Transitions[bs], name, bs.String())
		}
	}
}
