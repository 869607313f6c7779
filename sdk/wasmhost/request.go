package wasmhost

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/sdk/internal/convo"
)

// HeaderPeeker looks up a header by name, case-insensitively; it returns
// nil when the header is absent. The slice is read before the host call
// returns and not kept. fasthttp's RequestHeader and ResponseHeader satisfy
// it; the runtime needs nothing else of an HTTP server.
type HeaderPeeker interface {
	PeekBytes(name []byte) []byte
}

// Tenant is the immutable snapshot of the tenant a request belongs to, as
// resolved by the tenant service. Plugins read it through tenant_field and
// tenant_int.
type Tenant struct {
	ID, KeyID, Plan, Status string
	// RPM and TPM are the effective limits: the key's where set, else the
	// plan's. PlanX and KeyX are each on its own (-1: not set).
	RPM, TPM         int64
	BudgetMicros     int64
	MaxTokens        int64
	PlanRPM, PlanTPM int64
	KeyRPM, KeyTPM   int64
	// Plugins is the tenant's plan's and own plugin settings, compiled
	// for the pipeline (Pipeline.Override); nil: none. The plugins after
	// the one that set the Tenant follow it (chain.go).
	Plugins *Override
}

// Services serves the host calls of plugins (`call`). The name selects the
// service; req (a copy of the guest's bytes) and the result are the
// service's bytes (see sdk/ABI.md). A nil Services, or ErrNoService, makes
// `call` return UNAVAILABLE; ErrBadServiceRequest makes it INVALID.
type Services interface {
	Call(r *Request, name string, req []byte) ([]byte, error)
}

// TokenKinds are a request's tokens of kinds priced apart from the
// prompt's and the completion's base rates. The first four are part of
// the prompt tokens, the last three of the completion tokens.
type TokenKinds struct {
	CachedInput int64 // read from the provider's prompt cache
	CacheWrite  int64 // written to the provider's prompt cache
	AudioInput  int64
	ImageInput  int64
	Reasoning   int64 // hidden reasoning ("thinking")
	AudioOutput int64
	ImageOutput int64
}

// Header is one header a plugin set.
type Header struct{ Name, Value []byte }

// Request is the host-side state of one request that plugins read and
// write through host functions. The gateway fills the input fields before
// the first phase; plugins' outputs are read after each phase. A Request is
// used by one phase call at a time (phases of one request never run
// concurrently) and is pooled: get it with AcquireRequest, return it with
// ReleaseRequest.
type Request struct {
	// Inputs, set by the gateway. Byte slices must stay valid until the
	// request ends.
	Model, Endpoint, RequestID, Body, Upstream []byte
	Stream                                     bool
	MaxTokens                                  int64 // -1 when absent
	Messages, PromptTokens, PromptChars        int64
	Bound                                      BoundFacts
	ClientHeader                               HeaderPeeker
	UpstreamHeader                             HeaderPeeker // set once the upstream answered
	Tenant                                     *Tenant
	// Services serves the request's `call`s. It is per request so that
	// it can carry the request's own service state as a typed value (the
	// gateway's is a hostsvc.Session inside its exchange).
	Services Services
	// Refacts, when set, re-derives the request's facts (SetFacts) from
	// Body after a plugin rewrote it (set_message_text), as the gateway
	// derived them from the client's body; an error refuses the rewrite
	// (the body and its facts stay as they were: Refacts is called again
	// on the old body). Nil: the facts stay as set.
	Refacts func(r *Request) error
	// MaxBodyBytes bounds a rewritten body (0: no bound): a rewrite that
	// makes it longer is refused.
	MaxBodyBytes int
	// Tracer, when set, is told about each plugin callback (tracing);
	// nil for requests that are not traced.
	Tracer CallTracer
	// Context, when set, is the parent of the request's dispatched calls'
	// contexts: when it ends they are cancelled and a wait for them ends.
	// nil means none.
	Context context.Context

	// Usage, for the chunk and end phases.
	PromptTokensUsed, CompletionTokensUsed int64
	UsageReported                          bool
	// TokenKindsUsed are the parts of PromptTokensUsed and
	// CompletionTokensUsed the upstream reported by kind (all 0 without
	// a report): what the host prices each at its own rate.
	TokenKindsUsed TokenKinds
	Status         int
	TextBytesSent  int64

	// ToolCalls is the current chunk event's tool-call deltas, as
	// chunk_tool_calls returns them: records appended with
	// AppendToolCallDelta (empty for an event without any). The gateway
	// sets it for one Chunk call; it must stay valid during that call and
	// is not kept.
	ToolCalls []byte

	// Set by the gateway's services: the cost settled for the request, in
	// USD micros (CostSettled false: none settled yet).
	CostMicros  int64
	CostSettled bool
	// Unpriced: a service looked the request's model's price up and
	// found none (the request is served free, or refused, as the
	// policy's pricing.unpriced says).
	Unpriced bool

	// Outputs of plugins.
	SetUpstreamHeaders []Header // headers to send upstream (empty value: remove)
	SetClientHeaders   []Header // headers for the client's response (AddClientHeader)
	RejectStatus       int
	RejectType         []byte
	RejectCode         []byte
	RejectMessage      []byte
	// Answer is the reply set by respond/respond_event or a host service
	// instead of an upstream's (answer.go).
	Answer Answer
	// NoAnswer: the gateway cannot serve an answer on the request's
	// endpoint; respond and respond_event return NOT_ALLOWED.
	NoAnswer bool

	id          uint32
	stack       [6]uint64 // params and results of the current callback
	configuring bool      // on_configure: Body is the plugin's config
	facts       []Header
	states      [][]byte // per plugin slot
	// Phases plugins opted out of for this request (skip_phases): bit
	// slot of each mask. Plugins in slots from 64 on cannot opt out.
	skipHeaders, skipChunk, skipEnd uint64

	// clock is the end of the phase's last timed callback (since
	// clockBase), the start of the next one; 0 for none yet.
	clock time.Duration

	// sel is the request's chain (SetChain) and its tenant's override.
	sel selection

	// Per-callback scratch, reset by each chunk call.
	chunkText    []byte
	emitted      []byte
	finishReason []byte
	callResult   []byte

	// calls are the dispatched calls of the callback being served.
	calls callQueue

	// messages is the request_messages value, rendered from Body when a
	// plugin first asks for it (messagesDone) and kept for the request.
	messages     []byte
	messagesDone bool
	// rewrite is the state of set_message_text (hostfuncs_rewrite.go).
	rewrite rewriteState

	// headerBytes holds the names and values of SetUpstreamHeaders and
	// SetClientHeaders (addHeader), reused from one request to the next.
	headerBytes []byte
}

