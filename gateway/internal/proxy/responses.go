package proxy

import (
	"bytes"
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// OpenAI's Responses API (docs/adr/0011-responses-api.md).
//
//   - POST /v1/responses (endpointResponses) is routed by its model like a
//     chat request, through the same plugins, limits and budgets: its
//     facts (model, stream, max_output_tokens, the prompt's size) come from
//     responses.RequestParser, and request_messages reads its instructions
//     and input items. To an upstream with the API (provider openai) it
//     passes as it is, and its reply and events pass back; the chunk phase
//     and the accounting read them as the chat chunks a translation would
//     give (responses.View, stream/responses.go). To an Anthropic upstream
//     the request is translated into a chat request
//     (responses.AppendChatRequest) and that into a Messages API request,
//     and the reply comes back the same way (a chat.completion made into a
//     Response object; a chat chunk stream made into Responses events).
//     What cannot be expressed there is refused with a 400 naming the
//     parameter (docs/POLICY.md, "Responses API").
//   - GET and DELETE /v1/responses/{id} and GET
//     /v1/responses/{id}/input_items name no model: they go to the
//     policy's upstreams that can store responses (provider openai, and
//     adapters that are a provider.ResponseStore with the API: Azure's
//     v1 and preview api-versions), in policy order, the next one tried
//     while an upstream answers 404, so a response is found on the
//     upstream that made it. The client's key is checked by the plugins'
//     request phase as for any request (facts without a model).

// endpointResponses is POST /v1/responses (and the stored-response
// requests); see openai.Responses.
const endpointResponses = openai.Responses

// responsesState is what an exchange on the Responses API keeps.
type responsesState struct {
	parser responses.RequestParser
	chat   []byte // the request translated into a chat request
	body   []byte // the reply for the client, when the gateway wrote it
	path   []byte // a stored-response request's upstream path
	// viaChat: the request went to its upstream as a chat request (the
	// last attempt's), and the reply is a chat reply or stream.
	viaChat bool
}

func (r *responsesState) reset() {
	r.viaChat = false
	for _, b := range []*[]byte{&r.chat, &r.body} {
		if cap(*b) > 1<<20 {
			*b = nil
		}
		*b = (*b)[:0]
	}
}

// responsesRequest decides how a Responses request goes to the upstream
// of binding b: as it is to an upstream with the API (OpenAI-compatible,
// or an adapter that serves it), else as a chat request (body and
// endpoint returned), for an adapter that serves chat. It records which
// in viaChat, for the reply.
func (x *exchange) responsesRequest(b *binding, body []byte) (openai.Endpoint, []byte, error) {
	r := &x.prov.resp
	r.viaChat = false
	if b.adapter == nil || b.adapter.Serves(endpointResponses) || !b.adapter.Serves(openai.ChatCompletions) {
		return endpointResponses, body, nil
	}
	if err := r.translateRequest(body); err != nil {
		return 0, nil, err
	}
	r.viaChat = true
	return openai.ChatCompletions, r.chat, nil
}

// translateRequest makes the chat request (r.chat) for a Responses request
// body going to an upstream without the API.
func (r *responsesState) translateRequest(body []byte) error {
	var err error
	r.chat, err = responses.AppendChatRequest(r.chat[:0], body)
	return err
}

// keepResponse keeps a 2xx reply of an upstream with the Responses API
// for the client (replyBody) and puts its chat view in x.resp, which the
// chunk phase and the accounting read. A reply that is not a Response
// passes as it is.
func (x *exchange) keepResponse(status int) {
	p := &x.prov
	if status < 200 || status >= 300 {
		return
	}
	p.raw, x.resp = x.resp, p.raw[:0]
	var err error
	if x.resp, err = responses.AppendChatView(x.resp, p.raw); err != nil {
		p.raw, x.resp = x.resp, p.raw
		return
	}
	p.rawKept = true
}

// responseBody is the client's body of a non-streamed Responses reply,
// given what the chunk phase left: the upstream's Response, or it
// rewritten with a plugin's text; a translated upstream's chat.completion
// made into a Response. Error bodies are OpenAI's format in both APIs.
func (x *exchange) responseBody(b []byte) []byte {
	p := &x.prov
	if p.rawKept {
		if len(b) == len(x.resp) && (len(b) == 0 || &b[0] == &x.resp[0]) {
			return p.raw
		}
		text, finish, isErr := rewrittenReply(b)
		if isErr {
			return b
		}
		out, err := responses.AppendWithText(p.resp.body[:0], p.raw, text, string(finish))
		if err != nil {
			return p.raw
		}
		p.resp.body = out
		return out
	}
	if !p.resp.viaChat {
		return b
	}
	out, err := responses.AppendResponse(p.resp.body[:0], b, "resp_"+string(x.id))
	if err != nil {
		return b // an error body
	}
	p.resp.body = out
	return out
}

// storedResponsePath matches /v1/responses/{id} and
// /v1/responses/{id}/input_items.
func storedResponsePath(p []byte) (id, sub []byte, ok bool) {
	rest, ok := bytes.CutPrefix(p, []byte("/v1/responses/"))
	if !ok || len(rest) == 0 {
		return nil, nil, false
	}
	id, sub, _ = bytes.Cut(rest, []byte("/"))
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return nil, nil, false
		}
	}
	return id, sub, len(id) > 0 && len(id) <= 256
}

