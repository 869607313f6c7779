package proxy

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// Providers. An upstream speaks OpenAI's API (requests and replies pass as
// they are) or another provider's, through the adapter its provider
// registered in package provider (see that package's documentation for
// the contract). For an adapter's upstream each attempt's request is
// built by Adapter.Request; a Translator's replies are turned into OpenAI
// ones (Translator.Reply for whole replies, Translator.NewStream's reader
// for streams, read by the stream as if an OpenAI upstream had sent it).
// A model listed in the upstream's model_ids goes out under its upstream
// id; the call log, metrics and prices keep the client's name, and a
// translated reply carries it (an OpenAI-format reply passes as sent).
//
// POST /v1/messages (endpointMessages) goes only to Anthropic upstreams
// and passes through: the client's body and the upstream's reply and
// events are not changed, but the guards and the accounting read them as
// the OpenAI chunks a translation would give (anthropic.ChunkView,
// stream/native.go), and the errors the gateway itself produces are in
// Anthropic's format. The client's own key (its gateway key, read by the
// preflight plugin from Authorization or X-Api-Key) never goes upstream.

// endpointMessages is POST /v1/messages, Anthropic's Messages API served
// natively. The openai package knows only OpenAI's endpoints, so the value
// is the proxy's own and far from theirs.
const endpointMessages = openai.Endpoint(0xff)

// endpointPath is ep's URL path, for metrics and the call log.
func endpointPath(ep openai.Endpoint) string {
	switch ep {
	case endpointMessages:
		return "/v1/messages"
	case endpointResponses:
		return "/v1/responses"
	}
	return ep.String()
}

// Endpoint names the plugins read (request_field endpoint), without
// allocating per request.
var endpointNames = map[openai.Endpoint][]byte{
	openai.ChatCompletions: []byte("chat/completions"),
	openai.Completions:     []byte("completions"),
	openai.Embeddings:      []byte("embeddings"),
	endpointMessages:       []byte("messages"),
	endpointResponses:      []byte("responses"),
}

// binding is how the proxy talks to one upstream (package provider).
type binding struct {
	adapter    provider.Adapter    // nil: OpenAI-compatible
	translator provider.Translator // nil: replies in OpenAI's format
	anthropic  *provider.Anthropic // non-nil: serves endpointMessages
	// modelIDs maps a client's model to the upstream's (model_ids).
	modelIDs map[string]string
	// streams pools the translator's stream readers.
	streams *sync.Pool
}

func newBinding(u *config.Upstream, b provider.Binding) *binding {
	bd := &binding{adapter: b.Adapter, modelIDs: u.ModelIDs}
	if len(bd.modelIDs) == 0 {
		bd.modelIDs = nil
	}
	bd.translator, _ = b.Adapter.(provider.Translator)
	bd.anthropic, _ = b.Adapter.(*provider.Anthropic)
	if tr := bd.translator; tr != nil {
		bd.streams = &sync.Pool{New: func() any { return tr.NewStream(stream.MaxEventBytes) }}
	}
	return bd
}

// isStream reports whether a reply is to be streamed to the client.
func (b *binding) isStream(status int, ct []byte) bool {
	if b.translator != nil {
		return b.translator.IsStream(status, ct)
	}
	return provider.IsSSE(status, ct)
}

// providerState is what an exchange needs to speak its upstream's API.
type providerState struct {
	native anthropic.RequestParser
	req    upstream.Request
	out    provider.Outbound // an adapter's request
	header []byte            // x.header and the adapter's header lines
	path   string            // out.Path, kept while the same
	mapped []byte            // the body with the upstream's model id

	// The client's anthropic-version and anthropic-beta (endpointMessages).
	version, beta []byte

	// raw is a non-streamed reply as the upstream sent it, while resp
	// holds its OpenAI translation (rawKept).
	raw     []byte
	rawKept bool
	// retryAfter is the Retry-After, in seconds, a translated error reply
	// asked for in its body (provider.RetryAdvisor); 0: none.
	retryAfter int

	resp responsesState // POST /v1/responses (responses.go)
}

func (p *providerState) reset() {
	p.req = upstream.Request{}
	p.rawKept, p.retryAfter = false, 0
	p.version, p.beta = p.version[:0], p.beta[:0]
	p.resp.reset()
	p.out.Reset()
	for _, b := range []*[]byte{&p.header, &p.mapped, &p.raw} {
		if cap(*b) > 1<<20 {
			*b = nil // a huge request's buffer is not kept in the pool
		}
		*b = (*b)[:0]
	}
}

// parseRequest validates the client's body for ep into r. A native
// Messages API request is read by anthropic.RequestParser, which also
// records the client's anthropic-version and anthropic-beta.
func (x *exchange) parseRequest(ctx *fasthttp.RequestCtx, body []byte, ep openai.Endpoint, r *openai.Request) error {
	if ep == endpointMessages {
		p := &x.prov
		p.version = append(p.version[:0], ctx.Request.Header.Peek("Anthropic-Version")...)
		p.beta = append(p.beta[:0], ctx.Request.Header.Peek("Anthropic-Beta")...)
	}
	return x.parseBody(body, ep, r)
}

