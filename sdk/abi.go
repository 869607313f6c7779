package sdk

import (
	"strconv"

	"github.com/tollgate/tollgate/sdk/abi"
)

// ABIVersion is the plugin ABI this SDK implements (sdk/ABI.md). The SDK's
// tollgate_abi_version export returns it. The ABI's numbers, here and
// below, come from package abi, which the host uses too.
const ABIVersion = abi.Version

// Verdict is a phase callback's answer to the host. Which verdicts a phase
// accepts is part of the ABI; the host treats any other as a plugin failure.
// Its String method returns the verdict's ABI name in lower case
// ("continue", ...).
type Verdict = abi.Verdict

// Verdicts (ABI.md, "Verdicts").
const (
	// Continue goes on. In the chunk phase the event is forwarded, after any
	// events held before it. Valid in every phase.
	Continue = abi.Continue
	// Reject answers the client with the error set by [Request.Reject] or
	// [Response.Reject] (a default 403 if none) and stops the exchange.
	// Request and response_headers phases only.
	Reject = abi.Reject
	// Hold keeps this event in the host; it and every later event wait, in
	// order, until a Release, Continue or Replace. Chunk phase only.
	Hold = abi.Hold
	// Release forwards every held event and this one. Chunk phase only.
	Release = abi.Release
	// Replace makes this event's text the bytes emitted during this callback
	// (empty if none); held events go first. Chunk phase only.
	Replace = abi.Replace
	// Stop ends the reply now: held events and this one are dropped, the
	// emitted text (if any) is sent as a final delta with the finish reason
	// set by [Chunk.SetFinishReason] (default "content_filter"), and the
	// upstream request is canceled. Chunk phase only.
	Stop = abi.Stop
	// Pause makes the verdict wait on the calls the handler dispatched
	// ([Dispatch]): the [OnCallResponse] handler decides it once they
	// answer. Valid in the request, response_headers and chunk phases
	// (and in end, see [OnEnd]) when the handler dispatched a call; else
	// the callback fails.
	Pause = abi.Pause
	// Defer is [Pause] for an on_request handler whose calls may wait for
	// the plugins after it: those plugins' on_request run before the
	// response reaches the [OnCallResponse] handler, and the host may
	// start this handler's calls together with theirs (a rate limit's
	// admission and a budget's hold in one round trip to the store).
	// Request phase only, and only from the phase handler itself (from
	// OnCallResponse it counts as Pause); the handler must have
	// dispatched a call, else the callback fails. What the response
	// handler sets (facts, state) is not seen by the later plugins'
	// on_request, and when a later plugin rejects the request before the
	// calls started they never start.
	Defer = abi.Defer
	// Fail makes the callback a plugin failure: the plugin's on_error
	// from the policy decides (fail_closed: the client gets an error;
	// fail_open: as [Continue]). Valid in every phase; this is how a
	// plugin leaves a call-out's timeout or refusal to the operator.
	Fail = abi.Fail
	// Respond answers the request with the reply set by [Request.Respond]
	// or [Request.RespondEvent]: nothing goes upstream, and the
	// response_headers, chunk and end phases of every plugin run on the
	// answer as on an upstream's reply. Request phase only (its
	// [OnCallResponse] handler included); without an answer set the
	// callback fails. Best through [Request.Respond].
	Respond = abi.Respond
)

// Phases is a set of phases, the bitmask of the tollgate_phases export.
type Phases = abi.Phase

// The phases a plugin can take part in.
const (
	PhaseRequest         = abi.PhaseRequest         // on_request: the parsed request, before anything goes upstream
	PhaseResponseHeaders = abi.PhaseResponseHeaders // on_response_headers: the upstream's status and headers
	PhaseChunk           = abi.PhaseChunk           // on_chunk: every streamed event, or the whole reply once
	PhaseEnd             = abi.PhaseEnd             // on_end: the exchange is over
)

// ChunkFlags describe one event passed to the chunk phase.
type ChunkFlags uint32

// Chunk flags (ABI.md, "on_chunk flags").
const (
	ChunkText      ChunkFlags = abi.ChunkText      // the event carries a text delta
	ChunkToolCalls ChunkFlags = abi.ChunkToolCalls // the event carries tool-call deltas
	ChunkFinish    ChunkFlags = abi.ChunkFinish    // the event carries a finish_reason
	ChunkUsage     ChunkFlags = abi.ChunkUsage     // the event carries usage
	ChunkWhole     ChunkFlags = abi.ChunkWhole     // not a stream: the text is the whole reply
	ChunkDone      ChunkFlags = abi.ChunkDone      // the stream's terminating event
	ChunkRole      ChunkFlags = abi.ChunkRole      // the event carries the assistant role (the first event)
)

// Has reports whether every flag in g is set in f.
func (f ChunkFlags) Has(g ChunkFlags) bool { return f&g == g }

// EndFlags say how an exchange ended.
type EndFlags uint32

