package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// maxResponseBytes bounds a non-streamed upstream reply held in memory.
const maxResponseBytes = 64 << 20

// exchange is one forwarded request from parse to the end of its reply.
// It is pooled; a streamed reply keeps it until the stream closes.
type exchange struct {
	s      *Server
	st     *state
	parser openai.RequestParser
	req    openai.Request
	ep     openai.Endpoint
	client *upstream.Client
	bind   *binding          // x.client's (provider.go)
	wr     *wasmhost.Request // nil without plugins
	conn   *clientConn       // the client's connection; nil when not served by Serve

	reqBody []byte // the client's body, kept while plugins may read it
	body    []byte // request body as sent upstream, when rewritten
	header  []byte // header lines sent upstream
	lower   []byte
	id      []byte
	resp    []byte // non-streamed reply
	out     []byte // rewritten non-streamed reply

	// For the call log and the end phase.
	start     time.Time
	firstByte time.Duration  // until the upstream's response headers; -1: none
	upSent    time.Duration  // until the first attempt went upstream
	trace     *observe.Trace // nil unless the request is traced (trace.go)
	total     time.Duration  // until the reply ended (set by end)
	// usagePending: a non-streamed reply whose usage is read after it
	// went out, by the end work (finish.go).
	usagePending bool
	usage        openai.Usage // as the upstream reported it
	// up counts the upstream's text (a stream's and a whole reply's)
	// and a stream's time to its first text.
	up stream.Counters
	// svc is the request's host services: its plugins' `call`, and
	// the rate-limit and budget state settled at the end.
	svc       hostsvc.Session
	cancelKey string // the request's entry in the cancel registry

	prov providerState // the upstream API's request and reply (provider.go)
	pass passState     // a passthrough request's model and reply (passthru.go)
	mcp  mcpState      // an MCP request's message and reply (mcp_exchange.go)
	// route is the request's route; try its attempts (attempt.go).
	route *route
	// modelLabel is the model in metrics: a name or pattern of the policy.
	modelLabel string
	try        attemptState

	// Set by end; the end work runs when the exchange is released.
	ended     bool
	endFlags  uint32
	endStatus int
	// walMark is the row's record in the call log's write-ahead log
	// (logAhead); unlogged: it could not be made durable, and the reply
	// is withheld.
	walMark  calllog.Mark
	unlogged bool

	// While the request is with the upstreams (openUpstream to
	// closeUpstream; finish.go): the final reply (a stream's is kept
	// for the end phase's header reads), the request context's cancel,
	// and the client's disconnect watch.
	ex       *upstream.Exchange
	exCancel context.CancelCauseFunc
	watch    *clientWatch
	// inFlight: the request is counted in Server.inflight and listed
	// in the cancel registry.
	inFlight bool

	// refacts is x.refacts, made once per pooled exchange: the hook that
	// re-reads a body a plugin rewrote (rewrite.go).
	refacts func(*wasmhost.Request) error

	// An answer instead of an upstream's reply (answer.go): who gave it
	// ("" none) and its bytes as served. cap keeps a streamed reply the
	// response cache will store; noStore: a guard changed the whole reply
	// or failed on it, so it is not stored.
	answeredBy string
	answer     []byte
	cap        capture
	noStore    bool
}

var exchangePool = sync.Pool{New: func() any { return new(exchange) }}

func (x *exchange) free() {
	x.abandonTrace()
	if x.wr != nil {
		wasmhost.ReleaseRequest(x.wr)
		x.wr = nil
	}
	if x.st != nil {
		x.st.release()
		x.st = nil
	}
	x.s, x.client, x.bind, x.conn = nil, nil, nil, nil
	x.usage, x.up, x.usagePending = openai.Usage{}, stream.Counters{}, false
	x.svc.Reset()
	x.prov.reset()
	x.pass.reset()
	x.mcp.reset()
	x.route, x.modelLabel = nil, ""
	x.try.reset()
	x.ended, x.endFlags, x.endStatus, x.ex, x.exCancel, x.watch, x.inFlight = false, 0, 0, nil, nil, nil, false
	x.walMark, x.unlogged = calllog.Mark{}, false
	x.answeredBy, x.noStore = "", false
	x.cap.reset(0)
	exchangePool.Put(x)
}

// testHookFirstByte, set by tests only, runs once an upstream's reply
// headers are in (atomic: a test sets it while servers read it).
var testHookFirstByte atomic.Pointer[func()]

