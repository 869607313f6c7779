package proxy

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// record hands the request's call log row to the ledger writer, after the
// end phase (so a budget plugin's settled cost is known). Requests that
// never found a route (bad JSON, unknown model) have no row.
func (x *exchange) record(flags uint32, status int, prompt, completion int64) {
	led := x.st.acct.ledger
	if led == nil {
		return
	}
	row := calllog.Row{
		RequestID: string(x.id), Model: string(x.req.Model), Upstream: x.client.Name(),
		Status: status, StartedAt: x.start.UTC(), FirstByte: x.firstByte, Total: time.Since(x.start),
		PromptTokens: prompt, CompletionTokens: completion, Attempts: 1, ReplyBytes: x.upText,
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
		case row.TenantID != "":
			// No budget plugin settled it: the ledger still prices
			// what was used, so spend is known either way.
			row.CostMicros, _ = x.st.services.cost(wr, prompt, completion)
		}
	}
	if row.TenantID == "" {
		// call_log rows belong to a tenant; requests no plugin resolved
		// a tenant for (a missing or wrong key) are in the access log.
		return
	}
	if err := led.Write(context.Background(), row); err != nil {
		x.s.log.Error("call log: row not written", "request_id", row.RequestID, "err", err)
	}
}
