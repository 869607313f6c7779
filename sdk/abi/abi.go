// Package abi holds the numbers of the Tollgate plugin ABI (../ABI.md):
// verdicts, phases, flags, result codes and the field numbers of the host
// imports. It is the one source both sides use: the guest SDK
// (github.com/tollgate/tollgate/sdk) and the host runtime
// (github.com/tollgate/tollgate/sdk/wasmhost). It has no dependencies and
// allocates nothing, so a guest that imports it pays only for the
// constants.
//
// Every value here is part of ABI version [Version]: a value is never
// renumbered, only added.
package abi

import "strconv"

// Version is the plugin ABI version: the value a guest's
// tollgate_abi_version export returns, and the one the host accepts.
const Version = 1

// Verdict is a phase callback's answer (ABI.md, "Verdicts"): an i32 on the
// wire, treated as unsigned.
type Verdict uint32

// Verdicts.
const (
	Continue Verdict = 0 // go on; in chunk, forward the event
	Reject   Verdict = 1 // request/response_headers: answer with the error set by reject
	Hold     Verdict = 2 // chunk: keep this event and every later one
	Release  Verdict = 3 // chunk: forward every held event and this one
	Replace  Verdict = 4 // chunk: this event's text becomes what was emitted
	Stop     Verdict = 5 // chunk: end the reply now
	Pause    Verdict = 6 // request, response_headers, chunk, end: the verdict waits on the calls dispatched
	Fail     Verdict = 7 // every phase: the callback failed; the plugin's on_error applies
	Defer    Verdict = 8 // request: as PAUSE, and later plugins may run before the response is delivered
	Respond  Verdict = 9 // request: answer the client with the reply set by respond/respond_event; nothing goes upstream
)

// String returns the verdict's ABI name in lower case ("continue", ...),
// or "verdict(N)" for a value the ABI does not define.
func (v Verdict) String() string {
	switch v {
	case Continue:
		return "continue"
	case Reject:
		return "reject"
	case Hold:
		return "hold"
	case Release:
		return "release"
	case Replace:
		return "replace"
	case Stop:
		return "stop"
	case Pause:
		return "pause"
	case Fail:
		return "fail"
	case Defer:
		return "defer"
	case Respond:
		return "respond"
	}
	return "verdict(" + strconv.FormatUint(uint64(v), 10) + ")"
}

// Phase is a set of phases: the bitmask of the tollgate_phases export and
// of skip_phases.
type Phase uint32

// Phases.
const (
	PhaseRequest         Phase = 1 // on_request: the parsed request, before anything goes upstream
	PhaseResponseHeaders Phase = 2 // on_response_headers: the upstream's status and headers
	PhaseChunk           Phase = 4 // on_chunk: every streamed event, or the whole reply once
	PhaseEnd             Phase = 8 // on_end: the exchange is over
	AllPhases                  = PhaseRequest | PhaseResponseHeaders | PhaseChunk | PhaseEnd
)

// PhaseExports are the phases in order with the names of their guest
// exports.
var PhaseExports = [...]struct {
	Phase  Phase
	Export string
}{
	{PhaseRequest, "on_request"},
	{PhaseResponseHeaders, "on_response_headers"},
	{PhaseChunk, "on_chunk"},
	{PhaseEnd, "on_end"},
}

// String names the phases in p, comma-separated ("request,chunk").
func (p Phase) String() string {
	s := ""
	for _, e := range PhaseExports {
		if p&e.Phase != 0 {
			if s != "" {
				s += ","
			}
			s += e.Export[len("on_"):]
		}
	}
	return s
}

// Chunk flags: bits of on_chunk's flags, describing one event (ABI.md,
// "on_chunk flags").
const (
	ChunkText      = 1  // the event carries a text delta
	ChunkToolCalls = 2  // the event carries tool-call deltas
	ChunkFinish    = 4  // the event carries a finish_reason
	ChunkUsage     = 8  // the event carries usage
	ChunkWhole     = 16 // not a stream: the text is the whole reply
	ChunkDone      = 32 // the stream's terminating event
	ChunkRole      = 64 // the event carries the assistant role (the first event)
)

// End flags: bits of on_end's flags, saying how an exchange ended (ABI.md,
// "on_end flags").
const (
	EndCompleted     = 1  // the upstream reply was complete
	EndClientGone    = 2  // the client disconnected
	EndUpstreamError = 4  // the upstream failed or timed out
	EndStopped       = 8  // a plugin stopped the stream
	EndRejected      = 16 // the request was rejected before or instead of forwarding
	EndCancelled     = 32 // cancelled through POST /v1/requests/{id}/cancel
)

