package observe

import (
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gateway/internal/obs"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var _ wasmhost.DispatchTracer = (*Trace)(nil)

// Attributes of a dispatched call's span.
const (
	attrService    = attribute.Key("tollgate.call.service")
	attrCallStatus = attribute.Key("tollgate.call.status")
	attrCached     = attribute.Key("tollgate.call.cached")
)

// DispatchedCall implements wasmhost.DispatchTracer: one client span per
// call a plugin dispatched, from its start to its response, a child of
// the callback that answered PAUSE (in the chunk phase, whose callbacks
// have no span each, of the request's).
func (tr *Trace) DispatchedCall(plugin string, slot int, ph wasmhost.Phase, service string, start time.Time, d time.Duration, res wasmhost.CallResult) {
	parent := tr.ctx
	if tr.paused != nil && ph != wasmhost.PhaseChunk {
		parent = tr.paused
	}
	_, sp := tr.tracer.Start(parent, "call "+service, trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start),
		trace.WithAttributes(obs.AttrPlugin.String(plugin), obs.AttrPhase.String(ph.String()),
			attrService.String(service), attrCallStatus.Int(res.Status), attrCached.Bool(res.Cached)))
	if res.Status < 0 || res.Status >= 500 {
		sp.SetStatus(codes.Error, "status "+strconv.Itoa(res.Status))
	}
	sp.End(trace.WithTimestamp(start.Add(d)))
}
