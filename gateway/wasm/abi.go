package wasm

// ABIVersion is the plugin ABI this host implements; see sdk/ABI.md.
const ABIVersion = 1

// Verdict is a guest callback's answer (sdk/ABI.md, "Verdicts").
type Verdict uint32

// Verdicts.
const (
	Continue Verdict = 0
	Reject   Verdict = 1
	Hold     Verdict = 2
	Release  Verdict = 3
	Replace  Verdict = 4
	Stop     Verdict = 5
)

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
	return "invalid"
}

// Phase is a bit set of pipeline phases.
type Phase uint32

// Phases.
const (
	PhaseRequest         Phase = 1
	PhaseResponseHeaders Phase = 2
	PhaseChunk           Phase = 4
	PhaseEnd             Phase = 8
)

var phaseExports = []struct {
	phase Phase
	name  string
}{
	{PhaseRequest, "on_request"},
	{PhaseResponseHeaders, "on_response_headers"},
	{PhaseChunk, "on_chunk"},
	{PhaseEnd, "on_end"},
}

func (p Phase) String() string {
	s := ""
	for _, e := range phaseExports {
		if p&e.phase != 0 {
			if s != "" {
				s += ","
			}
			s += e.name[3:]
		}
	}
	return s
}

// Chunk flags passed to on_chunk.
const (
	ChunkText      uint32 = 1
	ChunkToolCalls uint32 = 2
	ChunkFinish    uint32 = 4
	ChunkUsage     uint32 = 8
	ChunkWhole     uint32 = 16
	ChunkDone      uint32 = 32
	ChunkRole      uint32 = 64
)

// End flags passed to on_end.
const (
	EndCompleted     uint32 = 1
	EndClientGone    uint32 = 2
	EndUpstreamError uint32 = 4
	EndStopped       uint32 = 8
	EndRejected      uint32 = 16
	EndCancelled     uint32 = 32
)

// Return codes of host functions.
const (
	codeAbsent      = -1
	codeInvalid     = -2
	codeNotAllowed  = -3
	codeUnavailable = -4
)

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

// Limits on what a guest may store in the host per request.
const (
	maxFactKey    = 64
	maxFactValue  = 64 << 10
	maxFacts      = 64
	maxState      = 1 << 20
	maxLogLine    = 4 << 10
	maxMetrics    = 32
	maxEmit       = 1 << 20
	maxHeaderSize = 8 << 10
)