// forward runs one OpenAI-style POST: parse, route, plugins, send upstream,
// and either stream the reply back event by event or copy it whole.
func (s *Server) forward(ctx *fasthttp.RequestCtx, ep openai.Endpoint, path string) {
	if !ctx.IsPost() {
		writeError(ctx, methodNotAllowed(ctx, "POST"))
		return
	}
	x := s.startExchange(ctx, ep)
	streamed := false
	defer x.releaseUnstreamed(ctx, &streamed)

	body := ctx.PostBody()
	r := &x.req
	if err := x.parseRequest(ctx, body, ep, r); err != nil {
		writeError(ctx, asOpenAIError(err))
		return
	}
	x.st = s.acquireState()
	if x.st == nil {
		writeError(ctx, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "The gateway is shutting down; retry the request."})
		return
	}
	if x.refuseUnrecordable(ctx) {
		return
	}
	var t *target
	if x.route, x.modelLabel = x.st.routes.lookup(r.Model); x.route != nil {
		t = x.choose()
		x.client, x.bind = t.client, t.bind
	}
	if t == nil || !x.accepts(t) {
		writeError(ctx, x.noUpstream(r.Model, t))
		return
	}
	x.startTrace(ctx)
	pipe := x.st.pipeline
	answered := false
	if pipe != nil {
		x.startPlugins(ctx, body)
		if pipe.Has(wasmhost.PhaseRequest) {
			if err := pipe.Request(x.wr); err != nil {
				var an *wasmhost.Answered
				if !errors.As(err, &an) {
					x.pluginRefused(ctx, err)
					return
				}
				answered = true // a plugin or the cache answered: nothing goes upstream
			}
		}
		body = x.upstreamBody(body)
	}
	// Ask for usage in the stream so later phases can account for it; the
	// extra usage chunk is then kept from a client that did not ask.
	stripUsage := false
	if r.Stream && !r.IncludeUsage && ep != openai.Embeddings {
		stripUsage = true
		if !answered {
			var err error
			if x.body, err = openai.AppendWithIncludeUsage(x.body[:0], body); err != nil {
				writeError(ctx, asOpenAIError(err))
				return
			}
			body = x.body
		}
	}

	rctx := x.openUpstream(ctx)
	if x.wr != nil {
		x.wr.Context = rctx // a client gone or a cancel ends the plugins' calls too
	}
	var ex *upstream.Exchange
	var err error
	if answered {
		if ex, err = x.answerExchange(); err != nil {
			x.closeUpstream(nil)
			writeError(ctx, invalidAnswer(err))
			x.applyClientHeaders(ctx)
			x.end(wasmhost.EndRejected, fasthttp.StatusInternalServerError)
			return
		}
	} else {
		if x.svc.CacheWantsReply() {
			x.cap.reset(maxCaptureBytes)
		}
		x.upSent = time.Since(x.start)
		x.traceUpstreamStart()
		ex, err = x.send(ctx, rctx, path, body)
		x.traceUpstreamEnd(ex, err)
	}
	x.ex = ex
	if x.wr != nil && x.try.name != nil {
		x.wr.Upstream = x.try.name // later phases see the upstream that served
	}
	if err != nil {
		x.closeUpstream(nil)
		var re *requestError
		if errors.As(err, &re) {
			// No upstream of the route can take this request as it is.
			writeError(ctx, re.e)
			x.applyClientHeaders(ctx)
			x.end(wasmhost.EndRejected, re.e.Status)
			return
		}
		s.upstreamFailed(ctx, x.client, err, context.Cause(rctx))
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		return
	}
	x.firstByte = time.Since(x.start)
	if hook := testHookFirstByte.Load(); hook != nil {
		(*hook)()
	}
	status := ex.StatusCode()
	if pipe.Wants(x.wr, wasmhost.PhaseResponseHeaders) {
		x.wr.UpstreamHeader, x.wr.Status = ex.Header(), status
		if err := pipe.ResponseHeaders(x.wr, status); err != nil {
			x.closeUpstream(cancels.ErrPluginStopped)
			x.pluginRefused(ctx, err)
			return
		}
	}
	ct := ex.Header().ContentType()
	if x.bind.isStream(status, ct) {
		model := ""
		if x.translation() != nil {
			model = x.replyModel()
		}
		ctx.SetStatusCode(status)
		if x.bind.translator != nil {
			ct = eventStreamType // the translation's, whatever the upstream's framing
		}
		ctx.Response.Header.SetContentTypeBytes(ct)
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		copyUpstreamHeaders(ctx, ex)
		x.applyClientHeaders(ctx)
		st := stream.Acquire(stream.Config{
			Exchange: x, Counters: &x.up, Start: x.start, Request: x.wr, Pipeline: pipe, Log: s.log,
			ID: x.id, Model: r.Model, Upstream: ex, Ctx: rctx, Cancel: x.exCancel,
			Native: ep == endpointMessages, StripUsage: stripUsage,
			Translation: x.translation(), ReplyModel: model,
			Responses: ep == endpointResponses, FromChat: x.prov.resp.viaChat,
			Record: x.recorder(), Panics: &s.panics[1],
		})
		// The status and headers go out now, not with the first event: a
		// client knows at once that the request was accepted. When events
		// came with the upstream's headers (a fast upstream, a cached
		// reply), they go out with them, in the same write.
		ctx.Response.ImmediateHeaderFlush = !st.Prefill()
		ctx.SetBodyStream(st, -1)
		streamed = true
		return
	}
	x.resp, err = ex.ReadAll(x.resp[:0], maxResponseBytes)
	if err == nil {
		// Upstream errors pass through with their status and body (an
		// Anthropic upstream's translated for a chat request).
		status, ct = x.translateReply(status, ct)
		var body []byte
		body, status = x.finishWhole(status)
		ctx.SetStatusCode(status)
		if len(ct) > 0 {
			ctx.Response.Header.SetContentTypeBytes(ct)
		}
		copyUpstreamHeaders(ctx, ex)
		x.applyRetryAdvice(ctx)
		x.applyClientHeaders(ctx)
		ctx.SetBody(x.replyBody(body))
	}
	cause := context.Cause(rctx)
	x.closeUpstream(nil)
	if err != nil {
		s.upstreamFailed(ctx, x.client, err, cause)
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		return
	}
	if status >= 400 {
		x.end(wasmhost.EndUpstreamError, status)
	} else {
		x.end(wasmhost.EndCompleted, status)
	}
}