// storeTarget is an upstream that may hold stored responses.
type storeTarget struct {
	client *upstream.Client
	filter *headerFilter
	name   []byte
	// store addresses the stored responses of an adapter's upstream; nil
	// for an OpenAI-compatible one (/responses/{id} below its base URL).
	store provider.ResponseStore
}

// responseStores are the policy's upstreams that can hold stored
// responses, in policy order: OpenAI-compatible ones, and those whose
// adapter serves the Responses API and addresses its stored responses.
func (st *state) responseStores(dst []storeTarget) []storeTarget {
	for _, u := range st.policy.Upstreams {
		c, b := st.clients[u.Name], st.bindings[u.Name]
		if c == nil || b == nil {
			continue
		}
		t := storeTarget{client: c, filter: st.filters[c], name: []byte(u.Name)}
		if b.adapter != nil {
			rs, ok := b.adapter.(provider.ResponseStore)
			if !ok || !b.adapter.Serves(endpointResponses) {
				continue
			}
			t.store = rs
		}
		dst = append(dst, t)
	}
	return dst
}

// appendStoredPath appends t's upstream path of /v1/responses/{rest} with
// the client's query.
func (t *storeTarget) appendStoredPath(dst, rest, query []byte) []byte {
	if t.store != nil {
		return t.store.AppendStoredPath(dst, rest, query)
	}
	dst = append(append(dst, "/responses/"...), rest...)
	if len(query) > 0 {
		dst = append(append(dst, '?'), query...)
	}
	return dst
}

// storedResponse serves GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items (see the top of this file).
func (s *Server) storedResponse(ctx *fasthttp.RequestCtx, id, sub []byte) {
	switch {
	case len(sub) == 0 && !ctx.IsGet() && !ctx.IsDelete():
		writeError(ctx, methodNotAllowed(ctx, "GET, DELETE"))
		return
	case len(sub) > 0 && string(sub) != "input_items":
		writeError(ctx, &openai.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: "Unknown request URL: " + string(ctx.Method()) + " " + string(ctx.Path()) + "."})
		return
	case len(sub) > 0 && !ctx.IsGet():
		writeError(ctx, methodNotAllowed(ctx, "GET"))
		return
	}
	x := s.startExchange(ctx, endpointResponses)
	x.req = openai.Request{} // no model, nothing to estimate: not the pooled exchange's last request
	streamed := false
	defer x.releaseUnstreamed(ctx, &streamed)
	if x.st = s.acquireState(); x.st == nil {
		writeError(ctx, &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down", Message: "The gateway is shutting down; retry the request."})
		return
	}
	if x.refuseUnrecordable(ctx) {
		return
	}
	var buf [4]storeTarget
	stores := x.st.responseStores(buf[:0])
	if len(stores) == 0 {
		writeError(ctx, &openai.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: "No upstream here has the Responses API, so no stored response can be found."})
		return
	}
	x.client, x.try.name = stores[0].client, stores[0].name
	if pipe := x.st.pipeline; pipe != nil {
		x.startStorePlugins(ctx, stores[0].name)
		if pipe.Has(wasmhost.PhaseRequest) {
			if err := pipe.Request(x.wr); err != nil {
				x.pluginRefused(ctx, err)
				return
			}
		}
		if len(sub) == 0 && ctx.IsGet() && pipe.Wants(x.wr, wasmhost.PhaseChunk) && ctx.QueryArgs().Has("stream") {
			// A replayed event stream would pass the guards unread.
			writeError(ctx, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "stream", Code: "unsupported_parameter",
				Message: "The parameter 'stream' is not supported when retrieving a response here: the gateway's plugins check a retrieved response whole; leave it out."})
			return
		}
	}
	rest := id // {id}, or {id}/input_items
	if len(sub) > 0 {
		rest = append(append(append(make([]byte, 0, len(id)+1+len(sub)), id...), '/'), sub...)
	}
	rctx := x.openUpstream(ctx)
	x.upSent = time.Since(x.start)
	ex, err := x.sendStored(ctx, rctx, stores, string(ctx.Method()), rest, ctx.URI().QueryString())
	x.ex = ex
	if x.wr != nil {
		x.wr.Upstream = x.try.name
	}
	if err == nil {
		x.firstByte = time.Since(x.start)
		x.resp, err = ex.ReadAll(x.resp[:0], maxResponseBytes)
	}
	cause := context.Cause(rctx)
	if err != nil {
		x.closeUpstream(nil)
		s.upstreamFailed(ctx, x.client, err, cause)
		x.end(wasmhost.EndUpstreamError, clientStatus(ctx))
		return
	}
	status := ex.StatusCode()
	ctx.SetStatusCode(status)
	if ct := ex.Header().ContentType(); len(ct) > 0 {
		ctx.Response.Header.SetContentTypeBytes(ct)
	}
	copyUpstreamHeaders(ctx, ex)
	x.applyClientHeaders(ctx)
	body := x.resp
	if ctx.IsGet() && len(sub) == 0 {
		body, status = x.guardStored(status)
		ctx.SetStatusCode(status)
	}
	ctx.SetBody(body)
	x.closeUpstream(nil)
	if status >= 400 {
		x.end(wasmhost.EndUpstreamError, status)
	} else {
		x.end(wasmhost.EndCompleted, status)
	}
}

