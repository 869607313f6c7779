package proxy

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// Tracing (docs/OBSERVABILITY.md). A request that found a route is one
// server span, named as the OpenTelemetry GenAI conventions say
// ("chat mock-1"), with children: one per plugin callback of the request,
// response_headers and end phases; one per plugin for the whole chunk
// phase (a span per event would outnumber everything else); the upstream
// from the first attempt's send to the response headers of the one that
// served (all retries included); and the stream, from those headers to
// its last event. The upstream request carries a W3C traceparent naming
// the upstream span, and a request that arrives with one continues the
// caller's trace.
//
// With tracing off (Server.tracing nil) none of this exists: x.trace stays
// nil and each hook below returns at its first comparison, allocating
// nothing.

// reqTrace is one traced request's spans.
type reqTrace struct {
	tracer trace.Tracer
	ctx    context.Context // carries root
	root   trace.Span
	up     trace.Span // nil before the upstream phase and after it ended
	upSC   trace.SpanContext
	// chunks aggregates each plugin's (by slot) chunk-phase callbacks.
	chunks []chunkCalls
}

type chunkCalls struct {
	first, last time.Time
	calls       int64
	busy        time.Duration
	failed      bool
}

var _ wasm.CallTracer = (*reqTrace)(nil)

// operationNames are the GenAI operation names of the endpoints.
var operationNames = map[openai.Endpoint]string{
	openai.ChatCompletions: "chat",
	openai.Completions:     "text_completion",
	openai.Embeddings:      "embeddings",
	endpointMessages:       "chat",
}

// startTrace starts the request's root span once its route is known,
// continuing the caller's trace when the request carries a traceparent.
func (x *exchange) startTrace(ctx *fasthttp.RequestCtx) {
	t := x.s.tracing
	if t == nil {
		return
	}
	h := &ctx.Request.Header
	parent := obs.Extract(context.Background(), func(k string) string { return string(h.Peek(k)) })
	op := operationNames[x.ep]
	model := string(x.req.Model)
	attrs := []attribute.KeyValue{
		obs.AttrOperation.String(op), obs.AttrRequestModel.String(model),
		obs.AttrMethod.String("POST"), obs.AttrRoute.String(endpointPath(x.ep)),
		obs.AttrRequestID.String(string(x.id)),
	}
	if x.req.HasMaxTokens {
		attrs = append(attrs, obs.AttrMaxTokens.Int64(int64(x.req.MaxTokens)))
	}
	tr := &reqTrace{tracer: t.Tracer()}
	tr.ctx, tr.root = tr.tracer.Start(parent, op+" "+model, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(x.start), trace.WithAttributes(attrs...))
	x.trace = tr
}

// callTracer is what the plugins' wasm.Request reports callbacks to: nil
// (an untyped nil interface) unless the request is traced and sampled.
func (tr *reqTrace) callTracer() wasm.CallTracer {
	if tr == nil || !tr.root.IsRecording() {
		return nil
	}
	return tr
}

// PluginCall implements wasm.CallTracer.
func (tr *reqTrace) PluginCall(plugin string, slot int, ph wasm.Phase, start time.Time, d time.Duration, v wasm.Verdict, err error) {
	if ph == wasm.PhaseChunk {
		for len(tr.chunks) <= slot {
			tr.chunks = append(tr.chunks, chunkCalls{})
		}
		c := &tr.chunks[slot]
		if c.calls == 0 {
			c.first = start
		}
		c.calls++
		c.busy += d
		c.last = start.Add(d)
		c.failed = c.failed || err != nil
		return
	}
	phase := ph.String()
	_, sp := tr.tracer.Start(tr.ctx, "plugin "+plugin+" "+phase, trace.WithTimestamp(start),
		trace.WithAttributes(obs.AttrPlugin.String(plugin), obs.AttrPhase.String(phase)))
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	} else {
		sp.SetAttributes(obs.AttrVerdict.String(v.String()))
	}
	sp.End(trace.WithTimestamp(start.Add(d)))
}

// traceUpstreamStart starts the upstream span, before the first attempt's
// headers are built (they carry its context).
func (x *exchange) traceUpstreamStart() {
	tr := x.trace
	if tr == nil {
		return
	}
	_, tr.up = tr.tracer.Start(tr.ctx, "upstream", trace.WithSpanKind(trace.SpanKindClient))
	tr.upSC = tr.up.SpanContext()
}

