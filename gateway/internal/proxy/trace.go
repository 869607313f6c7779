package proxy

import (
	"context"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// The request path's tracing hooks (the spans are observe.Trace's). With
// tracing off (Server.tracing nil) x.trace stays nil and each hook
// returns at its first comparison, allocating nothing.

// operationNames are the GenAI operation names of the endpoints.
var operationNames = map[openai.Endpoint]string{
	openai.ChatCompletions: "chat",
	openai.Completions:     "text_completion",
	openai.Embeddings:      "embeddings",
	endpointMessages:       "chat",
	endpointResponses:      "chat",
	endpointMCP:            "mcp",
}

// startTrace starts the request's root span once its route is known,
// continuing the caller's trace when the request carries a traceparent.
func (x *exchange) startTrace(ctx *fasthttp.RequestCtx) {
	t := x.s.tracing
	if t == nil {
		return
	}
	h := &ctx.Request.Header
	route := endpointPath(x.ep)
	if x.ep == endpointMCP {
		route = x.mcp.srv.label
	}
	x.trace = observe.StartTrace(t.Tracer(), func(k string) string { return string(h.Peek(k)) }, &observe.TraceStart{
		Operation: operationNames[x.ep], Model: string(x.req.Model), Route: route,
		RequestID: string(x.id), MaxTokens: int64(x.req.MaxTokens), HasMaxTokens: x.req.HasMaxTokens,
		Start: x.start,
	})
}

// traceUpstreamStart starts the upstream span, before the first attempt's
// headers are built (they carry its context; a client's own traceparent
// is not forwarded then, see headerFilter.withhold).
func (x *exchange) traceUpstreamStart() { x.trace.UpstreamStart() }

// traceUpstreamEnd ends the upstream span when the attempts are over: at
// the serving upstream's response headers, or with the failure.
func (x *exchange) traceUpstreamEnd(ex *upstream.Exchange, err error) {
	if x.trace == nil {
		return
	}
	u := observe.UpstreamServed{Attempts: x.try.attempts}
	if ex != nil {
		u.Status = ex.StatusCode()
	}
	if x.client != nil {
		u.Upstream, u.Provider = x.client.Name(), x.client.Provider()
	}
	x.trace.UpstreamEnd(&u, err)
}

// finishTrace ends the request's spans with what f records. It runs in
// the end work, after the end phase (whose plugin spans are children).
func (x *exchange) finishTrace(f *observe.Finished) {
	tr := x.trace
	if tr == nil {
		return
	}
	x.traceUpstreamEnd(nil, context.Canceled) // only if still open: no reply came
	x.trace = nil
	tr.Finish(f)
}

// abandonTrace ends the spans of a request freed without being recorded
// (it ended before the upstream phase with an error of its own).
func (x *exchange) abandonTrace() {
	tr := x.trace
	if tr == nil {
		return
	}
	x.trace = nil
	tr.Abandon()
}
