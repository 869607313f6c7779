package redisx

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The call-duration histogram: how long a caller of FCall, Exec or Do
// waited for its reply, from the call to the return. It holds Redis's own
// time and the network's, and also what Redis's INFO commandstats cannot
// see: the time a call's command waits to be written, for Redis to read
// it, and for the reply to be read and handed back — on a machine whose
// CPUs are busy, most of it.
const (
	durationName = "tollgate_redis_call_duration_seconds"
	durationHelp = "Time a Redis call took from the gateway's side, from the call to the reply (retries after a Redis Cluster refusal, and a function library's load, included), by call: a function by its name, \"script\" or \"command\"."
)

// Call labels of the calls that are not functions.
const (
	CallScript  = "script"
	CallCommand = "command"
)

var (
	durationBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}
	durationDesc    = prometheus.NewDesc(durationName, durationHelp, []string{"call"}, nil)
)

// durations are a Client's call-duration histograms.
type durations struct {
	vec             *prometheus.HistogramVec
	script, command prometheus.Observer
	fns             sync.Map // *Function → prometheus.Observer
}

func newDurations() *durations {
	d := &durations{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: durationName, Help: durationHelp, Buckets: durationBuckets}, []string{"call"})}
	d.script, d.command = d.vec.WithLabelValues(CallScript), d.vec.WithLabelValues(CallCommand)
	return d
}

// function is f's histogram, looked up by label once per Client.
func (d *durations) function(f *Function) prometheus.Observer {
	if h, ok := d.fns.Load(f); ok {
		return h.(prometheus.Observer)
	}
	h := d.vec.WithLabelValues(f.base)
	d.fns.Store(f, h)
	return h
}

// since records the time since start in h.
func since(h prometheus.Observer, start time.Time) { h.Observe(time.Since(start).Seconds()) }

// DescribeDurations sends the description of the histogram
// CollectDurations exports (tollgate_redis_call_duration_seconds).
func DescribeDurations(ch chan<- *prometheus.Desc) { ch <- durationDesc }

// CollectDurations exports the histogram of the time the Client's calls
// took, labelled call: a function by its name without its library's hash
// (admit_reserve, adjust_settle, ...), "script" for Exec, "command" for
// Do. Calls made on Raw's client are not in it.
func (c *Client) CollectDurations(ch chan<- prometheus.Metric) { c.durations.vec.Collect(ch) }
