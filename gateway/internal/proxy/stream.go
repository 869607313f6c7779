package proxy

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// maxEventBytes bounds one SSE event from an upstream.
const maxEventBytes = 1 << 20

// sseStream is the body of a streamed reply. fasthttp calls Read from the
// connection's goroutine and writes and flushes one HTTP chunk per Read, so
// each Read returns the events already at hand and no more: an event is
// flushed to the client as soon as it arrives, and events that arrived
// together go out in one write. Events the gateway does not change are
// forwarded as the upstream's own bytes.
//
// Each event is parsed once into chunk, the structure later phases read.
type sseStream struct {
	srv    *Server
	ex     *upstream.Exchange
	watch  *clientWatch
	ctx    context.Context
	cancel context.CancelCauseFunc

	rd     *sse.Reader
	parser openai.ChunkParser
	chunk  openai.Chunk
	data   []byte

	// pending is the part of the current event not yet handed to fasthttp;
	// it borrows rd's buffer, so Next is not called while it is non-empty.
	pending []byte
	tail    []byte // a final event the gateway wrote (an error)

	stripUsage bool // drop the usage-only chunk the client did not ask for
	sawDone    bool
	finished   bool

	// usage is the last usage the upstream reported.
	usage openai.Usage
}

var streamPool = sync.Pool{New: func() any { return &sseStream{rd: sse.NewReader(nil, maxEventBytes)} }}

func acquireStream(srv *Server, ex *upstream.Exchange, watch *clientWatch, ctx context.Context, cancel context.CancelCauseFunc, stripUsage bool) *sseStream {
	st := streamPool.Get().(*sseStream)
	st.srv, st.ex, st.watch, st.ctx, st.cancel, st.stripUsage = srv, ex, watch, ctx, cancel, stripUsage
	st.rd.Reset(ex)
	return st
}

// Read implements io.Reader for fasthttp's chunked body writer.
func (st *sseStream) Read(p []byte) (int, error) {
	if len(st.pending) > 0 {
		n := copy(p, st.pending)
		st.pending = st.pending[n:]
		return n, nil
	}
	if st.finished {
		if len(st.tail) > 0 {
			n := copy(p, st.tail)
			st.tail = st.tail[n:]
			return n, nil
		}
		return 0, io.EOF
	}
	n := 0
	for {
		raw, err := st.rd.Next()
		if err != nil {
			st.finish(err)
			return n, nil
		}
		if st.observe(raw) {
			if n > 0 && !st.rd.Buffered() {
				return n, nil
			}
			continue
		}
		c := copy(p[n:], raw)
		n += c
		if c < len(raw) {
			st.pending = raw[c:]
			return n, nil
		}
		if n == len(p) || !st.rd.Buffered() {
			return n, nil
		}
	}
}

// observe parses one event and reports whether it is to be dropped.
func (st *sseStream) observe(raw []byte) (drop bool) {
	var ok bool
	st.data, ok = sse.AppendData(st.data[:0], raw)
	if !ok {
		return false
	}
	if sse.IsDone(st.data) {
		st.sawDone = true
		return false
	}
	if st.parser.Parse(st.data, &st.chunk) != nil {
		return false // not ours to judge: forwarded as sent
	}
	if st.chunk.Usage.Present {
		st.usage = st.chunk.Usage
	}
	return st.stripUsage && st.chunk.IsUsageOnly()
}

// finish ends the stream after the upstream's last read. A clean end is
// forwarded as is; a broken one gets a final OpenAI-style error event so the
// client knows the reply is incomplete.
func (st *sseStream) finish(err error) {
	st.finished = true
	if errors.Is(err, io.EOF) {
		return
	}
	cause := context.Cause(st.ctx)
	if errors.Is(cause, ErrClientGone) {
		return
	}
	var e *openai.Error
	switch {
	case errors.Is(cause, ErrShuttingDown):
		e = &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down",
			Message: "The gateway is shutting down and ended this stream before the upstream finished."}
	case errors.Is(err, upstream.ErrTimeout):
		e = &openai.Error{Status: 504, Type: "upstream_error", Code: "upstream_timeout",
			Message: "The upstream stopped sending before the reply was complete."}
	case errors.Is(err, sse.ErrEventTooLarge):
		e = &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_bad_response",
			Message: "The upstream sent an event larger than the gateway accepts."}
	default:
		e = &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_stream_error",
			Message: "The upstream connection broke before the reply was complete."}
	}
	st.srv.log.Warn("stream ended early", "upstream", st.ex.Upstream(), "err", err, "cause", cause)
	st.tail = append(st.tail[:0], "data: "...)
	st.tail = e.AppendJSON(st.tail)
	st.tail = append(st.tail, "\n\n"...)
}

// Close implements io.Closer; fasthttp calls it once the body is written or
// the client is gone. It ends the upstream exchange (closing its connection
// unless the body was read to the end) and frees the stream.
func (st *sseStream) Close() error {
	st.watch.stop()
	st.ex.Release()
	st.cancel(nil)
	st.srv.inflight.Add(-1)
	st.rd.Reset(nil)
	st.srv, st.ex, st.watch, st.ctx, st.cancel = nil, nil, nil, nil, nil
	st.pending, st.tail = nil, st.tail[:0]
	st.sawDone, st.finished, st.stripUsage = false, false, false
	st.usage = openai.Usage{}
	streamPool.Put(st)
	return nil
}
