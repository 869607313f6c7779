package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// maxMCPEvent bounds an event a filtered stream holds while it arrives.
const maxMCPEvent = maxResponseBytes

// mcpRelay is a server's event stream as the client's response body:
// relayed as it arrives (fasthttp flushes each Read's bytes as a chunk).
// With filter (a tools/list reply, or a reply the chunk phase guards,
// mcp_guard.go) it holds each event until it is whole and filters or
// guards it. A stream the gateway cuts (a cancel, the server gone)
// ends, for a request, with a JSON-RPC error event for its id, so the
// client's call fails with the reason rather than waiting. Close ends the
// exchange.
type mcpRelay struct {
	x      *exchange
	rctx   context.Context
	filter bool
	buf    []byte // filter: bytes of an event not yet whole
	pend   []byte // bytes to give the client before reading more
	n      int64  // bytes relayed
	eof    bool
	err    error
	told   bool // the request's error event was queued
}

func (r *mcpRelay) Read(p []byte) (int, error) {
	for {
		if n := r.give(p); n > 0 {
			return n, nil
		}
		if r.eof || r.told {
			return 0, io.EOF // the stream's end, or the error event's
		}
		if r.err != nil {
			return 0, r.err
		}
		n, err := r.x.ex.Read(p)
		if !r.filter {
			r.n += int64(n)
			if err != nil {
				r.ended(err)
				if !r.eof && len(r.pend) > 0 {
					return n, nil // the error event follows
				}
			}
			return n, err
		}
		r.buf = append(r.buf, p[:n]...)
		r.cutEvents()
		if err != nil {
			r.pend, r.buf = append(r.pend, r.buf...), r.buf[:0] // an incomplete last event, as it came
			r.ended(err)
		} else if len(r.buf) > maxMCPEvent {
			r.ended(upstream.ErrUnreachable) // an event too large to filter is not relayed unfiltered
			r.buf = r.buf[:0]
		}
	}
}

// give copies what of r.pend fits into p, and counts it relayed; 0 when
// nothing is pending (or p is empty).
func (r *mcpRelay) give(p []byte) int {
	n := copy(p, r.pend)
	r.pend = r.pend[:copy(r.pend, r.pend[n:])]
	r.n += int64(n)
	return n
}

// cutEvents moves the whole events of r.buf, filtered, to r.pend.
func (r *mcpRelay) cutEvents() {
	m := &r.x.mcp
	rest := r.buf
	for {
		ev, more, ok := mcp.CutEvent(rest)
		if !ok {
			break
		}
		var changed bool
		if m.allow != nil {
			r.pend, changed = m.tf.FilterEvent(r.pend, ev, m.rpcID, m.allow)
		} else {
			r.pend, changed = r.x.mcpGuardEvent(r.pend, ev)
		}
		if !changed {
			r.pend = append(r.pend, ev...)
		}
		rest = more
	}
	r.buf = r.buf[:copy(r.buf, rest)]
}

// ended notes the end of the server's stream: at its end (io.EOF) or
// cut by err. A request's cut stream gets its JSON-RPC error event.
func (r *mcpRelay) ended(err error) {
	if err == io.EOF {
		r.eof = true
		return
	}
	r.err = err
	x := r.x
	if !x.mcp.isRequest() {
		return
	}
	e := mcpStreamError(x.client, err, context.Cause(r.rctx))
	if e == nil {
		return // the client is gone
	}
	r.told = true
	r.pend = appendRefusalEvent(r.pend, x.mcp.rpcID, e, 0)
}

// mcpStreamError is the error a stream cut by err (with its context's
// cause) reports to a request; nil when the client is gone.
func mcpStreamError(c *upstream.Client, err, cause error) *openai.Error {
	switch {
	case errors.Is(cause, ErrClientGone):
		return nil
	case errors.Is(cause, ErrCancelled):
		return stream.Cancelled()
	case errors.Is(cause, ErrShuttingDown):
		return &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
			Message: "The gateway is shutting down; retry the request."}
	case errors.Is(err, upstream.ErrTimeout):
		return openai.UpstreamTimeout(fmt.Sprintf("The MCP server %q stopped answering in time.", c.Name()))
	}
	return openai.UpstreamUnreachable(fmt.Sprintf("The MCP server %q broke off its reply.", c.Name()))
}

// Close ends the exchange once fasthttp has written the body, or stopped.
func (r *mcpRelay) Close() error {
	var flags uint32
	cause := context.Cause(r.rctx)
	switch {
	case r.eof:
		flags = wasmhost.EndCompleted
	case errors.Is(cause, ErrCancelled):
		flags = wasmhost.EndCancelled
	case r.err == nil, errors.Is(r.err, upstream.ErrCanceled):
		flags = wasmhost.EndClientGone
	default:
		flags = wasmhost.EndUpstreamError
	}
	if flags == wasmhost.EndCancelled {
		r.x.mcpCancelled(cause)
	}
	r.x.mcpReplied(r.n)
	r.x.StreamClosed(r.x.mcp.mcpEndFlags(flags), openai.Usage{})
	return nil
}
