package proxy

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// The older HTTP+SSE transport (MCP 2024-11-05), for servers configured
// with transport: sse (docs/POLICY.md, "MCP servers"; docs/adr/0029).
// GET /mcp/{name}/sse opens the server's event stream; its endpoint event
// is rewritten to /mcp/{name}/message?endpoint=TOKEN, the token carrying
// the server's message path and query (mcp.RewriteEndpointEvent), and
// every POST there is read, checked and metered as a Streamable HTTP POST
// is, then forwarded to that path on the configured origin. The gateway
// keeps no state a POST needs: any replica forwards it. What travels on
// the stream — the replies to the POSTs — is the GET's: the tools lists
// in it are filtered by the GET tenant's plan.

// mcpLeg is which request of a server's transport a path names.
type mcpLeg uint8

const (
	// mcpStreamable is /mcp/{name}: Streamable HTTP's POST, GET and DELETE.
	mcpStreamable mcpLeg = iota
	// mcpSSEStream is /mcp/{name}/sse: the HTTP+SSE transport's stream.
	mcpSSEStream
	// mcpSSEMessage is /mcp/{name}/message: its POSTs.
	mcpSSEMessage
)

// mcpEndpointParam is the message URL's query parameter holding the
// server's endpoint token.
const mcpEndpointParam = "endpoint"

// mcpSSE is what an exchange keeps of a request's transport.
type mcpSSE struct {
	leg mcpLeg
	// target is a message POST's path and query on the server, read from
	// its endpoint token.
	target string
}

// mcpTransport checks the request against its server's transport — its
// path, its method, a message POST's endpoint token — and notes the
// target of a message POST; false when it was answered.
func (x *exchange) mcpTransport(ctx *fasthttp.RequestCtx) bool {
	m := &x.mcp
	leg := m.sse.leg
	if m.srv.sse != (leg != mcpStreamable) {
		writeError(ctx, mcpWrongTransport(m.srv))
		return false
	}
	switch leg {
	case mcpStreamable:
		if !ctx.IsPost() && !ctx.IsGet() && !ctx.IsDelete() {
			writeError(ctx, methodNotAllowed(ctx, "POST, GET, DELETE"))
			return false
		}
	case mcpSSEStream:
		if !ctx.IsGet() {
			writeError(ctx, methodNotAllowed(ctx, "GET"))
			return false
		}
		// What the gateway relays is the server's event stream,
		// whatever else the client's Accept would take.
		ctx.Request.Header.Set("Accept", "text/event-stream")
	case mcpSSEMessage:
		if !ctx.IsPost() {
			writeError(ctx, methodNotAllowed(ctx, "POST"))
			return false
		}
		target, err := m.srv.key.ParseToken(ctx.QueryArgs().Peek(mcpEndpointParam), m.srv.name)
		if err != nil {
			writeError(ctx, &openai.Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_mcp_endpoint",
				Message: fmt.Sprintf("The %q parameter of this URL is missing or not one the gateway gave: POST to the URL of the endpoint event of GET %s/sse.", mcpEndpointParam, m.srv.label)})
			return false
		}
		m.sse.target = target
	}
	return true
}

func mcpWrongTransport(ms *mcpServer) *openai.Error {
	msg := fmt.Sprintf("The MCP server %q speaks the Streamable HTTP transport: send its requests to %s.", ms.name, ms.label)
	if ms.sse {
		msg = fmt.Sprintf("The MCP server %q speaks the HTTP+SSE transport: open its stream with GET %s/sse.", ms.name, ms.label)
	}
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url", Message: msg}
}

// path is the request's path on the server (upstream.Request's Path).
func (m *mcpState) path() string {
	if m.sse.leg == mcpSSEMessage {
		return m.sse.target
	}
	return m.srv.path
}

// sseRefused answers the refusal e of a request POSTed on the HTTP+SSE
// transport, whose client reads replies on its stream and not in a
// POST's reply: when this gateway relays the session's stream to the same
// tenant, e goes into the stream as the request's JSON-RPC error and the
// POST gets the 202 a server answers a message with; otherwise, the POST
// gets e as an HTTP error (the client's send fails). false when e is not
// for a request, or is a 401: answered as on Streamable HTTP.
func (x *exchange) sseRefused(ctx *fasthttp.RequestCtx, e *openai.Error) bool {
	m := &x.mcp
	if !m.isRequest() || e.Status == fasthttp.StatusUnauthorized {
		return false
	}
	ev := appendRefusalEvent(nil, m.rpcID, e, replyRetryAfter(ctx))
	if x.s.sse.deliver(sseKey{m.srv.name, m.sse.target}, x.tenantID(), ev) {
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		return true
	}
	writeError(ctx, e)
	return true
}

// sseKey names a session's stream: its server and the target of its
// endpoint event, which holds the session.
type sseKey struct{ server, target string }

// sseStreams are the HTTP+SSE streams this gateway relays, by session:
// where the refusals of the session's POSTs go. Its zero value is ready.
type sseStreams struct {
	mu sync.Mutex
	m  map[sseKey]*sseRelay
}

func (s *sseStreams) add(k sseKey, r *sseRelay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[sseKey]*sseRelay{}
	}
	s.m[k] = r
}