// sendStored sends a stored-response request for /v1/responses/{rest}
// (with the client's query) to each store in turn until one answers other
// than 404 (the last one's reply stands).
func (x *exchange) sendStored(ctx *fasthttp.RequestCtx, rctx context.Context, stores []storeTarget, method string, rest, query []byte) (*upstream.Exchange, error) {
	var ex *upstream.Exchange
	var err error
	p := &x.prov.resp
	for i := range stores {
		t := &stores[i]
		x.client, x.try.name = t.client, t.name
		x.buildHeader(ctx, t.filter)
		p.path = t.appendStoredPath(p.path[:0], rest, query)
		req := upstream.Request{Method: method, Path: string(p.path), Header: x.header}
		ex, err = t.client.Do(rctx, &req)
		x.try.attempts++
		if err != nil || ex.StatusCode() != fasthttp.StatusNotFound || i == len(stores)-1 {
			return ex, err
		}
		ex.Release()
	}
	return ex, err
}

// startStorePlugins fills the plugins' view of a stored-response request:
// no model, no body.
func (x *exchange) startStorePlugins(ctx *fasthttp.RequestCtx, upstreamName []byte) {
	wr := wasmhost.AcquireRequest()
	wr.NoAnswer = true // a stored response is not one the gateway can answer with
	wr.SetFacts(wasmhost.RequestFacts{MaxTokens: -1})
	wr.Endpoint = endpointNames[endpointResponses]
	wr.RequestID = x.id
	wr.Upstream = upstreamName
	wr.ClientHeader = &ctx.Request.Header
	x.svc.Bind(x.st.services)
	wr.Services = &x.svc
	wr.Context = x.s.base
	x.wr = wr
}

// guardStored runs the chunk phase over a retrieved Response's text, as
// over a non-streamed reply at its creation, so that what a guard kept
// from the client then (the upstream stores the Response as the model
// wrote it) does not come back by id. The stored conversation is not
// read: a guard judges the text with no tool evidence. The Response's
// usage was counted when it was made and is not counted again.
func (x *exchange) guardStored(status int) ([]byte, int) {
	pipe := x.st.pipeline
	if x.wr == nil || status < 200 || status >= 300 || !pipe.Wants(x.wr, wasmhost.PhaseChunk) {
		return x.resp, status
	}
	x.keepResponse(status)
	if !x.prov.rawKept {
		return x.resp, status // not a Response
	}
	b, st := x.finishWhole(status)
	x.usage, x.up.Text, x.up.Events = openai.Usage{}, 0, 0
	return x.responseBody(b), st
}
