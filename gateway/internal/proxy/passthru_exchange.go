package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/formdata"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// passState is what an exchange keeps for a passthrough request
// (passthru.go).
type passState struct {
	model []byte // the request's model, copied from its body
	// modelAt is where a form's model value starts in the body (-1: a
	// JSON body, or no model).
	modelAt int
	body    []byte          // the body with the upstream's model id (model_ids)
	path    []byte          // the upstream path an adapter gave
	parts   []formdata.Part // a form's parts (their values borrow the body)
	relay   passRelay       // a reply relayed as it arrives
	req     upstream.Request
}

func (p *passState) reset() {
	clear(p.parts)
	p.model, p.parts = p.model[:0], p.parts[:0]
	for _, b := range []*[]byte{&p.body, &p.path} {
		if cap(*b) > 1<<20 {
			*b = nil // a huge upload's copy is not kept in the pool
		}
		*b = (*b)[:0]
	}
	p.relay = passRelay{line: p.relay.line[:0]}
	p.req = upstream.Request{}
}

// passthru serves one passthrough request; id is the object id in its path
// (nil for none).
func (s *Server) passthru(ctx *fasthttp.RequestCtx, pe *passEndpoint, id []byte) {
	x := s.startExchange(ctx, pe.ep)
	streamed := false
	defer x.releaseUnstreamed(ctx, &streamed)

	var body []byte
	if pe.body != passNoBody {
		body = ctx.PostBody()
	}
	if e := x.readPassRequest(ctx, pe, id, body); e != nil {
		writeError(ctx, e)
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
	excluded, e := x.passRoute(pe)
	if e != nil {
		writeError(ctx, e)
		return
	}
	x.startTrace(ctx)
	if pipe := x.st.pipeline; pipe != nil {
		x.startPassPlugins(ctx, pe, body)
		if pipe.Has(wasmhost.PhaseRequest) {
			if err := pipe.Request(x.wr); err != nil {
				x.pluginRefused(ctx, err)
				return
			}
		}
		if pe.body == passForm {
			x.wr.Body = nil // borrowed from the client's request, which ends before the end phase
		}
		body = x.upstreamBody(body) // a JSON body's prompt or input, as plugins rewrote it
	}
	if pe.files && !x.st.policy.Passthrough.Files.AllowsPlan(x.planID()) {
		e := filesForbidden(pe)
		writeError(ctx, e)
		x.applyClientHeaders(ctx)
		x.end(wasmhost.EndRejected, e.Status)
		return
	}
	rctx := x.openUpstream(ctx)
	x.upSent = time.Since(x.start)
	x.traceUpstreamStart()
	ex, err := x.sendPass(ctx, rctx, pe, passPath(ctx, pe, id), body, excluded)
	x.ex = ex
	x.traceUpstreamEnd(ex, err)
	if x.wr != nil && x.try.name != nil {
		x.wr.Upstream = x.try.name
	}
	if err != nil {
		x.closeUpstream(nil)
		s.upstreamFailed(ctx, x.client, err, context.Cause(rctx))
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		return
	}
	x.firstByte = time.Since(x.start)
	status := ex.StatusCode()
	if pipe := x.st.pipeline; pipe.Wants(x.wr, wasmhost.PhaseResponseHeaders) {
		x.wr.UpstreamHeader, x.wr.Status = ex.Header(), status
		if err := pipe.ResponseHeaders(x.wr, status); err != nil {
			x.closeUpstream(cancels.ErrPluginStopped)
			x.pluginRefused(ctx, err)
			return
		}
	}
	streamed = x.passReply(ctx, rctx, pe, status)
}

// readPassRequest checks the request's path id and query and reads its
// model into x.pass.model; the error is the client's.
func (x *exchange) readPassRequest(ctx *fasthttp.RequestCtx, pe *passEndpoint, id, body []byte) *openai.Error {
	if id != nil && !validObjectID(id) {
		return openai.BadRequest("", "%q is not a valid id for %s: use the id the API returned (letters, digits, '-', '_', '.').", truncateID(id), pe.label)
	}
	if !validQuery(ctx.URI().QueryString()) {
		return openai.BadRequest("", "The query string is not valid.")
	}
	p := &x.pass
	var model []byte
	var err error
	model, p.modelAt, p.parts, err = passModel(ctx, pe, body, p.parts)
	if err != nil {
		return asOpenAIError(err)
	}
	p.model = append(p.model[:0], model...)
	x.req = openai.Request{Model: p.model}
	if !pe.files && len(p.model) == 0 {
		return openai.BadRequest("model", "model is required: this gateway routes %s requests by their model.", pe.label)
	}
	return nil
}

func truncateID(id []byte) []byte {
	if len(id) > 64 {
		return id[:64]
	}
	return id
}

// passRoute finds the request's route and the upstream it will most
// likely go to (x.client); excluded is the mask of the route's members
// that cannot serve the endpoint.
func (x *exchange) passRoute(pe *passEndpoint) (excluded uint64, e *openai.Error) {
	if pe.files {
		if x.route = x.st.files; x.route == nil {
			return 0, filesDisabled(pe)
		}
	} else {
		if x.route, x.modelLabel = x.st.routes.lookup(x.req.Model); x.route == nil {
			return 0, openai.NotFoundModel(string(x.req.Model))
		}
		excluded = passUnservable(x.route, pe, x.req.Model)
	}
	rt := x.route
	all := uint64(1)<<len(rt.targets) - 1
	if excluded&all == all {
		return 0, passUnsupported(pe, x.req.Model, rt.targets[0].client)
	}
	i := 0
	if len(rt.targets) > 1 {
		i = rt.set.Peek()
		for j := 0; excluded&(1<<i) != 0 && j < len(rt.targets); j++ {
			i = j
		}
	}
	x.try.prefer = i
	x.client, x.bind = rt.targets[i].client, rt.targets[i].bind
	return excluded, nil
}

// startPassPlugins fills the plugins' view of a passthrough request: its
// model, endpoint and body (a form's only for the request phase).
func (x *exchange) startPassPlugins(ctx *fasthttp.RequestCtx, pe *passEndpoint, body []byte) {
	wr := wasmhost.AcquireRequest()
	wr.NoAnswer = true // a passthrough reply is not one the gateway can answer in
	wr.SetFacts(wasmhost.RequestFacts{Model: x.pass.model, MaxTokens: -1})
	wr.Endpoint = pe.name
	wr.RequestID = x.id
	switch pe.body {
	case passJSON:
		x.reqBody = append(x.reqBody[:0], body...)
		wr.Body = x.reqBody
		x.allowPassRewrites(wr)
	case passForm:
		wr.Body = body // not copied: an upload may be as large as the server takes
	}
	wr.Upstream = x.route.targets[x.try.prefer].name
	wr.ClientHeader = &ctx.Request.Header
	wr.SetChain(x.route.chain)
	x.svc.Bind(x.st.services)
	wr.Services = &x.svc
	wr.Tracer = x.trace.CallTracer()
	wr.Context = x.s.base
	x.wr = wr
}

// planID is the plan of the request's tenant ("" when none was resolved).
func (x *exchange) planID() string {
	if x.wr != nil && x.wr.Tenant != nil {
		return x.wr.Tenant.Plan
	}
	return ""
}

// passPath is the upstream path of the request: the endpoint's, its id,
// and the client's query string.
func passPath(ctx *fasthttp.RequestCtx, pe *passEndpoint, id []byte) string {
	q := ctx.URI().QueryString()
	if id == nil && len(q) == 0 {
		return pe.path
	}
	b := make([]byte, 0, len(pe.path)+len(id)+len(pe.suffix)+1+len(q))
	b = append(append(append(b, pe.path...), id...), pe.suffix...)
	if len(q) > 0 {
		b = append(append(b, '?'), q...)
	}
	return string(b)
}

// sendPass makes the request's one attempt, to a member of its route not
// in excluded, and returns the reply, its slot in x.try.ticket.
func (x *exchange) sendPass(ctx *fasthttp.RequestCtx, rctx context.Context, pe *passEndpoint, path string, body []byte, excluded uint64) (*upstream.Exchange, error) {
	rt, a := x.route, &x.try
	tk, res := rt.set.Pick(excluded, a.prefer)
	switch res {
	case balance.Unavailable:
		return nil, x.unavailable(ctx)
	case balance.Saturated:
		var err error
		if tk, err = rt.set.Wait(rctx, excluded, rt.wait); err != nil {
			if rctx.Err() != nil {
				return nil, fmt.Errorf("%w: waiting for a free upstream: %w", upstream.ErrCanceled, err)
			}
			return nil, x.unavailable(ctx)
		}
	}
	t := &rt.targets[tk.Index()]
	x.client, x.bind, a.name = t.client, t.bind, t.name
	x.buildHeader(ctx, t.filter)
	req, err := x.passRequest(t, pe, path, body)
	if err != nil {
		tk.Cancel()
		return nil, err
	}
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

// passRequest is the request for target t: its path for the endpoint, and
// the body with the model renamed when t's model_ids maps it (then
// copied: a JSON body rewritten, a form's model field spliced).
func (x *exchange) passRequest(t *target, pe *passEndpoint, path string, body []byte) (*upstream.Request, error) {
	p := &x.pass
	var up string
	mapped := false
	if t.bind != nil && len(p.model) > 0 {
		up, mapped = t.bind.modelIDs[string(p.model)]
	}
	switch {
	case !mapped:
	case pe.body == passJSON:
		var err error
		if p.body, err = openai.AppendWithModel(p.body[:0], body, up); err != nil {
			return nil, openai.BadRequest("", "The request body must be a JSON object.")
		}
		body = p.body
	case pe.body == passForm && p.modelAt >= 0:
		p.body = append(append(append(p.body[:0], body[:p.modelAt]...), up...), body[p.modelAt+len(p.model):]...)
		body = p.body
	}
	if t.bind != nil && t.bind.adapter != nil {
		if !mapped {
			up = string(p.model) // adapters' upstreams only: OpenAI's stay allocation-free
		}
		var ok bool
		if p.path, ok = passAddress(p.path[:0], t, path, up); !ok {
			return nil, passUnsupported(pe, p.model, t.client)
		}
		path = string(p.path)
	}
	req := &p.req
	*req = upstream.Request{Method: pe.method, Path: path, Header: x.header, Body: body}
	return req, nil
}

// passReply sends the upstream's reply: whole when it is an error or its
// usage is to be read (then the exchange ends here), else relayed as it
// arrives (streamed true: the exchange ends when the relay closes).
func (x *exchange) passReply(ctx *fasthttp.RequestCtx, rctx context.Context, pe *passEndpoint, status int) (streamed bool) {
	ex := x.ex
	ct := ex.Header().ContentType()
	ok := status >= 200 && status < 300
	if ok && !(pe.metered && bytes.HasPrefix(ct, jsonContentType)) {
		x.passHeaders(ctx, status, ct)
		sse := bytes.HasPrefix(ct, []byte("text/event-stream"))
		if sse {
			ctx.Response.Header.Set("Cache-Control", "no-cache")
			ctx.Response.ImmediateHeaderFlush = true
		}
		x.pass.relay.x, x.pass.relay.scan, x.pass.relay.ep = x, sse && pe.metered, pe.ep
		n := ex.Header().ContentLength()
		if n < 0 {
			n = -1
		}
		ctx.SetBodyStream(&x.pass.relay, n)
		return true
	}
	var err error
	x.resp, err = ex.ReadAll(x.resp[:0], maxResponseBytes)
	if err == nil {
		if ok && pe.metered {
			x.usage = passUsage(x.resp, pe.ep)
		}
		x.passHeaders(ctx, status, ct)
		ctx.SetBody(x.resp)
	}
	cause := context.Cause(rctx)
	x.closeUpstream(nil)
	switch {
	case err != nil:
		x.s.upstreamFailed(ctx, x.client, err, cause)
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
	case !ok:
		x.end(wasmhost.EndUpstreamError, status)
	default:
		x.end(wasmhost.EndCompleted, status)
	}
	return false
}

// passHeaders sets the reply's status and the headers a client of these
// endpoints reads.
func (x *exchange) passHeaders(ctx *fasthttp.RequestCtx, status int, ct []byte) {
	ctx.SetStatusCode(status)
	if len(ct) > 0 {
		ctx.Response.Header.SetContentTypeBytes(ct)
	}
	if v := x.ex.Header().Peek("Content-Disposition"); len(v) > 0 {
		ctx.Response.Header.SetBytesV("Content-Disposition", v) // a file's content
	}
	copyUpstreamHeaders(ctx, x.ex)
	x.applyClientHeaders(ctx)
}

// passUsage reads the usage a passthrough reply of endpoint ep reports in
// tokens: images' and transcriptions' input_tokens and output_tokens, with
// their details (the transcription API's input_token_details included). A
// transcription billed by duration ("type":"duration") and a reply
// without usage read as none. The output of the image endpoints is image
// tokens and of speech audio tokens, priced as such.
func passUsage(b []byte, ep openai.Endpoint) openai.Usage {
	var p fastjson.Parser // once per metered reply
	v, err := p.ParseBytes(b)
	if err != nil {
		return openai.Usage{}
	}
	u := v.Get("usage")
	if u == nil || u.Type() != fastjson.TypeObject || string(u.GetStringBytes("type")) == "duration" {
		return openai.Usage{}
	}
	in, out := u.Get("input_tokens"), u.Get("output_tokens")
	if in == nil && out == nil {
		return openai.Usage{}
	}
	usage := openai.ParseUsage(u)
	if d := u.Get("input_token_details"); d != nil && usage.AudioInputTokens == 0 {
		usage.AudioInputTokens = max(0, d.GetInt64("audio_tokens"))
	}
	switch ep {
	case endpointImagesGenerations, endpointImagesEdits, endpointImagesVariations:
		usage.ImageOutputTokens = usage.CompletionTokens
	case endpointAudioSpeech:
		usage.AudioOutputTokens = usage.CompletionTokens
	}
	return usage
}

// maxUsageLine bounds the event line a relayed transcription stream keeps
// while looking for its usage.
const maxUsageLine = 64 << 10

// passRelay is a passthrough reply's body as the client's response body
// stream: read from the upstream as it arrives; Close ends the exchange.
// With scan it reads the usage of a transcription stream's
// transcript.text.done event.
type passRelay struct {
	x     *exchange
	scan  bool
	ep    openai.Endpoint // whose usage scan reads
	line  []byte          // the event line being read (scan), up to maxUsageLine
	long  bool            // the line outgrew maxUsageLine
	usage openai.Usage
	eof   bool
	err   error
}

func (r *passRelay) Read(p []byte) (int, error) {
	n, err := r.x.ex.Read(p)
	if r.scan {
		r.scanLines(p[:n])
	}
	switch {
	case err == io.EOF:
		r.eof = true
	case err != nil:
		r.err = err
	}
	return n, err
}

func (r *passRelay) scanLines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		part := b
		if i >= 0 {
			part = b[:i]
		}
		if !r.long {
			if len(r.line)+len(part) > maxUsageLine {
				r.long, r.line = true, r.line[:0]
			} else {
				r.line = append(r.line, part...)
			}
		}
		if i < 0 {
			return
		}
		if !r.long {
			if d, ok := bytes.CutPrefix(r.line, []byte("data:")); ok && bytes.Contains(d, []byte(`"usage"`)) {
				if u := passUsage(d, r.ep); u.Present {
					r.usage = u
				}
			}
		}
		r.line, r.long = r.line[:0], false
		b = b[i+1:]
	}
}

// Close ends the exchange once fasthttp has written the body, or stopped:
// the client went away (a write failed, or the disconnect watch canceled
// the upstream read).
func (r *passRelay) Close() error {
	var flags uint32
	switch {
	case r.eof:
		flags = wasmhost.EndCompleted
	case r.err == nil, errors.Is(r.err, upstream.ErrCanceled):
		flags = wasmhost.EndClientGone
	default:
		flags = wasmhost.EndUpstreamError
	}
	r.x.StreamClosed(flags, r.usage)
	return nil
}
