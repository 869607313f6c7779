package proxy

import (
	"context"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
)

// With tracing off, the tracing hooks of the request path allocate nothing
// and leave no trace behind; the plugins get an untyped nil tracer.
func TestTracingOffCostsNothing(t *testing.T) {
	x := &exchange{s: &Server{}, up: stream.Counters{TTFT: -1}}
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	row := &observe.Finished{}
	x.header = make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		x.startTrace(&ctx)
		if x.trace.CallTracer() != nil {
			t.Fatal("a tracer without tracing")
		}
		x.traceUpstreamStart()
		x.header = x.trace.AppendTraceContext(x.header[:0])
		x.traceUpstreamEnd(nil, context.Canceled)
		x.finishTrace(row)
		x.abandonTrace()
	})
	if allocs != 0 || x.trace != nil || len(x.header) != 0 {
		t.Fatalf("%.1f allocations per request, trace %v, header %q", allocs, x.trace, x.header)
	}
}
