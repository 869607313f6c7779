package wasmhost

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingObserver counts observations and sums them.
type countingObserver struct {
	n   atomic.Int64
	sum atomic.Int64 // nanoseconds
}

func (o *countingObserver) ObserveDuration(d time.Duration) {
	o.n.Add(1)
	o.sum.Add(int64(d))
}

type countingCounter struct{ n atomic.Int64 }

func (c *countingCounter) Inc() { c.n.Add(1) }

type tracedCall struct {
	plugin string
	slot   int
	ph     Phase
	d      time.Duration
	v      Verdict
	err    error
}

type recordingTracer struct {
	mu    sync.Mutex
	calls []tracedCall
}

func (t *recordingTracer) PluginCall(plugin string, slot int, ph Phase, start time.Time, d time.Duration, v Verdict, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls = append(t.calls, tracedCall{plugin, slot, ph, d, v, err})
}

// Every callback is observed once in its phase's instrument, rejections
// are counted, and a request's tracer sees each callback in order.
func TestInstrumentsAndTracer(t *testing.T) {
	pl := pipeline(t, `{"request":"continue","chunk":"continue","end":"continue","phases":["request","chunk","end"]}`,
		`{"request":"continue","response_headers":"reject","phases":["request","response_headers"]}`)
	var obs [2][4]countingObserver
	var rej [2]countingCounter
	for i, p := range pl.Plugins() {
		pl.Instrument(p.Name(), Instruments{Request: &obs[i][0], ResponseHeaders: &obs[i][1], Chunk: &obs[i][2], End: &obs[i][3], Rejections: &rej[i]})
	}
	const requests, chunks = 3, 5
	tr := &recordingTracer{}
	for i := 0; i < requests; i++ {
		r := request(`{}`)
		if i == 0 {
			r.Tracer = tr
		}
		if err := pl.Request(r); err != nil {
			t.Fatal(err)
		}
		var rejErr *RejectError
		if err := pl.ResponseHeaders(r, 200); !errors.As(err, &rejErr) || rejErr.Plugin != "p1" {
			t.Fatalf("response headers: %v", err)
		}
		for j := 0; j < chunks; j++ {
			if _, err := pl.Chunk(r, []byte("x"), ChunkText); err != nil {
				t.Fatal(err)
			}
		}
		pl.End(r, EndCompleted)
		ReleaseRequest(r)
	}
	want := [2][4]int64{{requests, 0, requests * chunks, requests}, {requests, requests, 0, 0}}
	for i := range want {
		for ph := range want[i] {
			if got := obs[i][ph].n.Load(); got != want[i][ph] {
				t.Errorf("plugin %d phase %d: %d observations, want %d", i, ph, got, want[i][ph])
			}
			if obs[i][ph].n.Load() > 0 && obs[i][ph].sum.Load() <= 0 {
				t.Errorf("plugin %d phase %d: durations sum to %d ns", i, ph, obs[i][ph].sum.Load())
			}
		}
	}
	if rej[0].n.Load() != 0 || rej[1].n.Load() != requests {
		t.Errorf("rejections %d, %d; want 0, %d", rej[0].n.Load(), rej[1].n.Load(), requests)
	}
	// The traced request: p0 request, p1 request, p1 response_headers
	// (reject), 5 × p0 chunk, p0 end.
	wantTrace := []struct {
		plugin string
		ph     Phase
		v      Verdict
	}{{"p0", PhaseRequest, Continue}, {"p1", PhaseRequest, Continue}, {"p1", PhaseResponseHeaders, Reject}}
	for j := 0; j < chunks; j++ {
		wantTrace = append(wantTrace, struct {
			plugin string
			ph     Phase
			v      Verdict
		}{"p0", PhaseChunk, Continue})
	}
	wantTrace = append(wantTrace, struct {
		plugin string
		ph     Phase
		v      Verdict
	}{"p0", PhaseEnd, Continue})
	if len(tr.calls) != len(wantTrace) {
		t.Fatalf("traced %d calls, want %d: %+v", len(tr.calls), len(wantTrace), tr.calls)
	}
	for i, w := range wantTrace {
		c := tr.calls[i]
		if c.plugin != w.plugin || c.ph != w.ph || c.v != w.v || c.err != nil || c.d <= 0 || c.slot != int(w.plugin[1]-'0') {
			t.Errorf("call %d = %+v, want %s %s %s", i, c, w.plugin, w.ph, w.v)
		}
	}
}

