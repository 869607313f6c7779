package sdk

import "strconv"

// ABIVersion is the plugin ABI this SDK implements (sdk/ABI.md). The SDK's
// tollgate_abi_version export returns it.
const ABIVersion = 1

// Verdict is a phase callback's answer to the host. Which verdicts a phase
// accepts is part of the ABI; the host treats any other as a plugin failure.
type Verdict int32

// Verdicts (ABI.md, "Verdicts").
const (
	// Continue goes on. In the chunk phase the event is forwarded, after any
	// events held before it. Valid in every phase.
	Continue Verdict = 0
	// Reject answers the client with the error set by [Request.Reject] or
	// [Response.Reject] (a default 403 if none) and stops the exchange.
	// Request and response_headers phases only.
	Reject Verdict = 1
	// Hold keeps this event in the host; it and every later event wait, in
	// order, until a Release, Continue or Replace. Chunk phase only.
	Hold Verdict = 2
	// Release forwards every held event and this one. Chunk phase only.
	Release Verdict = 3
	// Replace makes this event's text the bytes emitted during this callback
	// (empty if none); held events go first. Chunk phase only.
	Replace Verdict = 4
	// Stop ends the reply now: held events and this one are dropped, the
	// emitted text (if any) is sent as a final delta with the finish reason
	// set by [Chunk.SetFinishReason] (default "content_filter"), and the
	// upstream request is canceled. Chunk phase only.
	Stop Verdict = 5
)

// String returns the verdict's ABI name in lower case ("continue", ...).
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
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// Phases is a set of phases, the bitmask of the tollgate_phases export.
type Phases uint32

// The phases a plugin can take part in.
const (
	PhaseRequest         Phases = 1 // on_request: the parsed request, before anything goes upstream
	PhaseResponseHeaders Phases = 2 // on_response_headers: the upstream's status and headers
	PhaseChunk           Phases = 4 // on_chunk: every streamed event, or the whole reply once
	PhaseEnd             Phases = 8 // on_end: the exchange is over
)

// ChunkFlags describe one event passed to the chunk phase.
type ChunkFlags uint32

// Chunk flags (ABI.md, "on_chunk flags").
const (
	ChunkText      ChunkFlags = 1  // the event carries a text delta
	ChunkToolCalls ChunkFlags = 2  // the event carries tool-call deltas
	ChunkFinish    ChunkFlags = 4  // the event carries a finish_reason
	ChunkUsage     ChunkFlags = 8  // the event carries usage
	ChunkWhole     ChunkFlags = 16 // not a stream: the text is the whole reply
	ChunkDone      ChunkFlags = 32 // the stream's terminating event
	ChunkRole      ChunkFlags = 64 // the event carries the assistant role (the first event)
)

// Has reports whether every flag in g is set in f.
func (f ChunkFlags) Has(g ChunkFlags) bool { return f&g == g }

// EndFlags say how an exchange ended.
type EndFlags uint32

// End flags (ABI.md, "on_end flags").
const (
	EndCompleted     EndFlags = 1  // the upstream reply was complete
	EndClientGone    EndFlags = 2  // the client disconnected
	EndUpstreamError EndFlags = 4  // the upstream failed or timed out
	EndStopped       EndFlags = 8  // a plugin stopped the stream
	EndRejected      EndFlags = 16 // the request was rejected before or instead of forwarding
	EndCancelled     EndFlags = 32 // cancelled through POST /v1/requests/{id}/cancel
)

// Has reports whether every flag in g is set in f.
func (f EndFlags) Has(g EndFlags) bool { return f&g == g }

// Level is the severity of a [Log] line.
type Level int32

// Log levels.
const (
	LevelDebug Level = 0
	LevelInfo  Level = 1
	LevelWarn  Level = 2
	LevelError Level = 3
)

// Error is a negative result code of a host function. The four codes the
// ABI defines are the sentinel values below; compare with == or errors.Is.
// Other negative codes (from a newer host) are returned as Error values too.
type Error int32

// Host result codes (ABI.md, "Conventions").
const (
	// ErrAbsent: there is no such value (a header, fact, tenant, ...).
	ErrAbsent Error = -1
	// ErrInvalid: a bad argument, such as a header value with CR or LF, a
	// protected header, or a value over one of the host's limits.
	ErrInvalid Error = -2
	// ErrNotAllowed: the host function is not available in this phase.
	ErrNotAllowed Error = -3
	// ErrUnavailable: the service is not configured or is down.
	ErrUnavailable Error = -4
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
	}
	return Error(n)
}

// Request fields (request_field / request_int).
const (
	fieldModel     = 1
	fieldEndpoint  = 2
	fieldRequestID = 3
	fieldBody      = 4
	fieldUpstream  = 5

	intStream       = 1
	intMaxTokens    = 2
	intMessages     = 3
	intPromptTokens = 4
	intBodyBytes    = 5
	intPromptChars  = 6
)

// Tenant fields (tenant_field / tenant_int).
const (
	tenantID     = 1
	tenantKeyID  = 2
	tenantPlan   = 3
	tenantStatus = 4

	tenantRPM          = 1
	tenantTPM          = 2
	tenantBudgetMicros = 3
	tenantMaxTokens    = 4
	tenantPlanRPM      = 5
	tenantPlanTPM      = 6
	tenantKeyRPM       = 7
	tenantKeyTPM       = 8
)

// Usage fields (usage).
const (
	usagePrompt     = 1
	usageCompletion = 2
	usageStatus     = 3
	usageTextBytes  = 4
	usageReported   = 5
)
