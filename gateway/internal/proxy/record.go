package proxy

import (
	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/calllog"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/observe"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// rowKinds is the call log's record of the request's token kinds: none
// when the upstream reported no usage.
func (x *exchange) rowKinds() calllog.TokenKinds {
	k := x.tokenKinds()
	return calllog.TokenKinds{Reported: x.usage.Present, CachedInput: k.CachedInput, CacheWrite: k.CacheWrite,
		AudioInput: k.AudioInput, ImageInput: k.ImageInput, Reasoning: k.Reasoning, AudioOutput: k.AudioOutput, ImageOutput: k.ImageOutput}
}

// record observes the finished request — metrics, the access log line,
// its trace (proxy/observe) — and writes its call-log row (accounting),
// after the end phase (so a budget plugin's settled cost is known) and
// after the reply is out; status is what the client was sent, prompt and
// completion the tokens used. Requests that never found a route (bad
// JSON, unknown model) have none of these.
func (x *exchange) record(flags uint32, status int, prompt, completion int64) {
	f := observe.Finished{
		Row:   x.callRow(flags, status, prompt, completion),
		Start: x.start, Endpoint: x.endpointLabel(), ModelLabel: x.modelLabel,
		Streamed: x.ex != nil, // a stream keeps its upstream exchange for the end phase
		UpSent:   x.upSent, TTFT: x.up.TTFT, Events: x.up.Events, Fallback: x.try.fallback,
		Plugins: x.st.pipeline.Plugins(), AccessLog: x.st.policy.Server.AccessLog,
	}
	f.Row.WAL = x.walMark
	// Counted where the request was priced (a budget hold, its settle or
	// the ledger) and its model had no price.
	f.Unpriced = x.wr != nil && x.wr.Unpriced && prompt+completion > 0
	x.s.obs.Record(&f, x.trace, x.s.log)
	x.finishTrace(&f)
	if err := x.st.acct.WriteRow(&f.Row); err != nil {
		x.s.log.Error("call log: row not written", "request_id", f.Row.RequestID, "err", err)
	}
}

// callRow is the request's call-log row as its plugins and host services
// settled it so far.
func (x *exchange) callRow(flags uint32, status int, prompt, completion int64) calllog.Row {
	row := calllog.Row{
		RequestID: string(x.id), Model: string(x.req.Model), Upstream: x.client.Name(),
		Status: status, StartedAt: x.start.UTC(), FirstByte: x.firstByte, Total: x.total,
		PromptTokens: prompt, CompletionTokens: completion, Attempts: x.try.attempts, ReplyBytes: x.up.Text,
		Kinds: x.rowKinds(),
	}
	if x.answeredBy != "" {
		row.Upstream = x.answeredBy // "cache", or the plugin that answered
	}
	if o := x.svc.CacheOutcome(); o != hostsvc.CacheNone {
		row.Cache, row.SavedMicros = o.String(), x.svc.CacheSaved(x.wr)
	}
	x.st.acct.Charges(&row, x.wr, x.st.services, flags&wasmhost.EndCancelled != 0)
	if row.TenantID != "" {
		row.EndUser = x.svc.EndUser(x.wr)
	}
	return row
}

// logAhead makes the request's row durable in the call log's write-ahead
// log before the reply's last byte leaves (end calls it; the handler sends
// a non-streamed reply after, and fasthttp flushes a stream's terminating
// chunk after the stream's Close): a kill of the process once a client
// has seen its reply end cannot lose the row. The row written after the
// end phase (record) is the one stored; this one, with the same request
// id and start, is only replayed if the process dies first, when it lacks
// only what the end phase adds. docs/adr/0022-call-log-wal.md.
func (x *exchange) logAhead(flags uint32, status int) {
	if !x.st.acct.LogsAhead() {
		return
	}
	prompt, completion, _ := x.tokens(flags)
	row := x.callRow(flags, status, prompt, completion)
	if err := x.st.acct.LogRow(&row); err != nil {
		x.s.log.Error("call log: row not durable before the reply's end; the reply is withheld",
			"request_id", row.RequestID, "err", err)
		x.unlogged = true
		return
	}
	x.walMark = row.WAL
}

// callLogUnavailable is the answer to a request the call log cannot record.
func callLogUnavailable() *openai.Error {
	return &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: "server_error", Code: "call_log_unavailable",
		Message: "The gateway cannot record requests right now (its call log is full or its disk failing); retry the request."}
}

// refuseUnrecordable answers 503 when the call log cannot take rows
// durably, before the request costs anything.
func (x *exchange) refuseUnrecordable(ctx *fasthttp.RequestCtx) bool {
	if err := x.st.acct.Ready(); err != nil {
		writeError(ctx, callLogUnavailable())
		return true
	}
	return false
}

// withholdUnlogged replaces a non-streamed reply whose row could not be
// made durable with a 503 (the handlers' deferred call, before fasthttp
// sends the reply).
func (x *exchange) withholdUnlogged(ctx *fasthttp.RequestCtx) {
	if x.unlogged {
		writeError(ctx, callLogUnavailable())
	}
}