// Timing and a nil tracer add no allocation to a callback.
func TestInstrumentsDoNotAllocate(t *testing.T) {
	pl := pipeline(t, `{"request":"continue","phases":["request"]}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	call := func() {
		if err := pl.Request(r); err != nil {
			t.Fatal(err)
		}
	}
	call() // warm the pool
	base := testing.AllocsPerRun(200, call)
	pl.Instrument("p0", Instruments{Request: &countingObserver{}})
	if got := testing.AllocsPerRun(200, call); got > base {
		t.Errorf("%.1f allocations per timed callback, %.1f untimed", got, base)
	}
}

// phaseBuckets are the gateway's plugin-phase histogram buckets.
var phaseBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// BenchmarkTimingOverhead is what timing adds to each callback of a phase
// with k plugins, the guest calls left out: per callback the instrument
// lookup, one observation in the gateway's histogram and (k+1)/k clock
// readings (callbacks of a phase share readings).
func BenchmarkTimingOverhead(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("plugins=%d", k), func(b *testing.B) {
			pl := &Pipeline{instruments: make([]Instruments, k)}
			for i := 0; i < k; i++ {
				p := &Plugin{spec: Spec{Name: fmt.Sprint("p", i), Slot: i}}
				pl.plugins = append(pl.plugins, p)
				pl.instruments[i].Request = newBucketObserver(phaseBuckets)
			}
			r := request(`{}`)
			defer ReleaseRequest(r)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0, cpuOK := threadCPUTime()
			b.ReportAllocs()
			for b.Loop() {
				// As timedCall does, for each plugin of the phase.
				r.clock = 0
				for _, p := range pl.plugins {
					o := pl.instruments[p.spec.Slot].observer(PhaseRequest)
					if o == nil && r.Tracer == nil {
						b.Fatal("not instrumented")
					}
					t0 := r.clock
					if t0 == 0 {
						t0 = time.Since(clockBase)
					}
					r.clock = report(p, r, PhaseRequest, o, t0, nil)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/callback")
			if cpu1, ok := threadCPUTime(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*k), "cpu-ns/callback")
			}
		})
	}
}

// BenchmarkTimedPhaseCall is BenchmarkPhaseCall's request callback with
// and without a histogram on it.
func BenchmarkTimedPhaseCall(b *testing.B) {
	for _, timed := range []bool{false, true} {
		name := "untimed"
		if timed {
			name = "timed"
		}
		b.Run(name, func(b *testing.B) {
			pl := pipeline(b, `{"request":"continue","phases":["request"]}`)
			if timed {
				pl.Instrument("p0", Instruments{Request: newBucketObserver(phaseBuckets)})
			}
			r := request(`{}`)
			defer ReleaseRequest(r)
			b.ReportAllocs()
			for b.Loop() {
				if err := pl.Request(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bucketObserver is an Observer with the work of the gateway's histogram
// (obs.Histogram): a bucket found by search, an atomic count and sum.
type bucketObserver struct {
	bounds []float64
	counts []atomic.Uint64
	sum    atomic.Int64
}

func newBucketObserver(bounds []float64) *bucketObserver {
	return &bucketObserver{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

func (o *bucketObserver) ObserveDuration(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(o.bounds) && s > o.bounds[i] {
		i++
	}
	o.counts[i].Add(1)
	o.sum.Add(int64(d))
}

var sinkDuration time.Duration

// BenchmarkClockReading is one monotonic clock reading, the unit of what
// timing costs on the machine at hand (a virtual machine's kvm-clock is
// two to three times slower than a TSC clock source).
func BenchmarkClockReading(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuOK := threadCPUTime()
	for b.Loop() {
		sinkDuration += time.Since(clockBase)
	}
	if cpu1, ok := threadCPUTime(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
}