// StreamClosed implements stream.Exchange: the stream's end is the
// exchange's. The upstream exchange is released after the end phase,
// which may read its headers (finish: dropUpstream).
func (x *exchange) StreamClosed(flags uint32, usage openai.Usage) {
	x.watch.stop()
	x.usage = usage
	x.end(flags, x.ex.StatusCode())
	if x.unlogged && x.conn != nil {
		// The stream's row is not durable: its terminating chunk, still
		// in fasthttp's buffer, must not reach the client as a complete
		// reply.
		x.conn.Close()
	}
	x.leave()
	x.release()
}

// InputKnown implements stream.Exchange: the budget hold shrinks to the
// prompt's true count.
func (x *exchange) InputKnown(prompt int64) {
	if x.wr != nil {
		x.svc.InputKnown(x.wr, prompt)
	}
}

var _ stream.Exchange = (*exchange)(nil)

// tenantID is the request's tenant; "" when none was resolved.
func (x *exchange) tenantID() string {
	if x.wr != nil && x.wr.Tenant != nil {
		return x.wr.Tenant.ID
	}
	return ""
}

// statusClientClosed is logged for a request whose client went away before
// a status was sent (nginx's 499).
const statusClientClosed = 499

func clientStatus(ctx *fasthttp.RequestCtx) int {
	if ctx.Response.ConnectionClose() && len(ctx.Response.Body()) == 0 {
		return statusClientClosed
	}
	return ctx.Response.StatusCode()
}

// startPlugins fills the plugins' view of the request.
func (x *exchange) startPlugins(ctx *fasthttp.RequestCtx, body []byte) {
	r := &x.req
	wr := wasmhost.AcquireRequest()
	x.allowRewrites(wr)
	x.reqBody = append(x.reqBody[:0], body...)
	wr.SetFacts(pluginFacts(r)) // Model borrowed from x.parser, which lives as long as x
	wr.Endpoint = endpointNames[x.ep]
	wr.NoAnswer = !answerable(x.ep)
	wr.RequestID = x.id
	wr.Body = x.reqBody
	wr.Upstream = x.route.targets[x.try.prefer].name
	wr.ClientHeader = &ctx.Request.Header
	wr.SetChain(x.route.chain)
	x.svc.Bind(x.st.services)
	wr.Services = &x.svc
	wr.Tracer = x.trace.CallTracer()
	wr.Context = x.s.base // the upstream's context once it is opened
	x.wr = wr
}

