package wasmhost

import (
	"context"
	"runtime"
	"testing"
)

// hostAnswers answers every dispatched call at once as a host text
// service admitting the request would: status 0, "allowed".
type hostAnswers struct{}

func (hostAnswers) Call(*Request, string, []byte) ([]byte, error) { return []byte("allowed"), nil }
func (hostAnswers) Check(*Request, string, string, []byte) error  { return nil }
func (hostAnswers) Start(_ *Request, c *Call)                     { c.Finish(CallResult{Body: []byte("allowed")}) }

// BenchmarkExpectedAnswer is what expect_response saves a deferring
// plugin whose host service answers as expected: the answer delivered to
// on_call_response ("delivered"), or consumed by the host ("expected");
// "none" is a callback that dispatches nothing. The service answers
// inline, so the work is the benchmark's thread's: cpu-ns/op is its CPU
// time (not counting waits for a CPU on a loaded machine).
//
//	go test -run XXX -bench ExpectedAnswer -count 6 ./wasmhost | benchstat -
func BenchmarkExpectedAnswer(b *testing.B) {
	for _, bc := range []struct{ name, config string }{
		{"none", `{"request":"continue"}`},
		{"delivered", `{"request":["dispatch:svc=a","defer"],"call_response":"continue"}`},
		{"expected", `{"request":["dispatch:svc=a","expect:allowed","defer"],"call_response":"continue"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl, err := NewPipeline(context.Background(), testHost(b), []Spec{{Name: "w", Module: testPlugin(b), Config: []byte(bc.config)}})
			if err != nil {
				b.Fatal(err)
			}
			defer pl.Close()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, cpuOK := threadCPUTime()
			for range b.N {
				r := request(`{}`)
				r.Services = hostAnswers{}
				if err := pl.Request(r); err != nil {
					b.Fatal(err)
				}
				ReleaseRequest(r)
			}
			if cpu1, ok := threadCPUTime(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}
