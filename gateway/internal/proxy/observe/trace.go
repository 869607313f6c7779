package observe

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
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
// With tracing off there is no Trace: the request holds a nil one, and
// each method returns at its first comparison, allocating nothing.

// Trace is one traced request's spans. A nil *Trace is a request not
// traced; every method accepts it.
type Trace struct {
	tracer trace.Tracer
	ctx    context.Context // carries root
	root   trace.Span
	up     trace.Span // nil before the upstream phase and after it ended
	upSC   trace.SpanContext
	// chunks aggregates each plugin's (by slot) chunk-phase callbacks.
	chunks []chunkCalls
	// paused carries the span of the last callback that answered PAUSE:
	// the parent of its dispatched calls' spans (trace_dispatch.go).
	paused context.Context
}

type chunkCalls struct {
	first, last time.Time
	calls       int64
	busy        time.Duration
	failed      bool
}

var _ wasmhost.CallTracer = (*Trace)(nil)

// TraceStart is what a request's root span is made of.
type TraceStart struct {
	Operation string // the GenAI operation name, e.g. chat
	Model     string // as the client asked for it
	Route     string // the endpoint's path
	RequestID string
	MaxTokens int64 // with HasMaxTokens
	// HasMaxTokens: the request set a maximum.
	HasMaxTokens bool
	Start        time.Time // the request's arrival
}

// StartTrace starts a request's root span with tracer once its route is
// known, continuing the caller's trace when the client's request header
// lines, read through peek, carry a traceparent. With tracing off there
// is no tracer: do not call it.
func StartTrace(tracer trace.Tracer, peek func(key string) string, in *TraceStart) *Trace {
	parent := obs.Extract(context.Background(), peek)
	attrs := []attribute.KeyValue{
		obs.AttrOperation.String(in.Operation), obs.AttrRequestModel.String(in.Model),
		obs.AttrMethod.String("POST"), obs.AttrRoute.String(in.Route),
		obs.AttrRequestID.String(in.RequestID),
	}
	if in.HasMaxTokens {
		attrs = append(attrs, obs.AttrMaxTokens.Int64(in.MaxTokens))
	}
	tr := &Trace{tracer: tracer}
	tr.ctx, tr.root = tr.tracer.Start(parent, in.Operation+" "+in.Model, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(in.Start), trace.WithAttributes(attrs...))
	return tr
}

// CallTracer is what the plugins' wasmhost.Request reports callbacks to: nil
// (an untyped nil interface) unless the request is traced and sampled.
func (tr *Trace) CallTracer() wasmhost.CallTracer {
	if tr == nil || !tr.root.IsRecording() {
		return nil
	}
	return tr
}

// PluginCall implements wasmhost.CallTracer.
func (tr *Trace) PluginCall(plugin string, slot int, ph wasmhost.Phase, start time.Time, d time.Duration, v wasmhost.Verdict, err error) {
	if ph == wasmhost.PhaseChunk {
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
	ctx, sp := tr.tracer.Start(tr.ctx, "plugin "+plugin+" "+phase, trace.WithTimestamp(start),
		trace.WithAttributes(obs.AttrPlugin.String(plugin), obs.AttrPhase.String(phase)))
	if err == nil && v == wasmhost.Pause {
		tr.paused = ctx
	}
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
	} else {
		sp.SetAttributes(obs.AttrVerdict.String(v.String()))
	}
	sp.End(trace.WithTimestamp(start.Add(d)))
}

// UpstreamStart starts the upstream span, before the first attempt's
// headers are built (they carry its context).
func (tr *Trace) UpstreamStart() {
	if tr == nil {
		return
	}
	_, tr.up = tr.tracer.Start(tr.ctx, "upstream", trace.WithSpanKind(trace.SpanKindClient))
	tr.upSC = tr.up.SpanContext()
}

// AppendTraceContext appends the traceparent (and tracestate) header lines
// of the upstream span to the header lines sent upstream; dst unchanged
// without tracing.
func (tr *Trace) AppendTraceContext(dst []byte) []byte {
	if tr == nil {
		return dst
	}
	return obs.AppendTraceContext(dst, tr.upSC)
}

// UpstreamServed is how the attempts ended, for the upstream span.
type UpstreamServed struct {
	// Upstream and Provider name the last upstream tried; "" when none was.
	Upstream, Provider string
	Attempts           int
	Status             int // the response's status; 0 without one
}

// UpstreamEnd ends the upstream span when the attempts are over: at the
// serving upstream's response headers, or with the failure err. It does
// nothing when the span is not open.
func (tr *Trace) UpstreamEnd(u *UpstreamServed, err error) {
	if tr == nil || tr.up == nil {
		return
	}
	sp := tr.up
	tr.up = nil
	if u.Upstream != "" {
		sp.SetName("upstream " + u.Upstream)
		sp.SetAttributes(obs.AttrUpstream.String(u.Upstream), obs.AttrProvider.String(u.Provider))
	}
	sp.SetAttributes(attribute.Int("tollgate.attempts", u.Attempts))
	switch {
	case err != nil:
		sp.SetStatus(codes.Error, err.Error())
		sp.SetAttributes(obs.AttrErrorType.String(errorType(err)))
	default:
		sp.SetAttributes(obs.AttrStatus.Int(u.Status))
		if u.Status >= 500 {
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

// traceID is the trace's id when it is sampled.
func (tr *Trace) traceID() (string, bool) {
	if tr == nil || !tr.root.SpanContext().IsSampled() {
		return "", false
	}
	return tr.root.SpanContext().TraceID().String(), true
}

// Finish ends the request's spans with what f records. It runs in the end
// work, after the end phase (whose plugin spans are children).
func (tr *Trace) Finish(f *Finished) {
	if tr == nil {
		return
	}
	root := tr.root
	if !root.IsRecording() {
		root.End()
		return
	}
	row := &f.Row
	if f.Streamed && row.FirstByte >= 0 {
		_, sp := tr.tracer.Start(tr.ctx, "stream", trace.WithTimestamp(f.Start.Add(row.FirstByte)),
			trace.WithAttributes(obs.AttrEvents.Int64(f.Events)))
		sp.End(trace.WithTimestamp(f.Start.Add(row.Total)))
	}
	tr.endChunks(f.Plugins)
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
	if f.TTFT >= 0 {
		attrs = append(attrs, obs.AttrTTFT.Float64(ms3(f.TTFT)))
	}
	root.SetAttributes(attrs...)
	if row.Status >= 500 {
		root.SetStatus(codes.Error, "")
	}
	root.End()
}

// endChunks makes each plugin's one span of the chunk phase.
func (tr *Trace) endChunks(plugins []*wasmhost.Plugin) {
	for slot, c := range tr.chunks {
		if c.calls == 0 {
			continue
		}
		name := ""
		if slot < len(plugins) {
			name = plugins[slot].Name()
		}
		_, sp := tr.tracer.Start(tr.ctx, "plugin "+name+" chunk", trace.WithTimestamp(c.first),
			trace.WithAttributes(obs.AttrPlugin.String(name), obs.AttrPhase.String("chunk"),
				obs.AttrCalls.Int64(c.calls), obs.AttrBusy.Float64(ms3(c.busy))))
		if c.failed {
			sp.SetStatus(codes.Error, "a callback failed")
		}
		sp.End(trace.WithTimestamp(c.last))
	}
}

// Abandon ends the spans of a request freed without being finished (it
// ended before the upstream phase with an error of its own).
func (tr *Trace) Abandon() {
	if tr == nil {
		return
	}
	if tr.up != nil {
		tr.up.End()
	}
	tr.root.End()
}