var (
	requestPool = sync.Pool{New: func() any { return new(Request) }}
	nextID      atomic.Uint32
)

// AcquireRequest returns an empty Request with a fresh context id.
func AcquireRequest() *Request {
	r := requestPool.Get().(*Request)
	r.id = nextID.Add(1)
	r.MaxTokens = -1
	return r
}

// ReleaseRequest resets r and returns it to the pool; r must not be used
// afterwards.
func ReleaseRequest(r *Request) {
	calls := r.calls.reset()
	states := r.states
	r.Answer.Reset()
	for i := range states {
		states[i] = states[i][:0]
	}
	*r = Request{
		SetUpstreamHeaders: r.SetUpstreamHeaders[:0],
		SetClientHeaders:   r.SetClientHeaders[:0],
		RejectType:         r.RejectType[:0],
		RejectCode:         r.RejectCode[:0],
		RejectMessage:      r.RejectMessage[:0],
		facts:              r.facts[:0],
		states:             states[:0],
		chunkText:          r.chunkText[:0],
		emitted:            r.emitted[:0],
		finishReason:       r.finishReason[:0],
		callResult:         r.callResult[:0],
		headerBytes:        r.headerBytes[:0],
		messages:           r.messages[:0],
		rewrite:            r.rewrite.reset(),
		calls:              calls,
		Answer:             r.Answer,
	}
	requestPool.Put(r)
}

// AddClientHeader adds a header to the client's response (an empty value
// removes it), as a plugin's set_response_header does. name and value are
// copied.
func (r *Request) AddClientHeader(name string, value []byte) {
	addHeader(r, &r.SetClientHeaders, name, value)
}

// addHeader appends name: value to list, copying both into r.headerBytes.
// A header's slices stay valid as the buffer grows (growing copies the
// bytes elsewhere and leaves the old array as it was) until r is released.
func addHeader[S string | []byte](r *Request, list *[]Header, name S, value []byte) {
	start := len(r.headerBytes)
	r.headerBytes = append(append(r.headerBytes, name...), value...)
	b := r.headerBytes
	mid, end := start+len(name), len(b)
	*list = append(*list, Header{Name: b[start:mid:mid], Value: b[mid:end:end]})
}

