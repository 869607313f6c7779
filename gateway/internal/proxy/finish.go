package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sockio"
)

// The end of an exchange — the end phase, metrics, the access log and the
// call-log row — runs after the reply is out, off the client's path, and on
// the connection's own goroutine: fasthttp writes a non-streamed reply once
// the handler returns and flushes a stream's last chunk only after the
// body's Close, so release parks the ended exchange on its connection and
// the server's ConnState hook finishes it when the connection turns idle
// (the reply flushed, the next request not yet read) or closes. No hand-off
// to another goroutine: at low concurrency waking one costs more than the
// work (a futex wake and a second thread polling), and a connection's next
// request waiting for its previous one's end work is the back-pressure a
// bounded queue would apply. (Settling rate limits and budget is not
// deferred at all: exact counters as a client sees them are worth a round
// trip.)
type finisher struct {
	pending atomic.Int64 // parked on a connection or running
	closed  atomic.Bool
}

// clientConn is a client connection as the server sees it; ended is the
// exchange whose end work waits for the reply to be flushed.
type clientConn struct {
	net.Conn
	ended *exchange
	watch watchState // the disconnect watch (watch_linux.go)
	ahead readAhead  // read-ahead of small reads (readahead_linux.go)
}

// finishEnded runs the end work parked on cc (nil: none); the ConnState
// hook calls it.
func (f *finisher) finishEnded(cc *clientConn) {
	if cc == nil || cc.ended == nil {
		return
	}
	x := cc.ended
	cc.ended = nil
	x.finish()
	f.pending.Add(-1)
}

// connListener hands the server clientConns, under TLS when tls is set.
type connListener struct {
	net.Listener
	tls *tls.Config
}

func (l connListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c = sockio.New(c)
	if l.tls != nil {
		// TLS over the raw-syscall socket (docs/adr/0006): the record
		// layer's reads and writes keep that path. The handshake runs at
		// the connection's first read, on its own goroutine, not here.
		c = tls.Server(c, l.tls)
	}
	return &clientConn{Conn: c}, nil
}

// close waits (within timeout) until every parked exchange is finished;
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
	x.storeReply(flags, status)
	x.logAhead(flags, status)
}

// startExchange takes a pooled exchange for a request to endpoint ep,
// started now, and names the request (X-Request-Id, the client's or a new
// one) in the reply.
func (s *Server) startExchange(ctx *fasthttp.RequestCtx, ep openai.Endpoint) *exchange {
	x := exchangePool.Get().(*exchange)
	x.s, x.ep = s, ep
	x.conn, _ = ctx.Conn().(*clientConn)
	x.start, x.firstByte = time.Now(), -1
	x.up.TTFT, x.upSent = -1, 0
	x.id = s.requestID(ctx, x.id[:0])
	ctx.Response.Header.SetBytesV("X-Request-Id", x.id)
	return x
}

// releaseUnstreamed is deferred by every handler: an exchange whose reply
// is not a stream (a stream's relay releases it when it closes) withholds
// what could not be logged and is released when the handler returns.
//
// A panic on its way out of forward (a bug; Server.survive answers it)
// passes through here: the exchange lets go of what would leak, then the
// panic goes on.
func (x *exchange) releaseUnstreamed(ctx *fasthttp.RequestCtx, streamed *bool) {
	if p := recover(); p != nil {
		if !*streamed { // a stream's Close, when the handler's recovery resets the response, ends it
			x.abandon()
		}
		panic(p)
	}
	if !*streamed {
		x.withholdUnlogged(ctx)
		x.release()
	}
}

// errPanicked is the cancel cause of an upstream reply abandoned because
// the request's handling panicked.
var errPanicked = errors.New("the request's handling panicked")

// abandon lets go, for a request whose handling panicked, of what would
// otherwise leak: its place in flight and in the cancel registry, the
// disconnect watch, the upstream reply, whose connection is closed rather
// than reused, and the policy state it held (a shutdown waits for every
// state). Its end work does not run (it would read what the panic left),
// and x is not reused.
func (x *exchange) abandon() {
	x.leave()
	x.dropUpstream(errPanicked)
	x.abandonTrace()
	if x.st != nil {
		x.st.release()
		x.st = nil
	}
}

// release parks an ended exchange on its client connection (finished once
// the reply is flushed), or finishes it at once when there is none or the
// server is stopping; an exchange that did not end is freed.
func (x *exchange) release() {
	if !x.ended {
		x.free()
		return
	}
	f := x.s.fin
	if c := x.conn; c != nil && c.ended == nil && !f.closed.Load() {
		f.pending.Add(1)
		c.ended = x
		return
	}
	x.finish()
}

// finish runs the end work, ends the upstream exchange a stream kept for
// the end phase's header reads, and frees x.
func (x *exchange) finish() {
	x.runEnd(x.endFlags, x.endStatus)
	x.dropUpstream(nil)
	x.free()
}

// openUpstream starts the request's time with the upstreams: it is counted
// in flight, listed in the cancel registry and its client watched for a
// disconnect, all three under the returned context's cancel. Every path
// out goes through closeUpstream (or, for a stream, leave at its Close and
// dropUpstream once its end work ran).
func (x *exchange) openUpstream(ctx *fasthttp.RequestCtx) context.Context {
	s := x.s
	s.inflight.Add(1)
	rctx, cancel := context.WithCancelCause(s.base)
	x.exCancel, x.inFlight = cancel, true
	x.cancelKey = s.cancels.Add(x.id, x.tenantID(), cancel, cancels.Info{Model: string(x.req.Model), Stream: x.req.Stream, Started: x.start})
	x.watch = watchClient(ctx.Conn(), cancel)
	return rctx
}

// closeUpstream ends the request's time with the upstreams at once: leave,
// then dropUpstream. abandon (nil: none) is the cancel cause of a reply
// not read to its end, whose connection must not be reused.
func (x *exchange) closeUpstream(abandon error) {
	x.leave()
	x.dropUpstream(abandon)
}

// leave stops the disconnect watch and takes the request out of the
// in-flight count and the cancel registry.
func (x *exchange) leave() {
	x.watch.stop()
	x.watch = nil
	if x.inFlight {
		x.inFlight = false
		x.s.cancels.Remove(x.cancelKey)
		x.s.inflight.Add(-1)
	}
}

// dropUpstream releases the upstream exchange and cancels the request's
// context. The release comes first (a cancel before it would close a
// connection fit for reuse) unless abandon says the reply was abandoned.
func (x *exchange) dropUpstream(abandon error) {
	if abandon != nil && x.exCancel != nil {
		x.exCancel(abandon)
	}
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
}