// buildHeader renders the header lines sent upstream: the request id, the
// client headers the upstream's filter f allows (minus those a plugin set),
// then the headers plugins set.
func (x *exchange) buildHeader(ctx *fasthttp.RequestCtx, f *headerFilter) {
	x.header = append(x.header[:0], "X-Request-Id: "...)
	x.header = append(x.header, x.id...)
	x.header = append(x.header, "\r\n"...)
	var set []wasmhost.Header
	if x.wr != nil {
		set = x.wr.SetUpstreamHeaders
	}
	x.header, x.lower = f.appendForwarded(x.header, &ctx.Request.Header, x.lower, set)
	for _, h := range set {
		if len(h.Value) == 0 {
			continue
		}
		x.header = append(x.header, h.Name...)
		x.header = append(x.header, ": "...)
		x.header = append(x.header, h.Value...)
		x.header = append(x.header, "\r\n"...)
	}
	x.header = x.trace.AppendTraceContext(x.header)
}

func (x *exchange) applyClientHeaders(ctx *fasthttp.RequestCtx) {
	if x.wr == nil {
		return
	}
	for _, h := range x.wr.SetClientHeaders {
		if len(h.Value) == 0 {
			ctx.Response.Header.DelBytes(h.Name)
		} else {
			ctx.Response.Header.SetBytesKV(h.Name, h.Value)
		}
	}
}

// pluginRefused answers a request a plugin rejected, or whose plugin failed
// under fail_closed.
func (x *exchange) pluginRefused(ctx *fasthttp.RequestCtx, err error) {
	e := x.refusal(err)
	writeError(ctx, e)
	x.applyClientHeaders(ctx)
	x.end(wasmhost.EndRejected, e.Status)
}

// refusal is the client's error for a plugin's refusal or failure.
func (x *exchange) refusal(err error) *openai.Error {
	var rej *wasmhost.RejectError
	var fail *wasmhost.FailureError
	var e *openai.Error
	switch {
	case errors.As(err, &rej):
		e = &openai.Error{Status: rej.Status, Type: rej.Type, Code: rej.Code, Message: rej.Message}
		if e.Type == "" {
			e.Type = defaultErrorType(rej.Status)
		}
	case errors.As(err, &fail):
		x.s.log.Error("plugin failed; request refused (fail_closed)", "plugin", fail.Plugin, "phase", fail.Phase.String(), "err", fail.Err)
		e = stream.PluginFailed(err, ", so the request was not served.")
	default:
		e = openai.Internal(err.Error())
	}
	return e
}

func defaultErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// finishWhole runs the chunk phase over a non-streamed 2xx reply's whole
// text and returns the body and status for the client: a plugin that
// failed under fail_closed turns the reply into a 500 plugin_failed.
func (x *exchange) finishWhole(status int) ([]byte, int) {
	pipe := x.st.pipeline
	if status >= 300 {
		return x.resp, status
	}
	if !pipe.Wants(x.wr, wasmhost.PhaseChunk) && !pipe.Wants(x.wr, wasmhost.PhaseEnd) && !x.svc.NeedsUsage() {
		// Nothing before the reply needs its usage: the end work reads it
		// afterwards (metrics, access log, call log).
		x.usagePending = true
		return x.resp, status
	}
	text, err := x.parseReply()
	if err != nil {
		return x.resp, status
	}
	if x.wr == nil || x.ep == openai.Embeddings {
		return x.resp, status
	}
	x.wr.Status = status
	x.wr.TextBytesSent = int64(len(text))
	if !pipe.Wants(x.wr, wasmhost.PhaseChunk) {
		return x.resp, status
	}
	x.wr.ClientHeader = nil
	flags := wasmhost.ChunkText | wasmhost.ChunkWhole
	// The message's tool calls, for chunk_tool_calls: rendered into x.out,
	// which is free until the reply is rewritten after the chunk phase.
	if calls := stream.AppendReplyToolCalls(x.out[:0], x.resp); len(calls) > 0 {
		flags |= wasmhost.ChunkToolCalls
		x.wr.ToolCalls, x.out = calls, calls[:0]
	}
	res, err := pipe.Chunk(x.wr, text, flags)
	x.wr.ToolCalls = nil
	var finish []byte
	switch {
	case err != nil:
		x.noStore = true
		x.s.log.Error("plugin failed on a reply; reply withheld (fail_closed)", "err", err)
		x.wr.TextBytesSent = 0
		return stream.PluginFailed(err, " while checking the reply.").AppendJSON(x.out[:0]), fasthttp.StatusInternalServerError
	case res.Verdict == wasmhost.Stop:
		x.noStore = true // a reply a guard stopped is not stored
		finish = res.FinishReason
		if len(finish) == 0 {
			finish = []byte("content_filter")
		}
	case res.Verdict != wasmhost.Replace:
		return x.resp, status
	}
	x.noStore = true // a reply a guard changed is not stored
	out, err := stream.AppendWithText(x.out[:0], x.resp, res.Text, finish, false)
	if err != nil {
		return x.resp, status
	}
	x.out = out
	x.wr.TextBytesSent = int64(len(res.Text))
	return x.out, status
}

