package observe

import (
	"time"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Finished is what the metrics, the access log line and the trace need of
// a finished request. The request fills it once, on its own stack, when
// its end work runs; nothing here retains it.
type Finished struct {
	// Row is the request's call-log row (status, tokens, cost, tenant,
	// timings from the arrival: FirstByte -1 when no reply came).
	Row calllog.Row
	// Start is the request's arrival (with the monotonic clock, unlike
	// Row.StartedAt).
	Start time.Time
	// Endpoint is the route's path, e.g. /v1/chat/completions.
	Endpoint string
	// ModelLabel is the model in metrics: the policy's name or pattern
	// for it, never the client's string.
	ModelLabel string
	// Streamed: the reply was a stream.
	Streamed bool
	// UpSent is the time from the arrival to the first attempt's send;
	// 0 when nothing was sent.
	UpSent time.Duration
	// TTFT is a stream's time to its first generated text; -1: none.
	TTFT time.Duration
	// Events counts the upstream's events with text.
	Events int64
	// Fallback is the fallback model that served; "" when none did.
	Fallback string
	// Plugins are the policy's plugins (the trace names the chunk
	// phase's spans by slot).
	Plugins []*wasmhost.Plugin
	// AccessLog: the policy asks for the access log line.
	AccessLog bool
	// Unpriced: the request used tokens of a model without a price, so
	// it cost nothing (pricing.unpriced: free).
	Unpriced bool
}
