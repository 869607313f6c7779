package proxy

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// mcpState is what an exchange keeps for an MCP request (mcp.go).
type mcpState struct {
	srv *mcpServer
	rd  mcp.Reader
	// kind is the POSTed message's (0 for a GET or a DELETE); rpcID a
	// request's id as sent (nil: not a request).
	kind      mcp.Kind
	rpcID     []byte
	listTools bool   // a tools/list request: its reply is filtered by plan
	model     []byte // mcp:{server}, or mcp:{server}/{tool} for a tools/call
	// allow, when set, filters a tools/list reply by the tenant's plan.
	allow func(tool []byte) bool
	tf    mcp.ToolFilter
	relay mcpRelay
	req   upstream.Request
	out   []byte // a JSON-RPC error, or a filtered reply
	// session and proto are a request's Mcp-Session-Id and
	// Mcp-Protocol-Version, kept to tell the server of a cancel after
	// the client's headers are gone.
	session, proto []byte
	// refacts checks a body a plugin rewrote (mcpRefacts); params
	// follows the rewrite into the Mcp-Param-* headers, built in hdr.
	refacts func(*wasmhost.Request) error
	params  mcp.ParamRewrites
	hdr     []byte
	scratch []byte
	sse     mcpSSE // the request's transport (mcp_sse.go)
	// method is a request's method as the guard tells them apart
	// (mcpMethod); guard is set when its reply runs the chunk phase
	// (mcp_guard.go), which reads it with res, an event's message in
	// data and msg; stopped: a plugin withheld a result.
	method    uint8
	guard     bool
	res       mcp.Results
	data, msg []byte
	stopped   bool
}

func (m *mcpState) reset() {
	m.srv, m.kind, m.listTools, m.allow = nil, 0, false, nil
	m.method, m.guard, m.stopped = 0, false, false
	if cap(m.data) > 1<<20 || cap(m.msg) > 1<<20 {
		m.data, m.msg = nil, nil // nor a huge tool result
	}
	m.res.Shrink()
	m.rpcID, m.model, m.session, m.proto = m.rpcID[:0], m.model[:0], m.session[:0], m.proto[:0]
	if cap(m.out) > 1<<20 {
		m.out = nil // a huge tools list is not kept in the pool
	}
	m.out = m.out[:0]
	m.relay = mcpRelay{buf: m.relay.buf[:0], pend: m.relay.pend[:0]}
	if cap(m.relay.buf) > 1<<20 {
		m.relay.buf, m.relay.pend = nil, nil
	}
	m.req, m.sse = upstream.Request{}, mcpSSE{}
	if cap(m.hdr) > 64<<10 {
		m.hdr = nil
	}
}

// mcpServe serves one request to the MCP server name, at the path leg
// names.
func (s *Server) mcpServe(ctx *fasthttp.RequestCtx, name []byte, leg mcpLeg) {
	x := s.startExchange(ctx, endpointMCP)
	x.mcp.sse.leg = leg
	streamed := false
	defer x.releaseUnstreamed(ctx, &streamed)
	body, ok := x.readMCP(ctx, name)
	if !ok {
		return
	}
	x.startTrace(ctx)
	if pipe := x.st.pipeline; pipe != nil {
		x.startMCPPlugins(ctx, body)
		if pipe.Has(wasmhost.PhaseRequest) {
			if err := pipe.Request(x.wr); err != nil {
				x.mcpRefused(ctx, x.refusal(err), wasmhost.EndRejected)
				return
			}
		}
	}
	m := &x.mcp
	m.guard = x.mcpGuarded()
	if m.listTools || m.sse.leg == mcpSSEStream {
		if patterns, ok := x.svc.AllowedModels(); ok && len(patterns) > 0 {
			m.allow = m.tf.AllowTool(m.srv.name, patterns)
		}
	}
	rctx := x.openUpstream(ctx)
	x.upSent = time.Since(x.start)
	x.traceUpstreamStart()
	ex, err := x.sendMCP(ctx, rctx, body)
	x.ex = ex
	x.traceUpstreamEnd(ex, err)
	if x.wr != nil && x.try.name != nil {
		x.wr.Upstream = x.try.name
	}
	if err != nil {
		x.closeUpstream(nil)
		cause := context.Cause(rctx)
		x.mcpCancelled(cause)
		if e := s.upstreamError(ctx, x.client, err, cause); e != nil {
			x.mcpRefused(ctx, e, wasmhost.EndUpstreamError)
			return
		}
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		return
	}
	x.firstByte = time.Since(x.start)
	status := ex.StatusCode()
	if pipe := x.st.pipeline; pipe.Wants(x.wr, wasmhost.PhaseResponseHeaders) {
		x.wr.UpstreamHeader, x.wr.Status = ex.Header(), status
		if err := pipe.ResponseHeaders(x.wr, status); err != nil {
			x.closeUpstream(cancels.ErrPluginStopped)
			x.mcpRefused(ctx, x.refusal(err), wasmhost.EndRejected)
			return
		}
	}
	streamed = x.mcpReply(ctx, rctx, status)
}