// parseReply reads a non-streamed reply's text and usage.
func (x *exchange) parseReply() ([]byte, error) {
	text, usage, err := stream.ReplyText(x.resp)
	if err != nil {
		return nil, err
	}
	x.usage = usage
	x.up.Text, x.up.Events = int64(len(text)), min(int64(len(text)), 1)
	return text, nil
}

// runEnd runs the end phase once the reply is over, settles the request's
// rate limits and budget, then writes the call log row; status is what the
// client was sent.
func (x *exchange) runEnd(flags uint32, status int) {
	prompt, completion, reported := x.tokens(flags)
	if wr := x.wr; wr != nil {
		// The kinds are read here too for the call log's pricing when no
		// budget settled the request.
		wr.TokenKindsUsed = x.tokenKinds()
		if x.st.pipeline.Wants(wr, wasmhost.PhaseEnd) {
			wr.PromptTokensUsed, wr.CompletionTokensUsed, wr.UsageReported = prompt, completion, reported
			x.st.pipeline.End(wr, flags)
		}
	}
	x.record(flags, status, prompt, completion)
}

// settle corrects the request's rate-limit charge and settles its budget
// hold with the real usage. It runs before the reply's last byte goes out,
// so a client's next request sees the counters already corrected.
func (x *exchange) settle(flags uint32) {
	wr := x.wr
	if wr == nil || !x.svc.NeedsUsage() {
		return
	}
	prompt, completion, reported := x.tokens(flags)
	wr.PromptTokensUsed, wr.CompletionTokensUsed, wr.UsageReported = prompt, completion, reported
	wr.TokenKindsUsed = x.tokenKinds()
	x.svc.Settle(wr, prompt, completion)
}

// tokenKinds is the request's tokens by kind as the upstream reported
// them (call it after tokens): none when it reported no usage, so an
// estimate is priced at the base rates.
func (x *exchange) tokenKinds() wasmhost.TokenKinds {
	u := &x.usage
	if !u.Present || x.answeredBy != "" {
		return wasmhost.TokenKinds{}
	}
	return wasmhost.TokenKinds{
		CachedInput: u.CachedTokens, CacheWrite: u.CacheWriteTokens,
		AudioInput: u.AudioInputTokens, ImageInput: u.ImageInputTokens,
		Reasoning: u.ReasoningTokens, AudioOutput: u.AudioOutputTokens, ImageOutput: u.ImageOutputTokens,
	}
}

// tokens is the request's usage: the upstream's when it reported one, else
// the gateway's estimate (the prompt estimate, and the larger of the text
// events and a quarter of the text bytes received).
func (x *exchange) tokens(flags uint32) (prompt, completion int64, reported bool) {
	if x.ep == endpointMCP {
		// MCP messages are not priced in tokens: their reply bytes are
		// no model's output.
		return 0, 0, false
	}
	if x.usagePending {
		x.usagePending = false
		if _, err := x.parseReply(); err == nil && x.wr != nil {
			x.wr.TextBytesSent = x.up.Text // no chunk plugin changed it
		}
	}
	if x.answeredBy != "" {
		// An answer: what the cache says a hit costs (nothing unless
		// hit_cost), a plugin's answer nothing.
		if x.svc.CacheOutcome() != hostsvc.CacheHit {
			return 0, 0, x.usage.Present
		}
		p, c := x.svc.CacheHitTokens(x.usage.PromptTokens, x.usage.CompletionTokens)
		return p, c, x.usage.Present
	}
	if x.usage.Present {
		return x.usage.PromptTokens, x.usage.CompletionTokens, true
	}
	if x.firstByte < 0 || (flags&wasmhost.EndUpstreamError != 0 && x.up.Text == 0) {
		// Nothing was sent upstream, it never answered, or it answered
		// with an error: nothing was generated.
		return 0, 0, false
	}
	return int64(x.req.EstimatedPromptTokens), max(x.up.Events, (x.up.Text+3)/4), false
}