// parseBody parses a request body for ep with the parser of its API.
func (x *exchange) parseBody(body []byte, ep openai.Endpoint, r *openai.Request) error {
	switch ep {
	case endpointResponses:
		return x.prov.resp.parser.Parse(body, r)
	case endpointMessages:
		return x.prov.native.Parse(body, r)
	}
	return x.parser.Parse(body, ep, r)
}

// accepts reports whether t can serve the exchange's endpoint: the native
// Messages API only goes to Anthropic upstreams.
func (x *exchange) accepts(t *target) bool {
	return x.ep != endpointMessages || t.bind.anthropic != nil
}

// noUpstream is the 404 for a model no route sends to an upstream that can
// serve the endpoint.
func (x *exchange) noUpstream(model []byte, t *target) *openai.Error {
	if t == nil || x.ep != endpointMessages {
		return openai.NotFoundModel(string(model))
	}
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` is not served by an Anthropic upstream here; use POST /v1/chat/completions for it.", model)}
}

// upstreamRequest returns the request for t: path, header lines and body in
// the API t speaks. body is the request body as prepared for an OpenAI
// upstream (see forward) for model (the client's, or a fallback's). It is
// called once per attempt, possibly for different upstreams; the result is
// valid until the next call. An error is the client's (*openai.Error): the
// request cannot be expressed for t.
func (x *exchange) upstreamRequest(t *target, path string, body []byte, model []byte) (*upstream.Request, error) {
	p := &x.prov
	b := t.bind
	upModel, mapped := b.modelIDs[string(model)]
	if mapped {
		var err error
		if p.mapped, err = openai.AppendWithModel(p.mapped[:0], body, upModel); err != nil {
			return nil, err
		}
		body = p.mapped
	}
	p.req = upstream.Request{Method: "POST", Path: path, Header: x.header, Body: body}
	ep := x.ep
	if ep == endpointResponses {
		var err error
		if ep, body, err = x.responsesRequest(b, body); err != nil {
			return nil, err
		}
		p.req.Body = body
	}
	switch {
	case ep == endpointMessages:
		if b.anthropic == nil {
			return nil, x.noUpstream(x.req.Model, t)
		}
		return x.nativeRequest(b.anthropic), nil
	case b.adapter == nil:
		return &p.req, nil
	case !b.adapter.Serves(ep):
		return nil, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "model", Code: "unsupported_endpoint",
			Message: fmt.Sprintf("The model `%s` is served by a %s upstream, which has no %s endpoint; use POST /v1/chat/completions.", x.req.Model, t.client.Provider(), x.ep)}
	}
	if !mapped {
		upModel = string(model) // adapters' upstreams only: OpenAI's stay allocation-free
	}
	// Built on each call: an attempt may carry another body (a fallback
	// model), and a retry is rare enough not to cache for.
	o := &p.out
	o.Reset()
	if err := b.adapter.Request(o, ep, upModel, x.req.Stream, body); err != nil {
		return nil, err
	}
	if p.path != string(o.Path) {
		p.path = string(o.Path)
	}
	p.req.Path = p.path
	if len(o.Header) > 0 {
		p.header = append(append(p.header[:0], x.header...), o.Header...)
		p.req.Header = p.header
	}
	if len(o.Body) > 0 {
		p.req.Body = o.Body
	}
	return &p.req, nil
}

// nativeRequest is POST /v1/messages for an Anthropic upstream: the
// client's body (it asks for no stream_options: parseRequest sets
// IncludeUsage for streams), with the client's anthropic-version
// (fasthttp has refused CR, LF and NUL in it) or else the upstream's, and
// the client's anthropic-beta.
func (x *exchange) nativeRequest(a *provider.Anthropic) *upstream.Request {
	p := &x.prov
	p.req.Path = anthropic.MessagesPath
	p.header = append(p.header[:0], x.header...)
	p.header = append(p.header, "anthropic-version: "...)
	if len(p.version) > 0 {
		p.header = append(p.header, p.version...)
	} else {
		p.header = append(p.header, a.Version...)
	}
	p.header = append(p.header, "\r\n"...)
	// The client's Content-Type is withheld (provider.Anthropic's
	// Binding): the body was parsed as JSON, and is sent as such.
	p.header = append(p.header, "Content-Type: application/json\r\n"...)
	if len(p.beta) > 0 {
		p.header = append(p.header, "anthropic-beta: "...)
		p.header = append(p.header, p.beta...)
		p.header = append(p.header, "\r\n"...)
	}
	p.req.Header = p.header
	return &p.req
}

var jsonContentType = []byte("application/json")

// translateReply turns a non-streamed reply from a translated upstream
// (in x.resp) into what the rest of the exchange reads: for an OpenAI
// request the OpenAI reply (a chat.completion, or an OpenAI error with the
// status that goes with it); for a native request the upstream's reply is
// kept for the client (replyBody) and x.resp holds its translation, which
// the chunk phase and the accounting read. It returns the status and
// content type for the client.
func (x *exchange) translateReply(status int, ct []byte) (int, []byte) {
	if x.ep == endpointResponses && !x.prov.resp.viaChat {
		x.keepResponse(status) // the upstream's own Responses API
		return status, ct
	}
	tr := x.bind.translator
	if tr == nil {
		return status, ct
	}
	p := &x.prov
	native := x.ep == endpointMessages
	if native && (status < 200 || status >= 300) {
		return status, ct // the upstream's error, as it sent it
	}
	p.raw, x.resp = x.resp, p.raw[:0]
	if native {
		var err error
		if x.resp, err = anthropic.AppendResponse(x.resp, p.raw, "", "", time.Now().Unix()); err != nil {
			// Not a message the gateway can read: it passes as sent, and
			// the accounting falls back to its estimate.
			p.raw, x.resp = x.resp, p.raw
			return status, ct
		}
		p.rawKept = true
		return status, ct
	}
	out, st, err := tr.Reply(x.resp, status, x.ex.Header(), p.raw, x.replyModel(), time.Now().Unix())
	if err != nil {
		e := asOpenAIError(err)
		x.resp = e.AppendJSON(x.resp[:0])
		return e.Status, jsonContentType
	}
	x.resp = out
	if ra, ok := tr.(provider.RetryAdvisor); ok && status >= 400 && len(x.ex.Header().Peek("Retry-After")) == 0 {
		p.retryAfter, _ = ra.RetryAfter(status, p.raw)
	}
	return st, jsonContentType
}

// applyRetryAdvice sets the client's Retry-After to the delay a
// translated error reply asked for in its body (translateReply).
func (x *exchange) applyRetryAdvice(ctx *fasthttp.RequestCtx) {
	if s := x.prov.retryAfter; s > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(s))
	}
}

// translation is the pool of stream readers that translate the reply, nil
// when the stream is OpenAI's or passes through (endpointMessages).
func (x *exchange) translation() *sync.Pool {
	if x.ep == endpointMessages || (x.ep == endpointResponses && !x.prov.resp.viaChat) {
		return nil
	}
	return x.bind.streams
}

// eventStreamType is the Content-Type of a translated stream.
var eventStreamType = []byte("text/event-stream")

// replyModel is the model name the client sees in a translated reply: the
// model it asked for, or the fallback model that served.
func (x *exchange) replyModel() string {
	if x.try.fallback != "" {
		return x.try.fallback
	}
	return string(x.req.Model)
}

// replyBody is the body for the client of a non-streamed reply, given what
// the chunk phase left (finishWhole's result). On the native endpoint the
// upstream's own reply goes out unless a plugin changed the text: then the
// message is rewritten with the new text (and stop_reason refusal for a
// stop), and a plugin failure becomes an Anthropic error body.
func (x *exchange) replyBody(b []byte) []byte {
	if x.ep == endpointResponses {
		return x.responseBody(b)
	}
	p := &x.prov
	if !p.rawKept {
		return b
	}
	if len(b) == len(x.resp) && (len(b) == 0 || &b[0] == &x.resp[0]) {
		return p.raw
	}
	text, finish, isErr := rewrittenReply(b)
	if isErr {
		e := &openai.Error{Status: fasthttp.StatusInternalServerError, Message: string(text)}
		return anthropic.AppendError(x.out[:0], e)
	}
	stop := ""
	if finish != nil {
		stop = anthropic.StopReason(finish)
	}
	out, err := anthropic.AppendMessageWithText(x.resp[:0], p.raw, text, stop)
	if err != nil {
		return p.raw
	}
	x.resp = out
	return out
}

// rewrittenReply reads what a plugin made of a chat.completion: its text
// and finish reason, or (isErr) the message of an error body.
func rewrittenReply(b []byte) (text, finish []byte, isErr bool) {
	var p fastjson.Parser // rare path: a plugin changed the reply
	v, err := p.ParseBytes(b)
	if err != nil {
		return nil, nil, false
	}
	if e := v.Get("error"); e != nil {
		return append([]byte(nil), e.GetStringBytes("message")...), nil, true
	}
	c := v.Get("choices", "0")
	text = append([]byte(nil), c.GetStringBytes("message", "content")...)
	if f := c.GetStringBytes("finish_reason"); f != nil {
		finish = append([]byte(nil), f...)
	}
	return text, finish, false
}

// nativeErrors rewrites an error the gateway produced on POST /v1/messages
// (an OpenAI error body) in Anthropic's format. Upstream errors, already in
// that format, and streams are left alone.
func nativeErrors(ctx *fasthttp.RequestCtx) {
	r := &ctx.Response
	if r.StatusCode() < 400 || r.IsBodyStream() {
		return
	}
	body := r.Body()
	if !bytes.HasPrefix(body, []byte(`{"error":`)) {
		return
	}
	var p fastjson.Parser
	v, err := p.ParseBytes(body)
	if err != nil || v.Get("type") != nil {
		return
	}
	e := &openai.Error{Status: r.StatusCode(), Message: string(v.GetStringBytes("error", "message"))}
	r.SetBody(anthropic.AppendError(nil, e))
}
