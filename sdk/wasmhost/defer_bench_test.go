package wasmhost

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDeferredBatch serves requests through two plugins that each
// make one call to a store with a round trip of 2 ms, which serves a
// batch in one round trip: PAUSE waits twice, one plugin after the other;
// DEFER starts both calls in one batch and waits once.
//
//	go test -run XXX -bench DeferredBatch -benchtime 200x ./wasmhost
func BenchmarkDeferredBatch(b *testing.B) {
	const trip = 2 * time.Millisecond
	for _, verdict := range []string{"pause", "defer"} {
		b.Run(verdict, func(b *testing.B) {
			pl := pluginPipeline(b,
				plugin{config: `{"request":["dispatch:admit=a","` + verdict + `"],"call_response":"continue"}`},
				plugin{config: `{"request":["dispatch:hold=b","` + verdict + `"],"call_response":"continue"}`})
			svc := &roundTrips{waitingServices: waitingServices{wait: trip}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r := request(`{}`)
				r.Services = svc
				if err := pl.Request(r); err != nil {
					b.Fatal(err)
				}
				ReleaseRequest(r)
			}
			b.ReportMetric(float64(svc.trips.Load())/float64(b.N), "trips/request")
		})
	}
}

// roundTrips answers a call, or a batch of calls, after one round trip,
// and counts the trips.
type roundTrips struct {
	waitingServices
	trips atomic.Int64
}

func (s *roundTrips) Start(r *Request, c *Call) {
	s.trips.Add(1)
	s.waitingServices.Start(r, c)
}

func (s *roundTrips) StartBatch(_ *Request, calls []*Call) {
	s.trips.Add(1)
	time.AfterFunc(s.wait, func() {
		for _, c := range calls {
			c.Finish(CallResult{Status: 200, Body: []byte("ok")})
		}
	})
}