// copyUpstreamHeaders copies the upstream headers a client may act on;
// call it before ex is released.
func copyUpstreamHeaders(ctx *fasthttp.RequestCtx, ex *upstream.Exchange) {
	if v := ex.Header().Peek("Retry-After"); len(v) > 0 {
		ctx.Response.Header.SetBytesV("Retry-After", v)
	}
	if v := ex.Header().Peek("Openai-Processing-Ms"); len(v) > 0 {
		ctx.Response.Header.SetBytesV("Openai-Processing-Ms", v)
	}
}

func (s *Server) requestID(ctx *fasthttp.RequestCtx, dst []byte) []byte {
	if v := ctx.Request.Header.Peek("X-Request-Id"); validRequestID(v) {
		return append(dst, v...)
	}
	return s.ids.append(dst)
}

// upstreamFailed answers a request whose upstream exchange failed before a
// reply could be sent: 504 on timeouts, 502 otherwise, nothing when the
// client itself went away.
func (s *Server) upstreamFailed(ctx *fasthttp.RequestCtx, c *upstream.Client, err, cause error) {
	if e := s.upstreamError(ctx, c, err, cause); e != nil {
		writeError(ctx, e)
	}
}

// upstreamError is upstreamFailed's error for the client; nil when the
// client is gone (its connection is then closed).
func (s *Server) upstreamError(ctx *fasthttp.RequestCtx, c *upstream.Client, err, cause error) *openai.Error {
	switch {
	case errors.Is(cause, ErrClientGone):
		ctx.SetConnectionClose()
		return nil
	case errors.Is(cause, ErrCancelled):
		return stream.Cancelled()
	case errors.Is(cause, ErrShuttingDown):
		ctx.SetConnectionClose()
		return &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
			Message: "The gateway is shutting down; retry the request."}
	case errors.As(err, new(*openai.Error)):
		// No upstream could take the request (breakers open, or every one
		// at its max_concurrent): the error says which.
		return asOpenAIError(err)
	case errors.Is(err, upstream.ErrPoolFull):
		s.log.Warn("upstream connection pool full", "upstream", c.Name(), "err", err)
		return saturated(ctx, fmt.Sprintf("Every connection to the upstream %q is busy (its max_connections); retry the request.", c.Name()))
	case errors.Is(err, upstream.ErrCredentials):
		// The message names the upstream and the credential source, never
		// a secret (upstream.Authorizer's contract).
		s.log.Error("no credentials for the upstream", "upstream", c.Name(), "err", err)
		return &openai.Error{Status: fasthttp.StatusBadGateway, Type: openai.TypeUpstream, Code: "upstream_credentials",
			Message: fmt.Sprintf("The gateway could not obtain credentials for the upstream %q: %v", c.Name(), strings.TrimPrefix(err.Error(), upstream.ErrCredentials.Error()+": "+c.Name()+": "))}
	case errors.Is(err, upstream.ErrTimeout):
		s.log.Warn("upstream timeout", "upstream", c.Name(), "err", err)
		return openai.UpstreamTimeout(fmt.Sprintf("The upstream %q did not answer in time.", c.Name()))
	default:
		s.log.Warn("upstream unreachable", "upstream", c.Name(), "err", err)
		return openai.UpstreamUnreachable(fmt.Sprintf("The upstream %q could not be reached.", c.Name()))
	}
}

func asOpenAIError(err error) *openai.Error {
	var e *openai.Error
	if errors.As(err, &e) {
		return e
	}
	return openai.Internal(err.Error())
}

// pluginConfigJSON renders a plugin's YAML config as JSON ("{}" when none).
func pluginConfigJSON(v any) ([]byte, error) {
	if v == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(v)
}
