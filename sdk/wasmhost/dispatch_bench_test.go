package wasmhost

import (
	"context"
	"sync"
	"testing"
	"time"
)

// BenchmarkWaitingCalls serves requests whose plugin waits 20 ms on a
// service, 32 at a time, on a pool of 2 instances: with `call` the
// instance waits too, and throughput is capped at instances ÷ wait
// (100 requests/s); a dispatched call holds no instance while it waits
// (docs/adr/0016).
//
//	go test -run XXX -bench WaitingCalls -benchtime 200x ./wasmhost
func BenchmarkWaitingCalls(b *testing.B) {
	const wait = 20 * time.Millisecond
	for _, bc := range []struct{ name, config string }{
		{"call", `{"request":"call:svc"}`},
		{"dispatch", `{"request":["dispatch:svc=a","pause"],"call_response":"continue"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl, err := NewPipeline(context.Background(), testHost(b), []Spec{{Name: "w", Module: testPlugin(b),
				Config: []byte(bc.config), Instances: 2, PoolWait: time.Minute}})
			if err != nil {
				b.Fatal(err)
			}
			defer pl.Close()
			svc := &waitingServices{wait: wait}
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						r := request(`{}`)
						r.Services = svc
						if err := pl.Request(r); err != nil {
							b.Error(err)
						}
						ReleaseRequest(r)
					}
				}()
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "requests/s")
			b.ReportMetric(float64(pl.Plugins()[0].Stats().InstancesCreated.Load()), "instances")
		})
	}
}

// waitingServices waits on every call, in Call (the `call` import and
// the fallback) or, dispatched, asynchronously.
type waitingServices struct{ wait time.Duration }

func (s *waitingServices) Call(*Request, string, []byte) ([]byte, error) {
	time.Sleep(s.wait)
	return []byte("ok"), nil
}

func (s *waitingServices) Check(*Request, string, string, []byte) error { return nil }

func (s *waitingServices) Start(_ *Request, c *Call) {
	if s.wait == 0 {
		c.Finish(CallResult{Status: 200, Body: []byte("ok")})
		return
	}
	time.AfterFunc(s.wait, func() { c.Finish(CallResult{Status: 200, Body: []byte("ok")}) })
}

// BenchmarkDispatchCost is what a dispatched call costs a request, with a
// service that answers at once: against a callback alone ("none"), a
// second guest callback (and an instance checked out for it), the call's
// bookkeeping and context. ("call" is the testplugin's `call` action,
// which also sets a response header from the result.)
func BenchmarkDispatchCost(b *testing.B) {
	for _, bc := range []struct{ name, config string }{
		{"none", `{"request":"continue"}`},
		{"call", `{"request":"call:svc"}`},
		{"dispatch", `{"request":["dispatch:svc=a","pause"],"call_response":"continue"}`},
		{"defer", `{"request":["dispatch:svc=a","defer"],"call_response":"continue"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			pl, err := NewPipeline(context.Background(), testHost(b), []Spec{{Name: "w", Module: testPlugin(b), Config: []byte(bc.config)}})
			if err != nil {
				b.Fatal(err)
			}
			defer pl.Close()
			svc := &waitingServices{}
			b.ReportAllocs()
			defer reportCPU(b)()
			b.ResetTimer()
			for range b.N {
				r := request(`{}`)
				r.Services = svc
				if err := pl.Request(r); err != nil {
					b.Fatal(err)
				}
				ReleaseRequest(r)
			}
		})
	}
}
