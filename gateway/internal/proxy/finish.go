package proxy

import (
	"runtime"
	"sync/atomic"
	"time"
)

// The end of an exchange — the end phase and the call-log row — runs after
// the reply is out, off the client's path: fasthttp writes a non-streamed
// reply once the handler returns, and flushes a stream's last chunk only
// after the body's Close. (Settling rate limits and budget is not deferred:
// exact counters as a client sees them are worth a round trip.)
// A fixed set of finisher goroutines takes ended exchanges from a bounded
// queue; when the queue is full the request's own goroutine does the work
// (back-pressure, nothing dropped).
type finisher struct {
	ch      chan *exchange
	pending atomic.Int64 // queued or running
	closed  atomic.Bool
}

const finishQueue = 4096

func newFinisher() *finisher {
	f := &finisher{ch: make(chan *exchange, finishQueue)}
	// The work waits on Redis and the ledger queue more than it computes.
	for i := 0; i < 4*runtime.GOMAXPROCS(0); i++ {
		go func() {
			for x := range f.ch {
				x.finish()
				f.pending.Add(-1)
			}
		}()
	}
	return f
}

// close waits (within timeout) until every queued exchange is finished;
// exchanges that end later are finished inline.
func (f *finisher) close(timeout time.Duration) {
	f.closed.Store(true)
	for end := time.Now().Add(timeout); f.pending.Load() > 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
}

// end settles the request's rate limits and budget (before the reply's
// last byte: the counters a client sees next are corrected) and marks the
// exchange ended; the rest of its end work runs when it is released.
// Client request headers are not readable from then on (the connection's
// next request reuses them).
func (x *exchange) end(flags uint32, status int) {
	x.ended, x.endFlags, x.endStatus = true, flags, status
	x.total = time.Since(x.start)
	x.releaseUpstream() // the upstream's slot (max_concurrent) is free again
	if x.wr != nil {
		x.wr.ClientHeader = nil
	}
	x.settle(flags)
}

// release hands an ended exchange to a finisher, or frees it.
func (x *exchange) release() {
	if !x.ended {
		x.free()
		return
	}
	f := x.s.fin
	if !f.closed.Load() {
		f.pending.Add(1)
		select {
		case f.ch <- x:
			return
		default:
			f.pending.Add(-1)
		}
	}
	x.finish()
}

// finish runs the end work, ends the upstream exchange a stream kept for
// the end phase's header reads, and frees x.
func (x *exchange) finish() {
	x.runEnd(x.endFlags, x.endStatus)
	if x.ex != nil {
		if x.wr != nil {
			x.wr.UpstreamHeader = nil
		}
		x.ex.Release()
		x.ex = nil
	}
	if x.exCancel != nil {
		x.exCancel(nil)
		x.exCancel = nil
	}
	x.free()
}
