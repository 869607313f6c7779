package redisx

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/testkit/faultnet"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// TestCallDurations: every call through FCall, Exec and Do is counted in
// the call-duration histogram under its label (a function by its name
// without the library's hash), and the time counted is the caller's
// wait: behind a proxy that delays each chunk 5 ms, a call takes at least
// 10 ms (its command one way, its reply the other), and the histogram
// must say so.
func TestCallDurations(t *testing.T) {
	srv := redistest.Start(t)
	p := faultnet.Start(t, srv.Addr())
	c := connect(t, Options{Addrs: []string{p.Addr()}, Timeout: 5 * time.Second})
	ctx := context.Background()
	// The library's load (FCALL, FUNCTION LOAD, FCALL) before the delay.
	if err := c.FCall(ctx, incrFn, []string{"k"}, []string{"1"}).Error(); err != nil {
		t.Fatal(err)
	}
	base := histograms(t, c)
	if err := p.SetDelay(5 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	const n = 4
	for range n {
		if err := c.FCall(ctx, incrFn, []string{"k"}, []string{"1"}).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Exec(ctx, incr, []string{"k2"}, []string{"1"}).Error(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, func(b rueidis.Builder) rueidis.Completed { return b.Get().Key("k").Build() }).Error(); err != nil {
			t.Fatal(err)
		}
	}
	after := histograms(t, c)
	for _, call := range []string{"incr", CallScript, CallCommand} {
		a, b := after[call], base[call]
		if a.buckets == nil {
			t.Fatalf("no histogram for call %q; have %v", call, slices.Collect(maps.Keys(after)))
		}
		calls := a.count - b.count
		if calls != n {
			t.Errorf("call %q: %d calls counted, want %d", call, calls, n)
		}
		if mean := (a.sum - b.sum) / float64(max(calls, 1)); mean < 0.010 {
			t.Errorf("call %q: mean %.2f ms behind a 5 ms proxy each way, want at least 10 ms", call, mean*1000)
		}
		// None of the delayed calls is in the buckets below 10 ms.
		for le, cum := range a.buckets {
			if d := cum - b.buckets[le]; le < 0.010 && d != 0 {
				t.Errorf("call %q: %d delayed calls at or under %g s", call, d, le)
			}
		}
	}
	if strings.Contains(strings.Join(slices.Collect(maps.Keys(after)), ","), incrFn.Name()) {
		t.Errorf("a label carries the library's hash: %v", slices.Collect(maps.Keys(after)))
	}
}

// hist is one label's histogram as scraped: count, sum (seconds) and
// the cumulative count of each bucket by upper bound.
type hist struct {
	count   uint64
	sum     float64
	buckets map[float64]uint64
}

// histograms scrapes c's call-duration histograms by label.
func histograms(t *testing.T, c *Client) map[string]hist {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(durationsOf{c}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]hist{}
	for _, mf := range mfs {
		if mf.GetName() != durationName {
			t.Fatalf("unexpected metric %s", mf.GetName())
		}
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			x := hist{count: h.GetSampleCount(), sum: h.GetSampleSum(), buckets: map[float64]uint64{}}
			for _, b := range h.GetBucket() {
				x.buckets[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			out[m.GetLabel()[0].GetValue()] = x
		}
	}
	return out
}

// durationsOf is a Client's histograms as a collector, as the gateway's
// metrics register them.
type durationsOf struct{ c *Client }

func (d durationsOf) Describe(ch chan<- *prometheus.Desc) { DescribeDurations(ch) }
func (d durationsOf) Collect(ch chan<- prometheus.Metric) { d.c.CollectDurations(ch) }
