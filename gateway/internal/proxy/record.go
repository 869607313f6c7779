package proxy

import (
	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// record observes the finished request — metrics, the access log line,
// its trace (proxy/observe) — and writes its call-log row (accounting),
// after the end phase (so a budget plugin's settled cost is known) and
// after the reply is out; status is what the client was sent, prompt and
// completion the tokens used. Requests that never found a route (bad
// JSON, unknown model) have none of these.
func (x *exchange) record(flags uint32, status int, prompt, completion int64) {
	f := observe.Finished{
		Row: calllog.Row{
			RequestID: string(x.id), Model: string(x.req.Model), Upstream: x.client.Name(),
			Status: status, StartedAt: x.start.UTC(), FirstByte: x.firstByte, Total: x.total,
			PromptTokens: prompt, CompletionTokens: completion, Attempts: x.try.attempts, ReplyBytes: x.up.Text,
		},
		Start: x.start, Endpoint: x.endpointLabel(), ModelLabel: x.modelLabel,
		Streamed: x.ex != nil, // a stream keeps its upstream exchange for the end phase
		UpSent:   x.upSent, TTFT: x.up.TTFT, Events: x.up.Events, Fallback: x.try.fallback,
		Plugins: x.st.pipeline.Plugins(), AccessLog: x.st.policy.Server.AccessLog,
	}
	x.st.acct.Charges(&f.Row, x.wr, x.st.services, flags&wasmhost.EndCancelled != 0)
	if f.Row.TenantID != "" {
		f.Row.EndUser = x.svc.EndUser(x.wr)
	}
	x.s.obs.Record(&f, x.trace, x.s.log)
	x.finishTrace(&f)
	if err := x.st.acct.WriteRow(&f.Row); err != nil {
		x.s.log.Error("call log: row not written", "request_id", f.Row.RequestID, "err", err)
	}
}
