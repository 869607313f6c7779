// Package obs holds the gateway's observability primitives: a histogram
// cheap enough for every plugin callback, the OpenTelemetry tracing
// set-up (OTLP/HTTP export, W3C trace context), and a pgx tracer that
// counts a pool's statements.
package obs

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Histogram is a Prometheus histogram of durations with fixed buckets,
// updated with two atomic adds: no lock, no allocation, no compare-and-swap
// loop (the sum is kept in integer nanoseconds). It is read at scrape time
// by its HistogramVec. A Histogram must not be copied.
type Histogram struct {
	bounds []int64         // upper bounds in nanoseconds, ascending; shared
	counts []atomic.Uint64 // per bucket (not cumulative); the last is +Inf
	sum    atomic.Int64    // nanoseconds
	_      [0]func()       // not comparable
}

// ObserveDuration records d (wasmhost.Observer).
func (h *Histogram) ObserveDuration(d time.Duration) {
	ns := int64(d)
	i := 0
	for i < len(h.bounds) && ns > h.bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(ns)
}

// Observe records a duration given in seconds (prometheus.Observer).
func (h *Histogram) Observe(seconds float64) { h.ObserveDuration(time.Duration(seconds * 1e9)) }

// Count is the number of observations so far.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// HistogramVec is a family of Histograms with the same buckets, one per
// label values, exported by Collect. Children are made by With, which
// takes a lock: resolve them once (at configuration), not per observation.
type HistogramVec struct {
	desc    *prometheus.Desc
	bounds  []int64
	buckets []float64 // bounds in seconds

	mu       sync.Mutex
	children map[string]*child
	order    []*child
}

type child struct {
	labels []string
	h      *Histogram
}

// NewHistogramVec returns a vector named name; buckets are the upper bounds
// in seconds, ascending.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *HistogramVec {
	v := &HistogramVec{desc: prometheus.NewDesc(name, help, labels, nil), buckets: buckets, children: map[string]*child{}}
	for _, b := range buckets {
		v.bounds = append(v.bounds, int64(b*1e9+0.5))
	}
	return v
}

// With returns the Histogram of the label values, creating it on first use.
func (v *HistogramVec) With(values ...string) *Histogram {
	key := ""
	for _, s := range values {
		key += s + "\xff"
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	c, ok := v.children[key]
	if !ok {
		c = &child{labels: append([]string(nil), values...),
			h: &Histogram{bounds: v.bounds, counts: make([]atomic.Uint64, len(v.bounds)+1)}}
		v.children[key] = c
		v.order = append(v.order, c)
	}
	return c.h
}

// Describe implements prometheus.Collector.
func (v *HistogramVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector. The buckets and the count of one
// Histogram are consistent with each other; the sum may include an
// observation whose bucket was not read yet.
func (v *HistogramVec) Collect(ch chan<- prometheus.Metric) {
	v.mu.Lock()
	children := append([]*child(nil), v.order...)
	v.mu.Unlock()
	for _, c := range children {
		h := c.h
		cum := make(map[float64]uint64, len(v.buckets))
		var n uint64
		for i := range h.counts {
			n += h.counts[i].Load()
			if i < len(v.buckets) {
				cum[v.buckets[i]] = n
			}
		}
		ch <- prometheus.MustNewConstHistogram(v.desc, n, float64(h.sum.Load())/1e9, cum, c.labels...)
	}
}
