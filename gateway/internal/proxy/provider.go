package proxy

import (
	"bytes"
	"fmt"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// Providers. An upstream speaks OpenAI's API (requests and replies pass as
// they are) or Anthropic's Messages API. To an Anthropic upstream:
//
//   - POST /v1/chat/completions is translated: the request into a Messages
//     API request (anthropic.AppendRequest), the reply back into a
//     chat.completion (anthropic.AppendResponse), a stream event by event
//     into chat.completion.chunk events (anthropic.StreamReader, read by
//     the stream as if the upstream had sent them), errors into OpenAI
//     errors (anthropic.TranslateError).
//   - POST /v1/messages (endpointMessages) passes through: the client's
//     body and the upstream's reply and events are not changed, but the
//     guards and the accounting read them as the OpenAI chunks a
//     translation would give (anthropic.ChunkView, stream_native.go), and
//     the errors the gateway itself produces are in Anthropic's format.
//
// Either way the upstream's key goes out as x-api-key with an
// anthropic-version header, and the client's own key (its gateway key, read
// by the preflight plugin from Authorization or X-Api-Key) never does.

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

// providerState is what an exchange needs to speak its upstream's API.
type providerState struct {
	native anthropic.RequestParser
	req    upstream.Request
	header []byte // header lines for an Anthropic upstream
	body   []byte // the chat request translated for Anthropic

	// The client's anthropic-version and anthropic-beta (endpointMessages).
	version, beta []byte

	// raw is a non-streamed reply as the upstream sent it, while resp
	// holds its OpenAI translation (rawKept).
	raw     []byte
	rawKept bool

	resp responsesState // POST /v1/responses (responses.go)
}

func (p *providerState) reset() {
	p.req = upstream.Request{}
	p.rawKept = false
	p.version, p.beta = p.version[:0], p.beta[:0]
	p.resp.reset()
	for _, b := range []*[]byte{&p.header, &p.body, &p.raw} {
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
	switch ep {
	case endpointResponses:
		return x.prov.resp.parser.Parse(body, r)
	case endpointMessages:
	default:
		return x.parser.Parse(body, ep, r)
	}
	p := &x.prov
	p.version = append(p.version[:0], ctx.Request.Header.Peek("Anthropic-Version")...)
	p.beta = append(p.beta[:0], ctx.Request.Header.Peek("Anthropic-Beta")...)
	return p.native.Parse(body, r)
}

// accepts reports whether c can serve the exchange's endpoint: the native
// Messages API only goes to Anthropic upstreams.
func (x *exchange) accepts(c *upstream.Client) bool {
	return x.ep != endpointMessages || c.Anthropic()
}

// noUpstream is the 404 for a model no route sends to an upstream that can
// serve the endpoint.
func (x *exchange) noUpstream(model []byte, c *upstream.Client) *openai.Error {
	if c == nil || x.ep != endpointMessages {
		return openai.NotFoundModel(string(model))
	}
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Code: "model_not_found",
		Message: fmt.Sprintf("The model `%s` is not served by an Anthropic upstream here; use POST /v1/chat/completions for it.", model)}
}

// upstreamRequest returns the request for c: path, header lines and body in
// the API c speaks. body is the request body as prepared for an OpenAI
// upstream (see forward). It is called once per attempt, possibly for
// different upstreams; the result is valid until the next call. An error
// is the client's (*openai.Error): the request cannot be expressed for c.
func (x *exchange) upstreamRequest(c *upstream.Client, path string, body []byte) (*upstream.Request, error) {
	p := &x.prov
	p.req = upstream.Request{Method: "POST", Path: path, Header: x.header, Body: body}
	if !c.Anthropic() {
		if x.ep == endpointMessages {
			return nil, x.noUpstream(x.req.Model, c)
		}
		return &p.req, nil
	}
	switch x.ep {
	case endpointMessages:
		// body is the client's, untouched: a native request asks for no
		// stream_options (parseRequest sets IncludeUsage for streams).
	case endpointResponses:
		if err := x.prov.resp.translateRequest(body); err != nil {
			return nil, err
		}
		body = x.prov.resp.chat
		fallthrough
	case openai.ChatCompletions:
		// Translated on each call: an attempt may carry another body (a
		// fallback model), and a retry is rare enough not to cache for.
		var err error
		if p.body, err = anthropic.AppendRequest(p.body[:0], body, 0); err != nil {
			return nil, err
		}
		p.req.Body = p.body
	default:
		return nil, &openai.Error{Status: fasthttp.StatusBadRequest, Type: openai.TypeInvalidRequest, Param: "model", Code: "unsupported_endpoint",
			Message: fmt.Sprintf("The model `%s` is served by an Anthropic upstream, which has no %s endpoint; use POST /v1/chat/completions.", x.req.Model, x.ep)}
	}
	p.req.Path = anthropic.MessagesPath
	// The key is in c's static headers; the version is the client's on the
	// native endpoint (fasthttp has refused CR, LF and NUL in it), else
	// the upstream's (validated by config).
	p.header = append(p.header[:0], x.header...)
	p.header = append(p.header, "anthropic-version: "...)
	switch {
	case len(p.version) > 0:
		p.header = append(p.header, p.version...)
	case c.AnthropicVersion() != "":
		p.header = append(p.header, c.AnthropicVersion()...)
	default:
		p.header = append(p.header, anthropic.DefaultVersion...)
	}
	p.header = append(p.header, "\r\n"...)
	if len(p.beta) > 0 {
		p.header = append(p.header, "anthropic-beta: "...)
		p.header = append(p.header, p.beta...)
		p.header = append(p.header, "\r\n"...)
	}
	p.req.Header = p.header
	return &p.req, nil
}

var jsonContentType = []byte("application/json")

// translateReply turns a non-streamed reply from an Anthropic upstream (in
// x.resp) into what the rest of the exchange reads: for a chat request the
// OpenAI reply (a chat.completion, or an OpenAI error with the status that
// goes with it); for a native request the upstream's reply is kept for the
// client (replyBody) and x.resp holds its translation, which the chunk
// phase and the accounting read. It returns the status and content type
// for the client.
func (x *exchange) translateReply(status int, ct []byte) (int, []byte) {
	if !x.client.Anthropic() {
		if x.ep == endpointResponses {
			x.keepResponse(status)
		}
		return status, ct
	}
	p := &x.prov
	native := x.ep == endpointMessages
	if native && (status < 200 || status >= 300) {
		return status, ct // the upstream's error, as it sent it
	}
	p.raw, x.resp = x.resp, p.raw[:0]
	var err error
	if status >= 200 && status < 300 {
		x.resp, err = anthropic.AppendResponse(x.resp, p.raw, "", "", time.Now().Unix())
	} else {
		err = anthropic.TranslateError(status, p.raw)
	}
	if err == nil {
		p.rawKept = native
		return status, ct
	}
	if native {
		// Not a message the gateway can read: it passes as sent, and the
		// accounting falls back to its estimate.
		p.raw, x.resp = x.resp, p.raw
		return status, ct
	}
	e := asOpenAIError(err)
	x.resp = e.AppendJSON(x.resp[:0])
	return e.Status, jsonContentType
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