// End flags (ABI.md, "on_end flags").
const (
	EndCompleted     EndFlags = abi.EndCompleted     // the upstream reply was complete
	EndClientGone    EndFlags = abi.EndClientGone    // the client disconnected
	EndUpstreamError EndFlags = abi.EndUpstreamError // the upstream failed or timed out
	EndStopped       EndFlags = abi.EndStopped       // a plugin stopped the stream
	EndRejected      EndFlags = abi.EndRejected      // the request was rejected before or instead of forwarding
	EndCancelled     EndFlags = abi.EndCancelled     // cancelled through POST /v1/requests/{id}/cancel
)

// Has reports whether every flag in g is set in f.
func (f EndFlags) Has(g EndFlags) bool { return f&g == g }

// Level is the severity of a [Log] line.
type Level int32

// Log levels.
const (
	LevelDebug Level = abi.LevelDebug
	LevelInfo  Level = abi.LevelInfo
	LevelWarn  Level = abi.LevelWarn
	LevelError Level = abi.LevelError
)

// Error is a negative result code of a host function. The four codes the
// ABI defines are the sentinel values below; compare with == or errors.Is.
// Other negative codes (from a newer host) are returned as Error values too.
type Error int32

// Host result codes (ABI.md, "Conventions").
const (
	// ErrAbsent: there is no such value (a header, fact, tenant, ...).
	ErrAbsent Error = abi.CodeAbsent
	// ErrInvalid: a bad argument, such as a header value with CR or LF, a
	// protected header, or a value over one of the host's limits.
	ErrInvalid Error = abi.CodeInvalid
	// ErrNotAllowed: the host function is not available in this phase.
	ErrNotAllowed Error = abi.CodeNotAllowed
	// ErrUnavailable: the service is not configured or is down.
	ErrUnavailable Error = abi.CodeUnavailable
)

// Error describes the code, as "tollgate: invalid argument".
func (e Error) Error() string {
	switch e {
	case ErrAbsent:
		return "tollgate: absent"
	case ErrInvalid:
		return "tollgate: invalid argument"
	case ErrNotAllowed:
		return "tollgate: not allowed in this phase"
	case ErrUnavailable:
		return "tollgate: unavailable"
	case ErrTimeout:
		return "tollgate: timed out"
	case ErrTooLarge:
		return "tollgate: response too large"
	case ErrBusy:
		return "tollgate: busy"
	case errUnstable:
		return "tollgate: the value's length kept changing between reads"
	}
	return "tollgate: host error " + strconv.Itoa(int(e))
}

// status turns a host result into an error: nil for n ≥ 0.
func status(n int32) error {
	switch {
	case n >= 0:
		return nil
	// The constants convert to error without allocating.
	case n == int32(ErrAbsent):
		return ErrAbsent
	case n == int32(ErrInvalid):
		return ErrInvalid
	case n == int32(ErrNotAllowed):
		return ErrNotAllowed
	case n == int32(ErrUnavailable):
		return ErrUnavailable
	case n == int32(ErrBusy):
		return ErrBusy
	}
	return Error(n)
}

// Request fields (request_field / request_int).
const (
	fieldModel     = abi.FieldModel
	fieldEndpoint  = abi.FieldEndpoint
	fieldRequestID = abi.FieldRequestID
	fieldBody      = abi.FieldBody
	fieldUpstream  = abi.FieldUpstream

	endpointMCP = abi.EndpointMCP

	intStream       = abi.IntStream
	intMaxTokens    = abi.IntMaxTokens
	intMessages     = abi.IntMessages
	intPromptTokens = abi.IntPromptTokens
	intBodyBytes    = abi.IntBodyBytes
	intPromptChars  = abi.IntPromptChars

	intPromptBytes        = abi.IntPromptBytes
	intImages             = abi.IntImages
	intUnbounded          = abi.IntUnbounded
	intTools              = abi.IntTools
	intBuiltinTools       = abi.IntBuiltinTools
	intChoices            = abi.IntChoices
	intPromptTokensBound  = abi.IntPromptTokensBound
	intModelContextWindow = abi.IntModelContextWindow
	intModelMaxOutput     = abi.IntModelMaxOutput
	intModelImageTokens   = abi.IntModelImageTokens
	intModelReasoning     = abi.IntModelReasoning
)

// Tenant fields (tenant_field / tenant_int).
const (
	tenantID     = abi.TenantID
	tenantKeyID  = abi.TenantKeyID
	tenantPlan   = abi.TenantPlan
	tenantStatus = abi.TenantStatus

	tenantRPM          = abi.TenantRPM
	tenantTPM          = abi.TenantTPM
	tenantBudgetMicros = abi.TenantBudgetMicros
	tenantMaxTokens    = abi.TenantMaxTokens
	tenantPlanRPM      = abi.TenantPlanRPM
	tenantPlanTPM      = abi.TenantPlanTPM
	tenantKeyRPM       = abi.TenantKeyRPM
	tenantKeyTPM       = abi.TenantKeyTPM
)

// Usage fields (usage).
const (
	usagePrompt     = abi.UsagePrompt
	usageCompletion = abi.UsageCompletion
	usageStatus     = abi.UsageStatus
	usageTextBytes  = abi.UsageTextBytes
	usageReported   = abi.UsageReported
)
