package loadgen

import (
	"math"
	"slices"
	"time"
)

// Percentiles summarises a set of durations. All values are microseconds,
// rounded to the nanosecond (three decimals).
type Percentiles struct {
	// Samples is the number of durations summarised.
	Samples int `json:"samples"`
	// Min is the smallest duration.
	Min float64 `json:"min"`
	// Mean is the arithmetic mean.
	Mean float64 `json:"mean"`
	// P50 is the median (nearest-rank).
	P50 float64 `json:"p50"`
	// P90 is the 90th percentile (nearest-rank).
	P90 float64 `json:"p90"`
	// P95 is the 95th percentile (nearest-rank).
	P95 float64 `json:"p95"`
	// P99 is the 99th percentile (nearest-rank).
	P99 float64 `json:"p99"`
	// Max is the largest duration.
	Max float64 `json:"max"`
}

// summarise computes exact nearest-rank percentiles of d. It sorts d in
// place. An empty slice yields a zero Percentiles.
func summarise(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	var sum float64
	for _, v := range d {
		sum += float64(v)
	}
	return Percentiles{
		Samples: len(d),
		Min:     micros(float64(d[0])),
		Mean:    micros(sum / float64(len(d))),
		P50:     micros(float64(rank(d, 50))),
		P90:     micros(float64(rank(d, 90))),
		P95:     micros(float64(rank(d, 95))),
		P99:     micros(float64(rank(d, 99))),
		Max:     micros(float64(d[len(d)-1])),
	}
}

// rank returns the nearest-rank p-th percentile of the sorted slice d: the
// smallest value such that at least p percent of the samples are ≤ it.
func rank(d []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p/100*float64(len(d)))) - 1
	i = max(0, min(i, len(d)-1))
	return d[i]
}

// micros converts nanoseconds to microseconds rounded to three decimals.
func micros(ns float64) float64 {
	return math.Round(ns) / 1e3
}
