package wasmhost

import (
	"runtime"
	"testing"
)

// BenchmarkPhaseCall is the cost of one guest callback through the Go SDK:
// checkout, call, host function round trips the SDK makes, return.
func BenchmarkPhaseCall(b *testing.B) {
	b.Run("request", func(b *testing.B) {
		pl := pipeline(b, `{"request":"continue","phases":["request"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			if err := pl.Request(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk", func(b *testing.B) {
		pl := pipeline(b, `{"chunk":"continue","phases":["chunk"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		text := []byte("hello, world")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Chunk(r, text, ChunkText); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk-replace", func(b *testing.B) {
		pl := pipeline(b, `{"chunk":"replace_upper","phases":["chunk"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		text := []byte("hello, world")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Chunk(r, text, ChunkText); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// reportCPU locks the benchmark to its thread and returns the func that
// reports the thread's CPU time per op ("cpu-ns/op"): on a machine other
// processes load, wall time counts the waits for a CPU, and an A/B
// comparison of a few percent drowns in them. The guest runs on the
// calling goroutine, so the thread's time is the callback's, less the
// garbage collector's background work.
//
//	defer reportCPU(b)()
func reportCPU(b *testing.B) func() {
	runtime.LockOSThread()
	cpu0, ok := threadCPUTime()
	return func() {
		if cpu1, ok1 := threadCPUTime(); ok && ok1 && b.N > 0 {
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
		}
		runtime.UnlockOSThread()
	}
}