// remove forgets k's stream if it is r (a later stream may hold k).
func (s *sseStreams) remove(k sseKey, r *sseRelay) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[k] == r {
		delete(s.m, k)
	}
}

// deliver queues the event ev into k's stream when tenant's stream is
// here and not too far behind; false otherwise. ev is the stream's.
func (s *sseStreams) deliver(k sseKey, tenant string, ev []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.m[k]
	if r == nil || r.tenant != tenant {
		return false
	}
	select {
	case r.refusals <- ev:
		return true
	default:
		return false
	}
}

// sseRelay is an HTTP+SSE server stream as the client's response body.
// Each event is relayed once whole: the endpoint event rewritten (one the
// gateway refuses ends the stream, with a warning), a response listing
// tools filtered by the GET tenant's plan, and the gateway's refusals of
// the session's POSTs that reach this replica put in between the
// server's events. A goroutine reads the server, so a refusal does not
// wait for the server's next event. An incomplete event at the stream's
// end is dropped, as SSE clients drop it. Close, and the bookkeeping
// Close reads, are mcpRelay's.
type sseRelay struct {
	mcpRelay
	streams  *sseStreams
	key      sseKey // zero until the endpoint event
	tenant   string // the GET's
	refusals chan []byte
	chunks   chan sseChunk
	acks     chan struct{} // a chunk was copied: the reader may read again
	stop     chan struct{} // closed by Close
	pumped   chan struct{} // closed when the reader is done
}

// sseChunk is one read of the server's stream.
type sseChunk struct {
	b   []byte
	err error
}

// maxSSERefusals bounds the refusals queued for a stream the client
// reads slowly; past it, a POST's refusal is its HTTP error.
const maxSSERefusals = 16

// newSSERelay starts relaying the server's stream x.ex.
func (x *exchange) newSSERelay(rctx context.Context) *sseRelay {
	r := &sseRelay{
		mcpRelay: mcpRelay{x: x, rctx: rctx, filter: true},
		streams:  &x.s.sse,
		tenant:   x.tenantID(),
		refusals: make(chan []byte, maxSSERefusals),
		chunks:   make(chan sseChunk),
		acks:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		pumped:   make(chan struct{}),
	}
	go r.pump()
	return r
}

// pump reads the server's stream until its end or Close.
func (r *sseRelay) pump() {
	defer close(r.pumped)
	buf := make([]byte, 16<<10)
	for {
		n, err := r.x.ex.Read(buf)
		select {
		case r.chunks <- sseChunk{buf[:n], err}:
		case <-r.stop:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-r.acks:
		case <-r.stop:
			return
		}
	}
}

func (r *sseRelay) Read(p []byte) (int, error) {
	for {
		if n := r.give(p); n > 0 {
			return n, nil
		}
		if r.eof {
			return 0, io.EOF
		}
		if r.err != nil {
			return 0, r.err
		}
		select {
		case ev := <-r.refusals:
			r.pend = append(r.pend, ev...)
		case c := <-r.chunks:
			r.buf = append(r.buf, c.b...)
			r.acks <- struct{}{}
			r.events()
			switch {
			case r.err != nil: // an endpoint refused
			case c.err != nil:
				r.buf = r.buf[:0]
				r.ended(c.err)
			case len(r.buf) > maxMCPEvent:
				r.ended(upstream.ErrUnreachable) // an event too large to check is not relayed unchecked
				r.buf = r.buf[:0]
			}
		}
	}
}

// events moves the whole events of r.buf, checked, to r.pend.
func (r *sseRelay) events() {
	x, m := r.x, &r.x.mcp
	rest := r.buf
	for {
		ev, more, ok := mcp.CutEvent(rest)
		if !ok {
			break
		}
		rest = more
		var target string
		var err error
		r.pend, target, err = mcp.RewriteEndpointEvent(r.pend, ev, m.srv.url, m.srv.message, m.srv.key, m.srv.name)
		switch {
		case err != nil:
			x.s.log.Warn("mcp: the server's stream is ended: its endpoint is refused", "server", m.srv.name, "request_id", string(x.id), "err", err)
			r.ended(err)
			r.buf = r.buf[:0]
			return
		case target != "":
			r.streams.remove(r.key, r) // a second endpoint event moves the session
			r.key = sseKey{m.srv.name, target}
			r.streams.add(r.key, r)
		default:
			var changed bool
			if m.allow != nil {
				r.pend, changed = m.tf.FilterStreamEvent(r.pend, ev, m.allow)
			}
			if !changed && m.guard {
				r.pend, changed = x.mcpGuardEvent(r.pend, ev) // a tool's output (mcp_guard.go)
			}
			if !changed {
				r.pend = append(r.pend, ev...)
			}
		}
	}
	r.buf = r.buf[:copy(r.buf, rest)]
}

// Close stops the reader — cutting the server's stream if the client is
// the one gone — then ends the exchange as mcpRelay does.
func (r *sseRelay) Close() error {
	close(r.stop)
	select {
	case <-r.pumped:
	default:
		r.x.exCancel(ErrClientGone)
		<-r.pumped
	}
	r.streams.remove(r.key, r)
	return r.mcpRelay.Close()
}
