package wasmhost

import "github.com/tollgate/tollgate/sdk/abi"

// The ABI's numbers come from package abi, the one source the guest SDK
// uses too; the names here are what the gateway has always used.

// ABIVersion is the plugin ABI this host implements; see sdk/ABI.md.
const ABIVersion = abi.Version

// Verdict is a guest callback's answer (sdk/ABI.md, "Verdicts").
type Verdict = abi.Verdict

// Verdicts.
const (
	Continue = abi.Continue
	Reject   = abi.Reject
	Hold     = abi.Hold
	Release  = abi.Release
	Replace  = abi.Replace
	Stop     = abi.Stop
	Pause    = abi.Pause
	Defer    = abi.Defer
	Fail     = abi.Fail
	Respond  = abi.Respond
)

// Phase is a bit set of pipeline phases.
type Phase = abi.Phase

// Phases.
const (
	PhaseRequest         = abi.PhaseRequest
	PhaseResponseHeaders = abi.PhaseResponseHeaders
	PhaseChunk           = abi.PhaseChunk
	PhaseEnd             = abi.PhaseEnd
)

var phaseExports = abi.PhaseExports

// Chunk flags passed to on_chunk.
const (
	ChunkText      uint32 = abi.ChunkText
	ChunkToolCalls uint32 = abi.ChunkToolCalls
	ChunkFinish    uint32 = abi.ChunkFinish
	ChunkUsage     uint32 = abi.ChunkUsage
	ChunkWhole     uint32 = abi.ChunkWhole
	ChunkDone      uint32 = abi.ChunkDone
	ChunkRole      uint32 = abi.ChunkRole
)

// End flags passed to on_end.
const (
	EndCompleted     uint32 = abi.EndCompleted
	EndClientGone    uint32 = abi.EndClientGone
	EndUpstreamError uint32 = abi.EndUpstreamError
	EndStopped       uint32 = abi.EndStopped
	EndRejected      uint32 = abi.EndRejected
	EndCancelled     uint32 = abi.EndCancelled
)

// Return codes of host functions.
const (
	codeAbsent      = abi.CodeAbsent
	codeInvalid     = abi.CodeInvalid
	codeNotAllowed  = abi.CodeNotAllowed
	codeUnavailable = abi.CodeUnavailable
	codeTimeout     = abi.CodeTimeout
	codeTooLarge    = abi.CodeTooLarge
	codeBusy        = abi.CodeBusy
)

// Statuses of a dispatched call that failed (CallResult.Status).
const (
	StatusInvalid     = abi.CodeInvalid     // the service could not parse the request
	StatusUnavailable = abi.CodeUnavailable // connection refused or reset, DNS, TLS, service down
	StatusTimeout     = abi.CodeTimeout     // the grant's timeout passed
	StatusTooLarge    = abi.CodeTooLarge    // the response body was over the grant's cap
	StatusBusy        = abi.CodeBusy        // the plugin's in-flight cap was reached
)

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

// Limits on what a guest may store in the host per request.
const (
	maxFactKey     = abi.MaxFactKey
	maxFactValue   = abi.MaxFactValue
	maxFacts       = abi.MaxFacts
	maxState       = abi.MaxState
	maxLogLine     = abi.MaxLogLine
	maxMetrics     = abi.MaxMetrics
	maxEmit        = abi.MaxEmit
	maxAnswer      = abi.MaxAnswer
	maxAnswerEvent = abi.MaxAnswerEvent
	maxHeaderSize  = abi.MaxHeaderSize

	maxOutstandingCalls = abi.MaxOutstandingCalls
	maxPauseRounds      = abi.MaxPauseRounds
	maxExpectPrefixes   = abi.MaxExpectPrefixes
	maxExpectPrefix     = abi.MaxExpectPrefix
)
