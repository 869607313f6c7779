package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// maxResponseBytes bounds a non-streamed upstream reply held in memory.
const maxResponseBytes = 64 << 20

// scratch is the per-request working memory of forward, pooled.
type scratch struct {
	parser openai.RequestParser
	req    openai.Request
	body   []byte // request body as sent upstream, when rewritten
	header []byte // forwarded header lines
	lower  []byte
	id     []byte
	resp   []byte // non-streamed reply
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// forward runs one OpenAI-style POST: parse, route, send upstream, and
// either stream the reply back event by event or copy it whole.
func (s *Server) forward(ctx *fasthttp.RequestCtx, ep openai.Endpoint, path string) {
	if !ctx.IsPost() {
		writeError(ctx, methodNotAllowed(ctx, "POST"))
		return
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)

	sc.id = s.requestID(ctx, sc.id[:0])
	ctx.Response.Header.SetBytesV("X-Request-Id", sc.id)

	body := ctx.PostBody()
	r := &sc.req
	if err := sc.parser.Parse(body, ep, r); err != nil {
		writeError(ctx, asOpenAIError(err))
		return
	}
	st := s.state.Load()
	client := st.routes.lookup(r.Model)
	if client == nil {
		writeError(ctx, openai.NotFoundModel(string(r.Model)))
		return
	}
	// Ask for usage in the stream so later phases can account for it; the
	// extra usage chunk is then kept from a client that did not ask.
	stripUsage := false
	if r.Stream && !r.IncludeUsage && ep != openai.Embeddings {
		var err error
		if sc.body, err = openai.AppendWithIncludeUsage(sc.body[:0], body); err != nil {
			writeError(ctx, asOpenAIError(err))
			return
		}
		body, stripUsage = sc.body, true
	}
	sc.header = append(sc.header[:0], "X-Request-Id: "...)
	sc.header = append(sc.header, sc.id...)
	sc.header = append(sc.header, "\r\n"...)
	sc.header, sc.lower = st.filters[client].appendForwarded(sc.header, &ctx.Request.Header, sc.lower)

	s.inflight.Add(1)
	rctx, cancel := context.WithCancelCause(s.base)
	watch := watchClient(ctx.Conn(), cancel)
	ex, err := client.Do(rctx, &upstream.Request{Method: "POST", Path: path, Header: sc.header, Body: body})
	if err != nil {
		watch.stop()
		cancel(nil)
		s.inflight.Add(-1)
		s.upstreamFailed(ctx, client, err, context.Cause(rctx))
		return
	}
	status := ex.StatusCode()
	ct := ex.Header().ContentType()
	if status >= 200 && status < 300 && bytes.HasPrefix(ct, []byte("text/event-stream")) {
		ctx.SetStatusCode(status)
		ctx.Response.Header.SetContentTypeBytes(ct)
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		copyUpstreamHeaders(ctx, ex)
		st := acquireStream(s, ex, watch, rctx, cancel, stripUsage)
		ctx.SetBodyStream(st, -1)
		return
	}
	sc.resp, err = ex.ReadAll(sc.resp[:0], maxResponseBytes)
	if err == nil {
		// Upstream errors pass through with their status and body.
		ctx.SetStatusCode(status)
		if len(ct) > 0 {
			ctx.Response.Header.SetContentTypeBytes(ct)
		}
		copyUpstreamHeaders(ctx, ex)
		ctx.SetBody(sc.resp)
	}
	watch.stop()
	ex.Release()
	cause := context.Cause(rctx)
	cancel(nil)
	s.inflight.Add(-1)
	if err != nil {
		s.upstreamFailed(ctx, client, err, cause)
	}
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
	switch {
	case errors.Is(cause, ErrClientGone):
		ctx.SetConnectionClose()
		return
	case errors.Is(cause, ErrShuttingDown):
		writeError(ctx, &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
			Message: "The gateway is shutting down; retry the request."})
		ctx.SetConnectionClose()
		return
	case errors.Is(err, upstream.ErrTimeout):
		s.log.Warn("upstream timeout", "upstream", c.Name(), "err", err)
		writeError(ctx, openai.UpstreamTimeout(fmt.Sprintf("The upstream %q did not answer in time.", c.Name())))
	default:
		s.log.Warn("upstream unreachable", "upstream", c.Name(), "err", err)
		writeError(ctx, openai.UpstreamUnreachable(fmt.Sprintf("The upstream %q could not be reached.", c.Name())))
	}
}

func asOpenAIError(err error) *openai.Error {
	var e *openai.Error
	if errors.As(err, &e) {
		return e
	}
	return openai.Internal(err.Error())
}
