package observe

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// A streamed request's trace: the root span named by operation and model
// with the row's attributes, the upstream span named by the upstream that
// served, the stream span from the first byte to the end, and one span
// for a plugin's whole chunk phase.
func TestTraceSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	start := time.Now()
	tr := StartTrace(tp.Tracer("test"), func(string) string { return "" }, &TraceStart{
		Operation: "chat", Model: "gpt-x", Route: "/v1/chat/completions", RequestID: "r-1", Start: start})
	if tr.CallTracer() == nil {
		t.Fatal("a sampled trace gives the plugins no tracer")
	}
	tr.UpstreamStart()
	if h := string(tr.AppendTraceContext(nil)); len(h) == 0 {
		t.Fatal("no traceparent for the upstream")
	}
	tr.PluginCall("guard", 0, wasmhost.PhaseChunk, start.Add(25*time.Millisecond), time.Millisecond, 0, nil)
	tr.PluginCall("guard", 0, wasmhost.PhaseChunk, start.Add(35*time.Millisecond), time.Millisecond, 0, nil)
	tr.UpstreamEnd(&UpstreamServed{Upstream: "a", Provider: "openai", Attempts: 2, Status: 503}, nil)
	f := finished()
	f.Start, f.Row.Status = start, 503
	tr.Finish(&f)

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	if len(spans) != 4 {
		t.Fatalf("%d spans, want root, upstream, stream and one chunk span", len(spans))
	}
	root, up, st, chunk := spans["chat gpt-x"], spans["upstream a"], spans["stream"], spans["plugin  chunk"]
	if root == nil || up == nil || st == nil || chunk == nil {
		t.Fatalf("spans %v", rec.Ended())
	}
	if root.Status().Code != codes.Error || up.Status().Code != codes.Error {
		t.Errorf("a 503 is an error: root %v, upstream %v", root.Status(), up.Status())
	}
	if got := st.StartTime().Sub(start); got != f.Row.FirstByte {
		t.Errorf("stream starts %v after the arrival, want %v", got, f.Row.FirstByte)
	}
	if got := st.EndTime().Sub(start); got != f.Row.Total {
		t.Errorf("stream ends %v after the arrival, want %v", got, f.Row.Total)
	}
	if got := attr(chunk, obs.AttrCalls); got.AsInt64() != 2 {
		t.Errorf("chunk calls %v, want 2", got.Emit())
	}
	if got := attr(root, obs.AttrOutputTokens); got.AsInt64() != 3 {
		t.Errorf("output tokens %v, want 3", got.Emit())
	}
	if got := attr(up, "tollgate.attempts"); got.AsInt64() != 2 {
		t.Errorf("attempts %v, want 2", got.Emit())
	}
	for _, s := range []sdktrace.ReadOnlySpan{up, st, chunk} {
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s is not the root's child", s.Name())
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A dispatched call is a client span, the child of the callback that
// answered PAUSE; a failed call's span is an error.
func TestTraceDispatchedCalls(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	start := time.Now()
	tr := StartTrace(tp.Tracer("test"), func(string) string { return "" }, &TraceStart{
		Operation: "chat", Model: "gpt-x", Route: "/v1/chat/completions", RequestID: "r-1", Start: start})
	tr.PluginCall("mod", 0, wasmhost.PhaseRequest, start, time.Millisecond, wasmhost.Pause, nil)
	tr.DispatchedCall("mod", 0, wasmhost.PhaseRequest, "http", start.Add(time.Millisecond), 20*time.Millisecond,
		wasmhost.CallResult{Status: 200, Cached: true})
	tr.DispatchedCall("mod", 0, wasmhost.PhaseRequest, "http", start.Add(time.Millisecond), 30*time.Millisecond,
		wasmhost.CallResult{Status: wasmhost.StatusTimeout})
	var plugin sdktrace.ReadOnlySpan
	var calls []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "plugin mod request":
			plugin = s
		case "call http":
			calls = append(calls, s)
		}
	}
	if plugin == nil || len(calls) != 2 {
		t.Fatalf("spans %v", rec.Ended())
	}
	for i, c := range calls {
		if c.Parent().SpanID() != plugin.SpanContext().SpanID() || c.SpanKind() != trace.SpanKindClient {
			t.Errorf("call %d: parent %v, kind %v", i, c.Parent().SpanID(), c.SpanKind())
		}
	}
	if calls[0].Status().Code == codes.Error || !attr(calls[0], "tollgate.call.cached").AsBool() ||
		attr(calls[0], "tollgate.call.status").AsInt64() != 200 {
		t.Errorf("ok call: %v %v", calls[0].Status(), calls[0].Attributes())
	}
	if calls[1].Status().Code != codes.Error || calls[1].EndTime().Sub(calls[1].StartTime()) != 30*time.Millisecond {
		t.Errorf("timed out call: %v, %v", calls[1].Status(), calls[1].EndTime().Sub(calls[1].StartTime()))
	}
}