// appendTraceContext appends the traceparent (and tracestate) header lines
// of the upstream span to the header lines sent upstream; dst unchanged
// without tracing. A client's own traceparent is not forwarded then (see
// headerFilter.withhold).
func (tr *reqTrace) appendTraceContext(dst []byte) []byte {
	if tr == nil {
		return dst
	}
	return obs.AppendTraceContext(dst, tr.upSC)
}

// traceUpstreamEnd ends the upstream span when the attempts are over: at
// the serving upstream's response headers, or with the failure.
func (x *exchange) traceUpstreamEnd(ex *upstream.Exchange, err error) {
	tr := x.trace
	if tr == nil || tr.up == nil {
		return
	}
	status := 0
	if ex != nil {
		status = ex.StatusCode()
	}
	sp := tr.up
	tr.up = nil
	if x.client != nil {
		sp.SetName("upstream " + x.client.Name())
		sp.SetAttributes(obs.AttrUpstream.String(x.client.Name()), obs.AttrProvider.String(x.client.Provider()))
	}
	sp.SetAttributes(attribute.Int("tollgate.attempts", x.try.attempts))
	switch {
	case err != nil:
		sp.SetStatus(codes.Error, err.Error())
		sp.SetAttributes(obs.AttrErrorType.String(errorType(err)))
	default:
		sp.SetAttributes(obs.AttrStatus.Int(status))
		if status >= 500 {
			sp.SetStatus(codes.Error, "")
		}
	}
	sp.End()
}

// errorType is the error.type of an upstream failure.
func errorType(err error) string {
	var e *openai.Error
	switch {
	case errors.Is(err, upstream.ErrTimeout):
		return "timeout"
	case errors.Is(err, upstream.ErrCanceled), errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.As(err, &e) && e.Code != "":
		return e.Code
	}
	return "unreachable"
}

// finishTrace ends the request's spans with what its row records. It runs
// in the finisher, after the end phase (whose plugin spans are children).
func (x *exchange) finishTrace(row *calllog.Row) {
	tr := x.trace
	if tr == nil {
		return
	}
	x.trace = nil
	x.traceUpstreamEnd(nil, context.Canceled) // only if still open: no reply came
	root := tr.root
	if !root.IsRecording() {
		root.End()
		return
	}
	if x.ex != nil && x.firstByte >= 0 { // a stream
		_, sp := tr.tracer.Start(tr.ctx, "stream", trace.WithTimestamp(x.start.Add(x.firstByte)),
			trace.WithAttributes(obs.AttrEvents.Int64(x.up.Events)))
		sp.End(trace.WithTimestamp(x.start.Add(x.total)))
	}
	for slot, c := range tr.chunks {
		if c.calls == 0 {
			continue
		}
		name := ""
		if ps := x.st.pipeline.Plugins(); slot < len(ps) {
			name = ps[slot].Name()
		}
		_, sp := tr.tracer.Start(tr.ctx, "plugin "+name+" chunk", trace.WithTimestamp(c.first),
			trace.WithAttributes(obs.AttrPlugin.String(name), obs.AttrPhase.String("chunk"),
				obs.AttrCalls.Int64(c.calls), obs.AttrBusy.Float64(ms3(c.busy))))
		if c.failed {
			sp.SetStatus(codes.Error, "a callback failed")
		}
		sp.End(trace.WithTimestamp(c.last))
	}
	attrs := []attribute.KeyValue{
		obs.AttrStatus.Int(row.Status), obs.AttrUpstream.String(row.Upstream),
		obs.AttrInputTokens.Int64(row.PromptTokens), obs.AttrOutputTokens.Int64(row.CompletionTokens),
	}
	if row.TenantID != "" {
		attrs = append(attrs, obs.AttrTenant.String(row.TenantID))
	}
	if row.CostMicros > 0 {
		attrs = append(attrs, obs.AttrCost.Int64(row.CostMicros))
	}
	if row.GuardAction != "" {
		attrs = append(attrs, obs.AttrGuardAction.String(row.GuardAction))
	}
	if x.up.TTFT >= 0 {
		attrs = append(attrs, obs.AttrTTFT.Float64(ms3(x.up.TTFT)))
	}
	root.SetAttributes(attrs...)
	if row.Status >= 500 {
		root.SetStatus(codes.Error, "")
	}
	root.End()
}

// abandonTrace ends the spans of a request freed without being recorded
// (it ended before the upstream phase with an error of its own).
func (x *exchange) abandonTrace() {
	tr := x.trace
	if tr == nil {
		return
	}
	x.trace = nil
	if tr.up != nil {
		tr.up.End()
	}
	tr.root.End()
}
