package observe

import (
	"context"
	"log/slog"
	"time"
)

// Record observes a finished request: it updates the request metrics and
// writes the access log line to log when f asks for it, with tr's trace
// id (tr nil: the request was not traced). It runs after the end phase,
// once the reply is out; the request's trace is ended with tr.Finish.
func (o *Metrics) Record(f *Finished, tr *Trace, log *slog.Logger) {
	o.observe(f)
	if f.AccessLog {
		accessLog(log, f, tr)
	}
}

// observe updates the request metrics.
func (o *Metrics) observe(f *Finished) {
	row := &f.Row
	endpoint, model := f.Endpoint, f.ModelLabel
	status := statusLabel(row.Status)
	o.requests.WithLabelValues(endpoint, model, row.Upstream, status).Inc()
	o.duration.WithLabelValues(endpoint, model, row.Upstream, status).Observe(row.Total.Seconds())
	if f.UpSent > 0 {
		o.phases.WithLabelValues("admission", row.Upstream).Observe(f.UpSent.Seconds())
	}
	if row.FirstByte >= 0 {
		o.upstream.WithLabelValues(row.Upstream).Observe(row.FirstByte.Seconds())
		o.phases.WithLabelValues("upstream_first_byte", row.Upstream).Observe((row.FirstByte - f.UpSent).Seconds())
		if f.Streamed {
			o.phases.WithLabelValues("stream", row.Upstream).Observe((row.Total - row.FirstByte).Seconds())
		}
	}
	if f.TTFT >= 0 {
		o.ttft.WithLabelValues(endpoint, model, row.Upstream).Observe(f.TTFT.Seconds())
	}
	if row.Status < 400 && (row.PromptTokens > 0 || row.CompletionTokens > 0) {
		o.tokenUsage.WithLabelValues(model, "prompt").Observe(float64(row.PromptTokens))
		o.tokenUsage.WithLabelValues(model, "completion").Observe(float64(row.CompletionTokens))
	}
	if row.TenantID != "" {
		o.tenants.Get(row.TenantID).add(row.PromptTokens, row.CompletionTokens, row.CostMicros)
	}
	if f.Unpriced {
		o.unpriced.WithLabelValues(model).Inc()
	}
	if row.GuardAction != "" {
		o.guard.WithLabelValues(row.GuardAction).Inc()
	}
}

// accessLog writes the request's access log line (docs/OBSERVABILITY.md
// lists the fields). It has no prompt or reply text and no key: key_id is
// the key's id, as the admin API lists it.
func accessLog(log *slog.Logger, f *Finished, tr *Trace) {
	row := &f.Row
	attrs := make([]slog.Attr, 0, 20)
	attrs = append(attrs, slog.String("request_id", row.RequestID))
	if id, ok := tr.traceID(); ok {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	attrs = append(attrs,
		slog.String("tenant", row.TenantID), slog.String("key_id", row.KeyID),
		slog.String("endpoint", f.Endpoint), slog.String("model", row.Model), slog.String("upstream", row.Upstream),
		slog.Int("status", row.Status), slog.Bool("stream", f.Streamed),
		slog.Float64("first_byte_ms", ms3(row.FirstByte)), slog.Float64("ttft_ms", ms3(f.TTFT)), slog.Float64("total_ms", ms3(row.Total)),
		slog.Int64("prompt_tokens", row.PromptTokens), slog.Int64("completion_tokens", row.CompletionTokens),
		slog.Int64("cost_micros", row.CostMicros), slog.Int64("reply_bytes", row.ReplyBytes), slog.String("guard_action", row.GuardAction),
		slog.Int("attempts", row.Attempts), slog.String("fallback_model", f.Fallback))
	log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}

// ms3 is d in milliseconds with microsecond precision; -1 when unknown.
func ms3(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return float64(d.Microseconds()) / 1000
}