// readMCP reads an MCP request up to its plugins — the state, the
// server, the method, a POST's message — and sets its model and route;
// false when it was answered already.
func (x *exchange) readMCP(ctx *fasthttp.RequestCtx, name []byte) (body []byte, ok bool) {
	if x.st = x.s.acquireState(); x.st == nil {
		writeError(ctx, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "The gateway is shutting down; retry the request."})
		return nil, false
	}
	m := &x.mcp
	if m.srv = x.st.mcp[string(name)]; m.srv == nil {
		writeError(ctx, unknownMCPServer(name))
		return nil, false
	}
	if !x.mcpTransport(ctx) {
		return nil, false
	}
	if ctx.IsPost() {
		body = ctx.PostBody()
		if !x.readMCPMessage(ctx, body) {
			return nil, false
		}
	} else {
		m.model = append(m.model[:0], m.srv.model...)
	}
	x.req = openai.Request{Model: m.model}
	x.route, x.modelLabel = m.srv.route, m.srv.modelLabel
	x.client = x.route.targets[0].client
	if err := x.st.acct.Ready(); err != nil {
		x.writeMCPError(ctx, callLogUnavailable()) // no row can be written: nothing is served
		return nil, false
	}
	return body, true
}

// readMCPMessage reads a POST's JSON-RPC message and its model; false when
// it was answered with a JSON-RPC error (HTTP 400: nothing was served).
func (x *exchange) readMCPMessage(ctx *fasthttp.RequestCtx, body []byte) bool {
	m := &x.mcp
	msg, e := m.rd.Read(body)
	m.kind = msg.Kind
	if msg.Kind == mcp.Request {
		m.rpcID = append(m.rpcID[:0], msg.ID...)
	}
	if e != nil {
		var id []byte
		if msg.Kind == mcp.Request {
			id = m.rpcID
		}
		m.out = mcp.AppendError(m.out[:0], id, e.Code, e.Message, nil)
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		ctx.SetContentType("application/json")
		ctx.SetBody(m.out)
		return false
	}
	m.model = mcp.AppendModel(m.model[:0], m.srv.name, msg.Tool)
	m.listTools = msg.Kind == mcp.Request && string(msg.Method) == "tools/list"
	if msg.Kind == mcp.Request {
		m.method = mcpMethod(msg.Method)
		m.session = append(m.session[:0], ctx.Request.Header.Peek("Mcp-Session-Id")...)
		m.proto = append(m.proto[:0], ctx.Request.Header.Peek("Mcp-Protocol-Version")...)
	}
	return true
}

// startMCPPlugins fills the plugins' view of an MCP request: its model,
// the endpoint "mcp", and the JSON-RPC message (read only: a message's
// method and tool are what the plan was checked against).
func (x *exchange) startMCPPlugins(ctx *fasthttp.RequestCtx, body []byte) {
	wr := wasmhost.AcquireRequest()
	wr.NoAnswer = true // the server's reply is not one the gateway can answer in
	wr.SetFacts(wasmhost.RequestFacts{Model: x.mcp.model, MaxTokens: -1})
	wr.Endpoint = mcpEndpointName
	wr.RequestID = x.id
	if body != nil {
		x.reqBody = append(x.reqBody[:0], body...)
		wr.Body = x.reqBody
		// A plugin may rewrite a tools/call's argument strings (a
		// redaction): the server is sent the rewritten body.
		if x.mcp.refacts == nil {
			x.mcp.refacts = x.mcpRefacts
		}
		wr.Refacts = x.mcp.refacts
		x.allowPassRewrites(wr)
	}
	wr.Upstream = x.route.targets[0].name
	wr.ClientHeader = &ctx.Request.Header
	wr.SetChain(x.route.chain)
	x.svc.Bind(x.st.services)
	wr.Services = &x.svc
	wr.Tracer = x.trace.CallTracer()
	wr.Context = x.s.base
	x.wr = wr
}

// mcpRefacts checks a body a plugin rewrote: still the same message, the
// same id and the same tool (a rewrite changes argument strings only, so
// this holds unless the splicing is wrong; the plan was checked against
// the tool, so a rewrite that changed it is refused).
func (x *exchange) mcpRefacts(wr *wasmhost.Request) error {
	m := &x.mcp
	msg, e := m.rd.Read(wr.Body)
	if e != nil {
		return e
	}
	m.scratch = mcp.AppendModel(m.scratch[:0], m.srv.name, msg.Tool)
	if msg.Kind != m.kind || !bytes.Equal(msg.ID, m.rpcID) || !bytes.Equal(m.scratch, m.model) {
		return errMCPRewrite
	}
	return nil
}

