package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// record observes the finished request — metrics, the access log line and
// the call log row — after the end phase (so a budget plugin's settled
// cost is known) and after the reply is out. Requests that never found a
// route (bad JSON, unknown model) have none of these.
func (x *exchange) record(flags uint32, status int, prompt, completion int64) {
	row := calllog.Row{
		RequestID: string(x.id), Model: string(x.req.Model), Upstream: x.client.Name(),
		Status: status, StartedAt: x.start.UTC(), FirstByte: x.firstByte, Total: x.total,
		PromptTokens: prompt, CompletionTokens: completion, Attempts: x.try.attempts, ReplyBytes: x.up.Text,
	}
	if wr := x.wr; wr != nil {
		row.ReplyBytes = wr.TextBytesSent // after guards: what the client got
		if t := wr.Tenant; t != nil {
			row.TenantID, row.KeyID = t.ID, t.KeyID
		}
		if v, ok := wr.Fact("guard_action"); ok {
			row.GuardAction = string(v)
		}
		if flags&wasm.EndCancelled != 0 && row.GuardAction == "" {
			row.GuardAction = "cancelled"
		}
		switch {
		case wr.CostSettled:
			row.CostMicros = wr.CostMicros
		case row.TenantID != "" && x.st.acct.Ledger != nil:
			// No budget plugin settled it: the ledger still prices
			// what was used, so spend is known either way. (Without a
			// ledger nothing prices it: a price miss would be a store
			// read per request.)
			row.CostMicros, _ = x.st.services.Cost(wr, prompt, completion)
		}
	}
	x.observe(&row)
	led := x.st.acct.Ledger
	if led == nil || row.TenantID == "" {
		// call_log rows belong to a tenant; requests no plugin resolved
		// a tenant for (a missing or wrong key) are in the access log.
		return
	}
	if err := led.Write(context.Background(), row); err != nil {
		x.s.log.Error("call log: row not written", "request_id", row.RequestID, "err", err)
	}
}

// observe updates the request metrics, writes the access log line and
// ends the request's trace.
func (x *exchange) observe(row *calllog.Row) {
	o := x.s.obs
	endpoint := endpointPath(x.ep)
	status := statusLabel(row.Status)
	streamed := x.ex != nil // a stream keeps its upstream exchange for the end phase
	// The model label is the policy's name or pattern for it, never the
	// client's string (x.modelLabel).
	o.requests.WithLabelValues(endpoint, x.modelLabel, row.Upstream, status).Inc()
	o.duration.WithLabelValues(endpoint, x.modelLabel, row.Upstream, status).Observe(row.Total.Seconds())
	if x.upSent > 0 {
		o.phases.WithLabelValues("admission", row.Upstream).Observe(x.upSent.Seconds())
	}
	if row.FirstByte >= 0 {
		o.upstream.WithLabelValues(row.Upstream).Observe(row.FirstByte.Seconds())
		o.phases.WithLabelValues("upstream_first_byte", row.Upstream).Observe((row.FirstByte - x.upSent).Seconds())
		if streamed {
			o.phases.WithLabelValues("stream", row.Upstream).Observe((row.Total - row.FirstByte).Seconds())
		}
	}
	if x.up.TTFT >= 0 {
		o.ttft.WithLabelValues(endpoint, x.modelLabel, row.Upstream).Observe(x.up.TTFT.Seconds())
	}
	if row.Status < 400 && (row.PromptTokens > 0 || row.CompletionTokens > 0) {
		o.tokenUsage.WithLabelValues(x.modelLabel, "prompt").Observe(float64(row.PromptTokens))
		o.tokenUsage.WithLabelValues(x.modelLabel, "completion").Observe(float64(row.CompletionTokens))
	}
	if row.TenantID != "" {
		if row.PromptTokens > 0 {
			o.tokens.WithLabelValues(row.TenantID, "prompt").Add(float64(row.PromptTokens))
		}
		if row.CompletionTokens > 0 {
			o.tokens.WithLabelValues(row.TenantID, "completion").Add(float64(row.CompletionTokens))
		}
		if row.CostMicros > 0 {
			o.cost.WithLabelValues(row.TenantID).Add(float64(row.CostMicros))
		}
	}
	if row.GuardAction != "" {
		o.guard.WithLabelValues(row.GuardAction).Inc()
	}
	if x.st.policy.Server.AccessLog {
		x.accessLog(row, endpoint, streamed)
	}
	x.finishTrace(row)
}

// accessLog writes the request's access log line (docs/OBSERVABILITY.md
// lists the fields). It has no prompt or reply text and no key: key_id is
// the key's id, as the admin API lists it.
func (x *exchange) accessLog(row *calllog.Row, endpoint string, streamed bool) {
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs, slog.String("request_id", row.RequestID))
	if tr := x.trace; tr != nil && tr.root.SpanContext().IsSampled() {
		attrs = append(attrs, slog.String("trace_id", tr.root.SpanContext().TraceID().String()))
	}
	attrs = append(attrs,
		slog.String("tenant", row.TenantID), slog.String("key_id", row.KeyID),
		slog.String("endpoint", endpoint), slog.String("model", row.Model), slog.String("upstream", row.Upstream),
		slog.Int("status", row.Status), slog.Bool("stream", streamed),
		slog.Float64("first_byte_ms", ms3(row.FirstByte)), slog.Float64("ttft_ms", ms3(x.up.TTFT)), slog.Float64("total_ms", ms3(row.Total)),
		slog.Int64("prompt_tokens", row.PromptTokens), slog.Int64("completion_tokens", row.CompletionTokens),
		slog.Int64("cost_micros", row.CostMicros), slog.Int64("reply_bytes", row.ReplyBytes), slog.String("guard_action", row.GuardAction),
		slog.Int("attempts", row.Attempts), slog.String("fallback_model", x.try.fallback))
	x.s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// ms3 is d in milliseconds with microsecond precision; -1 when unknown.
func ms3(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}