// Result codes of host imports (ABI.md, "Conventions"). A value's length is
// never negative, so a negative result is one of these.
const (
	CodeAbsent      = -1 // there is no such value
	CodeInvalid     = -2 // a bad argument, or a value over a limit
	CodeNotAllowed  = -3 // not available in this phase
	CodeUnavailable = -4 // the service is not configured or is down
	CodeTimeout     = -5 // a dispatched call's timeout passed
	CodeTooLarge    = -6 // a dispatched call's response was over its size cap
	CodeBusy        = -7 // too many calls in flight: refused at once, not queued
)

// Limits of dispatched calls (ABI.md, "Dispatched calls").
const (
	MaxOutstandingCalls = 16 // calls a plugin may have outstanding per request
	MaxPauseRounds      = 8  // rounds of calls one callback may wait on
	MaxExpectPrefixes   = 4  // expect_response prefixes per call
	MaxExpectPrefix     = 64 // bytes of one expect_response prefix
)

// Log levels of the log import.
const (
	LevelDebug = 0
	LevelInfo  = 1
	LevelWarn  = 2
	LevelError = 3
)

// Request fields: request_field (strings) and request_int (numbers).
const (
	FieldModel     = 1
	FieldEndpoint  = 2
	FieldRequestID = 3
	FieldBody      = 4
	FieldUpstream  = 5

	IntStream       = 1
	IntMaxTokens    = 2
	IntMessages     = 3
	IntPromptTokens = 4
	IntBodyBytes    = 5
	IntPromptChars  = 6

	// What bounds the prompt's tokens (ABI.md, "Prompt bound").
	IntPromptBytes       = 7  // body bytes minus image payloads
	IntImages            = 8  // image parts
	IntUnbounded         = 9  // parts the body cannot bound (files, server tools, stored conversations)
	IntTools             = 10 // declared tools
	IntBuiltinTools      = 11 // of them, defined by the provider
	IntChoices           = 12 // completions per reply (n), at least 1
	IntPromptTokensBound = 13 // the host's upper bound of the prompt's tokens; -1 unknown

	// The request's model, from its price; -1 unknown.
	IntModelContextWindow = 14
	IntModelMaxOutput     = 15
	IntModelImageTokens   = 16
	IntModelReasoning     = 17 // 1: hidden reasoning tokens, so streamed text does not bound the output
)

// Tenant fields: tenant_field (strings) and tenant_int (numbers).
const (
	TenantID     = 1
	TenantKeyID  = 2
	TenantPlan   = 3
	TenantStatus = 4

	TenantRPM          = 1
	TenantTPM          = 2
	TenantBudgetMicros = 3
	TenantMaxTokens    = 4
	TenantPlanRPM      = 5
	TenantPlanTPM      = 6
	TenantKeyRPM       = 7
	TenantKeyTPM       = 8
)

// Usage fields of the usage import.
const (
	UsagePrompt     = 1
	UsageCompletion = 2
	UsageStatus     = 3
	UsageTextBytes  = 4
	UsageReported   = 5
)

// Limits on what a guest may hand the host per request (ABI.md).
const (
	MaxFactKey     = 64       // bytes of a fact's key
	MaxFactValue   = 64 << 10 // bytes of a fact's value
	MaxFacts       = 64       // facts per request
	MaxState       = 1 << 20  // bytes of a plugin's state per request
	MaxLogLine     = 4 << 10  // bytes of one log line
	MaxMetrics     = 32       // metric names per plugin
	MaxEmit        = 1 << 20  // bytes emitted per chunk callback
	MaxAnswer      = 4 << 20  // bytes of a request's answer (respond's body and respond_event's events together)
	MaxAnswerEvent = 1 << 20  // bytes of one respond_event
	MaxHeaderSize  = 8 << 10  // bytes of a header name plus value
)

// EndpointMCP is request_field(ENDPOINT) for a request that carries one
// MCP JSON-RPC message: its request_messages are the tool call it makes
// (ABI.md, "MCP tool calls"), and its MODEL is mcp:{server}/{tool} for a
// tools/call, mcp:{server} otherwise.
const EndpointMCP = "mcp"