var errMCPRewrite = errors.New("mcp: a rewrite changed the message's kind, id or tool")

// mcpParamHeaders follows a plugin's rewrite of a tools/call's arguments
// into the Mcp-Param-* lines of x.header (mcp.ParamRewrites): a line
// mirroring a rewritten string carries the new one, or is dropped when
// which string it mirrors cannot be told.
func (x *exchange) mcpParamHeaders(before []byte) {
	m := &x.mcp
	if !hasParamLine(x.header) {
		return
	}
	m.params.Diff(before, x.wr.Body)
	out := m.hdr[:0]
	for rest := x.header; len(rest) > 0; {
		line := rest
		if i := bytes.Index(rest, crlf); i >= 0 {
			line, rest = rest[:i+2], rest[i+2:]
		} else {
			rest = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon < 0 || !isParamName(line[:colon]) {
			out = append(out, line...)
			continue
		}
		value := bytes.TrimRight(bytes.TrimLeft(line[colon+1:], " \t"), "\r\n")
		start := len(out)
		out = append(out, line[:colon+1]...)
		out = append(out, ' ')
		var drop bool
		if out, drop = m.params.Header(out, value); drop {
			out = out[:start]
			continue
		}
		out = append(out, crlf...)
	}
	x.header, m.hdr = out, x.header
}

var crlf = []byte("\r\n")

func isParamName(name []byte) bool {
	const p = "mcp-param-"
	return len(name) > len(p) && bytes.EqualFold(name[:len(p)], []byte(p))
}

func hasParamLine(h []byte) bool {
	for len(h) > 0 {
		if i := bytes.IndexByte(h, ':'); i >= 0 && isParamName(h[:i]) {
			return true
		}
		i := bytes.Index(h, crlf)
		if i < 0 {
			return false
		}
		h = h[i+2:]
	}
	return false
}

// isRequest reports whether the POSTed message is a JSON-RPC request
// (its refusals are JSON-RPC errors with its id).
func (m *mcpState) isRequest() bool { return m.kind == mcp.Request }

// mcpRefused answers a refused or failed MCP request and ends the
// exchange; the call log records the refusal's status.
func (x *exchange) mcpRefused(ctx *fasthttp.RequestCtx, e *openai.Error, flags uint32) {
	x.applyClientHeaders(ctx)
	x.writeMCPError(ctx, e)
	x.end(flags, e.Status)
}

// writeMCPError answers with e. A JSON-RPC request gets a JSON-RPC error
// with its id (HTTP 200), the refusal's status, type and code in its
// data; a 401 stays an HTTP 401 with WWW-Authenticate (MCP clients act on
// it: authorization), and so does every refusal of a notification, a
// response, a GET or a DELETE. Headers set before (Retry-After) stay.
func (x *exchange) writeMCPError(ctx *fasthttp.RequestCtx, e *openai.Error) {
	m := &x.mcp
	if e.Status == fasthttp.StatusUnauthorized {
		ctx.Response.Header.Set("WWW-Authenticate", "Bearer")
	}
	if m.sse.leg == mcpSSEMessage && x.sseRefused(ctx, e) {
		return
	}
	if !m.isRequest() || e.Status == fasthttp.StatusUnauthorized {
		writeError(ctx, e)
		return
	}
	m.out = appendRefusal(m.out[:0], m.rpcID, e, replyRetryAfter(ctx))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("application/json")
	ctx.SetBody(m.out)
}

// appendRefusal appends the JSON-RPC error for id that a refusal or
// failure e is on MCP: its code by status, e's status, type and code
// (and Retry-After's seconds, when set) in its data.
func appendRefusal(dst, id []byte, e *openai.Error, retryAfter int64) []byte {
	return mcp.AppendError(dst, id, mcp.RefusalCode(e.Status), e.Message,
		&mcp.Refusal{Status: e.Status, Type: e.Type, Code: e.Code, RetryAfter: retryAfter})
}

// appendRefusalEvent is appendRefusal as one server-sent event.
func appendRefusalEvent(dst, id []byte, e *openai.Error, retryAfter int64) []byte {
	dst = append(dst, "event: message\ndata: "...)
	return append(appendRefusal(dst, id, e, retryAfter), "\n\n"...)
}

// replyRetryAfter is the seconds of the Retry-After header set on the reply
// (a rate limit's), 0 when none.
func replyRetryAfter(ctx *fasthttp.RequestCtx) int64 {
	ra, _ := strconv.ParseInt(string(ctx.Response.Header.Peek("Retry-After")), 10, 64)
	return ra
}

// sendMCP makes the request's one attempt and returns the server's reply,
// its slot in x.try.ticket.
func (x *exchange) sendMCP(ctx *fasthttp.RequestCtx, rctx context.Context, body []byte) (*upstream.Exchange, error) {
	rt, a := x.route, &x.try
	tk, res := rt.set.Pick(0, 0)
	if res != balance.Picked {
		return nil, x.unavailable(ctx) // no breaker nor max_concurrent: not expected
	}
	t := &rt.targets[0]
	a.name = t.name
	x.buildHeader(ctx, t.filter)
	if x.wr != nil && x.wr.BodyRewritten() {
		x.mcpParamHeaders(body)
	}
	method := "POST"
	switch {
	case ctx.IsGet():
		method = "GET"
	case ctx.IsDelete():
		method = "DELETE"
	}
	req := &x.mcp.req
	*req = upstream.Request{Method: method, Path: x.mcp.path(), Header: x.header, Body: x.upstreamBody(body)}
	ex, err := t.client.Do(rctx, req)
	a.tried[0], a.attempts = tk.Upstream(), 1
	if err != nil {
		tk.Done(errOutcome(err), false)
		tk.Release()
		return nil, err
	}
	tk.Done(balance.StatusOutcome(ex.StatusCode()), false)
	a.ticket = tk
	return ex, nil
}

// mcpReply sends the server's reply: an event stream relayed event by
// event as it arrives (streamed true: the exchange ends when the relay
// closes), anything else whole (a JSON-RPC reply, a 202, an error).
func (x *exchange) mcpReply(ctx *fasthttp.RequestCtx, rctx context.Context, status int) (streamed bool) {
	ex, m := x.ex, &x.mcp
	ct := ex.Header().ContentType()
	ok := status >= 200 && status < 300
	x.mcpHeaders(ctx, status, ct)
	if ok && bytes.HasPrefix(ct, []byte("text/event-stream")) {
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.ImmediateHeaderFlush = true
		if m.sse.leg == mcpSSEStream {
			ctx.SetBodyStream(x.newSSERelay(rctx), -1)
			return true
		}
		r := &m.relay
		r.x, r.rctx, r.filter = x, rctx, m.allow != nil || m.guard
		ctx.SetBodyStream(r, -1)
		return true
	}
	var err error
	x.resp, err = ex.ReadAll(x.resp[:0], maxResponseBytes)
	cause := context.Cause(rctx)
	x.closeUpstream(nil)
	if err != nil {
		x.mcpCancelled(cause)
		if e := x.s.upstreamError(ctx, x.client, err, cause); e != nil {
			x.mcpRefused(ctx, e, wasmhost.EndUpstreamError)
		} else {
			x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		}
		return false
	}
	body := x.resp
	switch {
	case ok && m.allow != nil:
		if out, changed := m.tf.Filter(m.out[:0], body, m.rpcID, m.allow); changed {
			m.out, body = out, out
		}
	case ok && m.guard:
		if out, changed := x.mcpGuard(m.out[:0], body, status); changed {
			m.out, body = out, out
		}
	}
	ctx.SetBody(body)
	x.mcpReplied(int64(len(body)))
	if !ok {
		x.end(wasmhost.EndUpstreamError, status)
	} else {
		x.end(m.mcpEndFlags(wasmhost.EndCompleted), status)
	}
	return false
}

// mcpHeaders sets the reply's status and the server's headers a client
// acts on: its session id, Retry-After, and Allow on a 405 (a server
// without a GET stream).
func (x *exchange) mcpHeaders(ctx *fasthttp.RequestCtx, status int, ct []byte) {
	ctx.SetStatusCode(status)
	h := x.ex.Header()
	if len(ct) > 0 {
		ctx.Response.Header.SetContentTypeBytes(ct)
	}
	for _, k := range [...]string{"Mcp-Session-Id", "Allow", "WWW-Authenticate"} {
		if v := h.Peek(k); len(v) > 0 {
			ctx.Response.Header.SetBytesV(k, v)
		}
	}
	copyUpstreamHeaders(ctx, x.ex)
	x.applyClientHeaders(ctx)
}

// mcpReplied notes the n bytes of the reply the client got (the call
// log's reply_bytes).
func (x *exchange) mcpReplied(n int64) {
	x.up.Text = n
	if x.wr != nil {
		x.wr.TextBytesSent = n
	}
}

// mcpCancelled tells the server of a request cancelled through the
// cancel API (cause ErrCancelled); nothing for anything else.
func (x *exchange) mcpCancelled(cause error) {
	if m := &x.mcp; m.isRequest() && errors.Is(cause, ErrCancelled) {
		m.srv.notifyCancelled(x.s.log, m.path(), m.session, m.proto, m.rpcID)
	}
}
