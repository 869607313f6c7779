package proxy

import (
	"context"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// record observes the finished request — metrics, the access log line,
// its trace (proxy/observe) — and writes its call-log row, after the end
// phase (so a budget plugin's settled cost is known) and after the reply
// is out. Requests that never found a route (bad JSON, unknown model) have
// none of these.
func (x *exchange) record(flags uint32, status int, prompt, completion int64) {
	f := observe.Finished{
		Start: x.start, Endpoint: endpointPath(x.ep), ModelLabel: x.modelLabel,
		Streamed: x.ex != nil, // a stream keeps its upstream exchange for the end phase
		UpSent:   x.upSent, TTFT: x.up.TTFT, Events: x.up.Events, Fallback: x.try.fallback,
		Plugins: x.st.pipeline.Plugins(), AccessLog: x.st.policy.Server.AccessLog,
	}
	x.fillRow(&f.Row, flags, status, prompt, completion)
	x.s.obs.Record(&f, x.trace, x.s.log)
	x.finishTrace(&f)
	row := &f.Row
	led := x.st.acct.Ledger
	if led == nil || row.TenantID == "" {
		// call_log rows belong to a tenant; requests no plugin resolved
		// a tenant for (a missing or wrong key) are in the access log.
		return
	}
	if err := led.Write(context.Background(), *row); err != nil {
		x.s.log.Error("call log: row not written", "request_id", row.RequestID, "err", err)
	}
}

// fillRow fills the request's call-log row: status is what the client was
// sent, prompt and completion the tokens used.
func (x *exchange) fillRow(row *calllog.Row, flags uint32, status int, prompt, completion int64) {
	*row = calllog.Row{
		RequestID: string(x.id), Model: string(x.req.Model), Upstream: x.client.Name(),
		Status: status, StartedAt: x.start.UTC(), FirstByte: x.firstByte, Total: x.total,
		PromptTokens: prompt, CompletionTokens: completion, Attempts: x.try.attempts, ReplyBytes: x.up.Text,
	}
	wr := x.wr
	if wr == nil {
		return
	}
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
		// No budget plugin settled it: the ledger still prices what
		// was used, so spend is known either way. (Without a ledger
		// nothing prices it: a price miss would be a store read per
		// request.)
		row.CostMicros, _ = x.st.services.Cost(wr, prompt, completion)
	}
}