// skip records that the plugin in slot takes no further part in the
// phases of mask for this request.
func (r *Request) skip(slot int, mask Phase) {
	if slot >= 64 {
		return
	}
	bit := uint64(1) << slot
	if mask&PhaseResponseHeaders != 0 {
		r.skipHeaders |= bit
	}
	if mask&PhaseChunk != 0 {
		r.skipChunk |= bit
	}
	if mask&PhaseEnd != 0 {
		r.skipEnd |= bit
	}
}

// skipped reports whether the plugin in slot opted out of phase ph.
func (r *Request) skipped(slot int, ph Phase) bool {
	if slot >= 64 {
		return false
	}
	bit := uint64(1) << slot
	switch ph {
	case PhaseResponseHeaders:
		return r.skipHeaders&bit != 0
	case PhaseChunk:
		return r.skipChunk&bit != 0
	case PhaseEnd:
		return r.skipEnd&bit != 0
	}
	return false
}

// AppendToolCallDelta appends one tool-call delta record of
// chunk_tool_calls to dst (see sdk/ABI.md): "INDEX NAME_LEN ARGS_LEN\n",
// then the name's bytes, the arguments fragment's bytes and "\n". name and
// args are the JSON-decoded strings of function.name and
// function.arguments (empty when absent).
func AppendToolCallDelta(dst []byte, index int, name, args []byte) []byte {
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(name)), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\n')
	dst = append(dst, name...)
	dst = append(dst, args...)
	return append(dst, '\n')
}

// ID is the context id plugins see.
func (r *Request) ID() uint32 { return r.id }

// Emitted is the replacement text of the last chunk call. Valid until the
// next chunk call.
func (r *Request) Emitted() []byte { return r.emitted }

// FinishReason is the finish_reason a plugin set for STOP ("" for the
// default).
func (r *Request) FinishReason() []byte { return r.finishReason }

// Fact returns the fact stored under key.
func (r *Request) Fact(key string) ([]byte, bool) {
	for _, f := range r.facts {
		if string(f.Name) == key {
			return f.Value, true
		}
	}
	return nil, false
}

func (r *Request) setFact(k, v []byte) int32 {
	for i := range r.facts {
		if bytes.Equal(r.facts[i].Name, k) {
			r.facts[i].Value = append(r.facts[i].Value[:0], v...)
			return 0
		}
	}
	if len(r.facts) >= maxFacts {
		return codeInvalid
	}
	r.facts = append(r.facts, Header{Name: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
	return 0
}

// state returns the plugin slot's state; nil when none was set. Slots
// hold buffers reused across requests, so a slot below one that was set
// holds an empty buffer: an empty state reads as none.
func (r *Request) state(slot int) []byte {
	if slot < len(r.states) && len(r.states[slot]) > 0 {
		return r.states[slot]
	}
	return nil
}

func (r *Request) setState(slot int, v []byte) {
	for len(r.states) <= slot {
		if len(r.states) < cap(r.states) {
			r.states = r.states[:len(r.states)+1]
			r.states[len(r.states)-1] = r.states[len(r.states)-1][:0]
		} else {
			r.states = append(r.states, nil)
		}
	}
	r.states[slot] = append(r.states[slot][:0], v...)
}

// Headers is a HeaderPeeker over a list of name/value pairs, for callers
// without an HTTP server's header type (tests, the plugin harness). The
// first pair whose name matches, ASCII case-insensitively, wins.
type Headers []Header

// PeekBytes returns the value of the first header named name, or nil.
func (h Headers) PeekBytes(name []byte) []byte {
	for i := range h {
		if bytes.EqualFold(h[i].Name, name) {
			return h[i].Value
		}
	}
	return nil
}

// conversation returns the request's messages as request_messages hands
// them out (sdk/ABI.md, "Request messages"), encoding Body on the first
// call of the request. The endpoint, not the body's shape, says how the
// body is read: a chat body may carry any keys a JSON-RPC message has.
func (r *Request) conversation() []byte {
	if !r.messagesDone {
		if string(r.Endpoint) == endpointMCP {
			r.messages, r.rewrite.spans = convo.AppendMCPSpans(r.messages[:0], r.Body, r.rewrite.spans[:0])
		} else {
			r.messages, r.rewrite.spans = convo.AppendSpans(r.messages[:0], r.Body, r.rewrite.spans[:0])
		}
		r.messagesDone = true
	}
	return r.messages
}
