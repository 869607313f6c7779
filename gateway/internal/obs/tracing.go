package obs

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

// Tracing is the gateway's OpenTelemetry tracing: a tracer provider that
// samples new traces at the configured ratio (following a caller's
// decision for requests that carry one) and exports spans over OTLP/HTTP
// through a batch span processor, which never blocks a request: when its
// queue is full, spans are dropped. A nil *Tracing is tracing off.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewTracing returns the tracing c configures, or nil when it is off. The
// service name is tollgate unless OTEL_SERVICE_NAME says otherwise;
// OTEL_RESOURCE_ATTRIBUTES adds attributes.
func NewTracing(ctx context.Context, c config.Tracing, log *slog.Logger) (*Tracing, error) {
	if !c.Enabled {
		return nil, nil
	}
	var opts []otlptracehttp.Option
	if c.TracesURL != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(c.TracesURL))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("tollgate"), semconv.ServiceVersion(buildVersion())),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// Only a malformed OTEL_RESOURCE_ATTRIBUTES gets here: export with
		// what was detected.
		log.Warn("tracing: resource attributes", "err", err)
	}
	// Export failures reach the global handler: log them, once per
	// failure (the batch processor retries on its own schedule).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: export failed", "err", err)
	}))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.Ratio))),
	)
	return &Tracing{tp: tp, tracer: tp.Tracer("github.com/tollgate/tollgate/gateway")}, nil
}

// buildVersion is the VCS revision the binary was built from, else its
// module version.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			return s.Value
		}
	}
	return bi.Main.Version
}

// Tracer is the gateway's tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Shutdown exports the spans still queued (within ctx) and stops the
// exporter. Nil-safe.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Extract returns ctx with the remote span context of a W3C traceparent
// (and tracestate) header, when get finds a valid one.
func Extract(ctx context.Context, get func(key string) string) context.Context {
	return propagation.TraceContext{}.Extract(ctx, headerGetter(get))
}

type headerGetter func(string) string

func (g headerGetter) Get(key string) string { return g(key) }
func (g headerGetter) Set(string, string)    {}
func (g headerGetter) Keys() []string        { return []string{"traceparent", "tracestate"} }

// AppendTraceContext appends the W3C traceparent header line of sc (and
// tracestate when it has one) to dst as "Name: value\r\n" lines.
func AppendTraceContext(dst []byte, sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return dst
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	dst = append(dst, "traceparent: 00-"...)
	dst = hex.AppendEncode(dst, tid[:])
	dst = append(dst, '-')
	dst = hex.AppendEncode(dst, sid[:])
	if sc.IsSampled() {
		dst = append(dst, "-01\r\n"...)
	} else {
		dst = append(dst, "-00\r\n"...)
	}
	if ts := sc.TraceState(); ts.Len() > 0 {
		dst = append(dst, "tracestate: "...)
		dst = append(dst, ts.String()...)
		dst = append(dst, "\r\n"...)
	}
	return dst
}

// Span attribute keys the gateway sets: the OpenTelemetry semantic
// conventions' names where one exists (GenAI, HTTP), tollgate.* otherwise.
var (
	AttrOperation    = semconv.GenAIOperationNameKey
	AttrRequestModel = semconv.GenAIRequestModelKey
	AttrMaxTokens    = semconv.GenAIRequestMaxTokensKey
	AttrInputTokens  = semconv.GenAIUsageInputTokensKey
	AttrOutputTokens = semconv.GenAIUsageOutputTokensKey
	AttrProvider     = semconv.GenAIProviderNameKey
	AttrMethod       = semconv.HTTPRequestMethodKey
	AttrRoute        = semconv.HTTPRouteKey
	AttrStatus       = semconv.HTTPResponseStatusCodeKey
	AttrServer       = semconv.ServerAddressKey
	AttrErrorType    = semconv.ErrorTypeKey

	AttrRequestID   = attribute.Key("tollgate.request_id")
	AttrTenant      = attribute.Key("tollgate.tenant.id")
	AttrUpstream    = attribute.Key("tollgate.upstream")
	AttrCost        = attribute.Key("tollgate.cost_usd_micros")
	AttrGuardAction = attribute.Key("tollgate.guard_action")
	AttrTTFT        = attribute.Key("tollgate.time_to_first_token_ms")
	AttrPlugin      = attribute.Key("tollgate.plugin")
	AttrPhase       = attribute.Key("tollgate.phase")
	AttrVerdict     = attribute.Key("tollgate.verdict")
	AttrCalls       = attribute.Key("tollgate.calls")
	AttrBusy        = attribute.Key("tollgate.busy_ms")
	AttrEvents      = attribute.Key("tollgate.stream.events")
)
