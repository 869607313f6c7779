package sdk

// Exchange is what every phase can see of the request being served: the
// request's facts as the gateway parsed them, the tenant, the facts that
// plugins share, and this plugin's private state. It is embedded in
// [Request], [Response], [Chunk] and [End], so its methods are called on
// those.
//
// Like the objects that embed it, an Exchange is valid only during the
// callback it was passed to. Two callbacks of one request may run on
// different instances of the plugin, and one instance serves many requests:
// keep per-request data in [Exchange.SetState] or [Exchange.SetFact], never
// in globals.
//
// Getters return what the ABI guarantees in every phase. If the host
// nonetheless reports an error for one of them, the SDK panics, which fails
// the callback so that the plugin's on_error applies: a guard never acts on
// a value it could not read.
type Exchange struct {
	// No pointers here: the views are reset for every callback, and a
	// struct without pointers is reset without write barriers (which cost
	// about 40 ns a callback in wasm). What a callback caches lives in
	// globals stamped with the callback's number.
	ctx  uint32
	call uint64 // the callback's number, see calls
}

// calls numbers the callbacks; a cache is valid in callback x.call only.
var calls uint64 // never wraps

var bodyCache struct {
	b    []byte
	call uint64
}

func (x *Exchange) field(what string, field int32) string {
	s, _ := readString(what, func(b []byte) int32 { return hostRequestField(field, b) })
	return s
}

// Model is the model the client asked for ("" if none).
func (x *Exchange) Model() string { return x.field("request_field(MODEL)", fieldModel) }

// Endpoint is the API called: "chat/completions", "completions",
// "embeddings", "messages", "responses", or "mcp" for an MCP JSON-RPC
// message ([Exchange.ToolCall]).
func (x *Exchange) Endpoint() string { return x.field("request_field(ENDPOINT)", fieldEndpoint) }

// ToolCall is the MCP tool a request of the "mcp" endpoint calls: the
// server and the tool its model names (mcp:{server}/{tool}, split at the
// first "/"). ok is false for a request of another endpoint and for an
// MCP message that is not a tools/call (its model is mcp:{server}). The
// call's arguments are the request's messages ([Exchange.Messages]):
// ABI.md, "MCP tool calls".
func (x *Exchange) ToolCall() (server, tool string, ok bool) {
	if x.Endpoint() != endpointMCP {
		return "", "", false
	}
	return splitToolModel(x.Model())
}

// splitToolModel splits an MCP tool call's model, mcp:{server}/{tool}.
func splitToolModel(model string) (server, tool string, ok bool) {
	const prefix = "mcp:"
	if len(model) <= len(prefix) || model[:len(prefix)] != prefix {
		return "", "", false
	}
	rest := model[len(prefix):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '/' {
			if i == 0 || i == len(rest)-1 {
				return "", "", false
			}
			return rest[:i], rest[i+1:], true
		}
	}
	return "", "", false
}

// RequestID is the request's id, the X-Request-Id the client gets.
func (x *Exchange) RequestID() string { return x.field("request_field(REQUEST_ID)", fieldRequestID) }

// Upstream names the upstream the route chose.
func (x *Exchange) Upstream() string { return x.field("request_field(UPSTREAM)", fieldUpstream) }

// Body is the raw request JSON as the client sent it, or as a plugin
// rewrote it ([Request.SetMessageText]). The first call in a
// callback reads it from the host; later calls in the same callback return
// the same slice. The slice belongs to the SDK: do not modify it, and copy
// what you need past the callback, as the buffer is reused by the next
// callback.
func (x *Exchange) Body() []byte {
	if bodyCache.call != x.call || x.call == 0 {
		b, n := bodyBuf.read(0, func(b []byte) int32 { return hostRequestField(fieldBody, b) })
		if n < 0 && n != int32(ErrAbsent) {
			broken("request_field(BODY)", n)
		}
		bodyCache.b, bodyCache.call = b, x.call
	}
	return bodyCache.b
}

// Stream reports whether the client asked for a streamed reply.
func (x *Exchange) Stream() bool { return hostRequestInt(intStream) == 1 }

// MaxTokens is the request's max_tokens (or max_completion_tokens); false
// when the client did not set one.
func (x *Exchange) MaxTokens() (int64, bool) {
	n := hostRequestInt(intMaxTokens)
	return n, n >= 0
}

// MessageCount is the number of messages (or prompts, or inputs) in the
// request, as the gateway counted them. ([Exchange.Messages] returns the
// messages themselves.)
func (x *Exchange) MessageCount() int { return int(max(hostRequestInt(intMessages), 0)) }

// PromptTokensEstimate is the gateway's estimate of the prompt's tokens.
func (x *Exchange) PromptTokensEstimate() int64 {
	return max(hostRequestInt(intPromptTokens), 0)
}

// BodyBytes is the size of the request body in bytes.
func (x *Exchange) BodyBytes() int64 { return max(hostRequestInt(intBodyBytes), 0) }

// PromptChars is the number of bytes of prompt text in the request.
func (x *Exchange) PromptChars() int64 { return max(hostRequestInt(intPromptChars), 0) }

// PromptBytes is the request body's length less the image payloads (the
// URL or base64 data of each image part): no more than this many tokens of
// the prompt are text.
func (x *Exchange) PromptBytes() int64 { return max(hostRequestInt(intPromptBytes), 0) }

// ImageCount is the number of image parts in the request.
func (x *Exchange) ImageCount() int64 { return max(hostRequestInt(intImages), 0) }

// UnboundedParts is the number of parts whose tokens the body cannot
// bound: files by id, URL or data, PDFs, stored conversations
// (previous_response_id, conversation), server-side tools that add what
// they find to the prompt (web search, file search, MCP).
func (x *Exchange) UnboundedParts() int64 { return max(hostRequestInt(intUnbounded), 0) }

// ToolCount is the number of tools the request declares; BuiltinToolCount
// those of them whose definition the provider supplies.
func (x *Exchange) ToolCount() int64 { return max(hostRequestInt(intTools), 0) }

// BuiltinToolCount: see [Exchange.ToolCount].
func (x *Exchange) BuiltinToolCount() int64 { return max(hostRequestInt(intBuiltinTools), 0) }

// Choices is how many completions the reply holds (n, or best_of for
// completions), at least 1: the output bound is per choice.
func (x *Exchange) Choices() int64 { return max(hostRequestInt(intChoices), 1) }

// PromptTokensBound is the host's upper bound of the prompt's tokens for
// the request's model: PromptBytes, plus template tokens per message, the
// tool-use instructions, and each image at the model's most tokens per
// image, capped by the model's context window. false when there is no
// bound: the request has unbounded parts and the model's context window is
// unknown. Unlike [Exchange.PromptTokensEstimate] it is never below the
// prompt's true count (docs/POLICY.md has the argument).
func (x *Exchange) PromptTokensBound() (int64, bool) {
	n := hostRequestInt(intPromptTokensBound)
	return n, n >= 0
}

// ModelContextWindow is the most input tokens a request to the model can
// have, from its price; false when unknown.
func (x *Exchange) ModelContextWindow() (int64, bool) {
	n := hostRequestInt(intModelContextWindow)
	return n, n > 0
}

// ModelMaxOutput is the most output tokens a reply of the model can have
// when the request sets no max_tokens, from its price; false when unknown.
func (x *Exchange) ModelMaxOutput() (int64, bool) {
	n := hostRequestInt(intModelMaxOutput)
	return n, n > 0
}

// ModelReasoning reports whether the model's replies may hold hidden
// reasoning tokens, so that their streamed text does not bound their
// output; known is false when the model has no price.
func (x *Exchange) ModelReasoning() (reasoning, known bool) {
	n := hostRequestInt(intModelReasoning)
	return n == 1, n >= 0
}

// Tenant is the snapshot of the tenant the request belongs to, as the host's
// tenant service resolved it (normally after the preflight plugin ran).
type Tenant struct {
	ID     string // the tenant's id
	KeyID  string // the id of the API key the request used
	Plan   string // the tenant's plan
	Status string // the tenant's status, as the tenant service reports it
	// Limits; -1 when the tenant has none.
	RPM                 int64 // requests per minute
	TPM                 int64 // tokens per minute
	MonthlyBudgetMicros int64 // monthly budget in millionths of the currency unit
	MaxTokens           int64 // cap on max_tokens per request
	// The plan's and the key's own limits (RPM and TPM above are the
	// key's where set, else the plan's); -1 when not set.
	PlanRPM, PlanTPM int64
	KeyRPM, KeyTPM   int64
}

// TenantMaxTokens is the resolved tenant's cap on max_tokens (the key's if
// set, else the plan's); -1 when there is none or no tenant is resolved.
// One host call, no allocation: cheaper than Tenant when only the cap is
// needed.
func (x *Exchange) TenantMaxTokens() int64 { return hostTenantInt(tenantMaxTokens) }

// HasTenant reports whether the request's tenant is resolved. One host
// call, no allocation.
func (x *Exchange) HasTenant() bool {
	n := hostTenantField(tenantID, nil)
	if n < 0 && n != int32(ErrAbsent) {
		broken("tenant_field(ID)", n)
	}
	return n >= 0
}

// Tenant returns the request's tenant; false when none is resolved (yet).
// It makes twelve host calls: call it once per callback.
func (x *Exchange) Tenant() (Tenant, bool) {
	str := func(field int32) (string, bool) {
		return readString("tenant_field", func(b []byte) int32 { return hostTenantField(field, b) })
	}
	var t Tenant
	var ok bool
	if t.ID, ok = str(tenantID); !ok {
		return Tenant{}, false
	}
	t.KeyID, _ = str(tenantKeyID)
	t.Plan, _ = str(tenantPlan)
	t.Status, _ = str(tenantStatus)
	t.RPM = hostTenantInt(tenantRPM)
	t.TPM = hostTenantInt(tenantTPM)
	t.MonthlyBudgetMicros = hostTenantInt(tenantBudgetMicros)
	t.MaxTokens = hostTenantInt(tenantMaxTokens)
	t.PlanRPM = hostTenantInt(tenantPlanRPM)
	t.PlanTPM = hostTenantInt(tenantPlanTPM)
	t.KeyRPM = hostTenantInt(tenantKeyRPM)
	t.KeyTPM = hostTenantInt(tenantKeyTPM)
	return t, true
}

// SkipPhases opts this plugin out of later phases of this request —
// PhaseResponseHeaders, PhaseChunk and/or PhaseEnd — so the host does not
// call it there (each callback it skips saves a guest entry, tens of
// microseconds). Call it from the request, response_headers or chunk
// phase once the plugin knows it has nothing more to do, e.g. a budget
// that needs no per-event accounting for a request with max_tokens.
func (x *Exchange) SkipPhases(p Phases) error { return status(hostSkipPhases(uint32(p))) }

// Fact returns the fact stored under key by any plugin of this request
// (this one included); false when there is none. Facts are how plugins
// pass data to each other: the preflight plugin, say, sets "tenant.plan"
// for later ones.
func (x *Exchange) Fact(key string) (string, bool) {
	return readString("fact", func(b []byte) int32 { return hostFact(key, b) })
}

// SetFact stores a fact for this request, replacing any with the same key.
// Keys are at most 64 bytes, values 64 KiB, and a request holds at most 64
// facts; past those limits it returns [ErrInvalid].
func (x *Exchange) SetFact(key, value string) error { return status(hostSetFact(key, value)) }

// State returns this plugin's private state for this request, as the last
// [Exchange.SetState] of any callback of the request left it; nil when
// none was set. The slice belongs to the SDK and is valid until the next
// State call or the end of the callback: decode it, or copy it.
func (x *Exchange) State() []byte {
	b, n := stateBuf.read(0, hostStateGet)
	if n == int32(ErrAbsent) {
		return nil
	}
	if n < 0 {
		broken("state_get", n)
	}
	return b
}

// SetState replaces this plugin's private state for this request (at most
// 1 MiB, else [ErrInvalid]). The host copies it: b may be reused at once.
func (x *Exchange) SetState(b []byte) error { return status(hostStateSet(b)) }

// Request is the request phase's view: the request was parsed and nothing
// was sent upstream yet. It is valid only during the callback.
type Request struct {
	Exchange
}

// Header returns a header of the client's request (the name is
// case-insensitive); false when absent.
func (r *Request) Header(name string) (string, bool) {
	return readString("request_header", func(b []byte) int32 { return hostRequestHeader(name, b) })
}

// AppendHeader appends the value of a header of the client's request to
// dst; false (and dst unchanged) when absent. It does not allocate once
// dst has room for the value, and it keeps no copy: the way to read a
// secret such as an API key.
func (r *Request) AppendHeader(dst []byte, name string) ([]byte, bool) {
	b, n := appendRead(dst, func(b []byte) int32 { return hostRequestHeader(name, b) })
	if n == int32(ErrAbsent) {
		return dst, false
	}
	if n < 0 {
		broken("request_header", n)
	}
	return b, true
}

// SetHeader sets a header on the request sent upstream; an empty value
// removes it. It returns [ErrInvalid] for names or values with CR, LF or
// NUL and for Host, Content-Length, Transfer-Encoding and Connection.
func (r *Request) SetHeader(name, value string) error {
	return status(hostSetRequestHeader(name, value))
}

// SetResponseHeader sets a header on the response to the client, also when
// the request is rejected. Validation is as for [Request.SetHeader].
func (r *Request) SetResponseHeader(name, value string) error {
	return status(hostSetResponseHeader(name, value))
}

// Reject sets the OpenAI-style error the client gets and returns [Reject],
// so a handler can end with `return r.Reject(...)`. status is 400–599; an
// empty typ or code gets a default from the status. msg is the error's
// message. If the host refuses the error (say, a status out of range) the
// SDK logs why and the request is still rejected, with the host's default
// 403.
func (r *Request) Reject(status int, typ, code, msg string) Verdict {
	return reject(status, typ, code, msg)
}

// Respond sets a whole reply as the request's answer and returns [Respond],
// so a handler can end with `return r.Respond(200, body)`: the client gets
// status and body (JSON in the format of its endpoint: a chat.completion
// for chat/completions), headers set with [Request.SetResponseHeader], and
// nothing goes upstream. A streamed request (stream: true) gets the reply
// as a stream. status is 200–599, body at most 4 MiB. If the host refuses
// the answer (a status out of range; [ErrNotAllowed] on an endpoint the
// gateway cannot answer, such as a passthrough) the SDK logs why and
// returns [Continue]: the request goes upstream.
func (r *Request) Respond(status int, body []byte) Verdict {
	if n := hostRespond(int32(status), body); n < 0 {
		Log(LevelError, "sdk: respond("+itoa(int64(status))+"): "+Error(n).Error())
		return Continue
	}
	return Respond
}

// RespondEvent appends one event to the request's answer, which becomes a
// stream: data is one SSE event's data (an OpenAI chunk for
// chat/completions), without "data: " or the terminating [DONE], which the
// host adds. End the handler with [Respond] (the status is 200 unless
// [Request.Respond] set another with an empty body). A non-streamed request
// gets the events assembled into one reply. Errors: [ErrInvalid] for an
// empty event, one with a line break, "[DONE]", over 1 MiB or over the
// answer's 4 MiB, or after a whole reply was set; [ErrNotAllowed] outside
// the request phase or on an endpoint the gateway cannot answer.
func (r *Request) RespondEvent(data []byte) error {
	return status(hostRespondEvent(data))
}

func reject(status int, typ, code, msg string) Verdict {
	if n := hostReject(int32(status), typ, code, msg); n < 0 {
		Log(LevelError, "sdk: reject("+itoa(int64(status))+"): "+Error(n).Error())
	}
	return Reject
}

// Response is the response_headers phase's view: the upstream's status and
// headers arrived, nothing was sent to the client yet. It is valid only
// during the callback.
type Response struct {
	Exchange
	status int
}

// Status is the upstream's HTTP status.
func (r *Response) Status() int { return r.status }

// Header returns a header of the upstream's response; false when absent.
func (r *Response) Header(name string) (string, bool) {
	return readString("response_header", func(b []byte) int32 { return hostResponseHeader(name, b) })
}

// RequestHeader returns a header of the client's request; false when
// absent.
func (r *Response) RequestHeader(name string) (string, bool) {
	return readString("request_header", func(b []byte) int32 { return hostRequestHeader(name, b) })
}

// SetResponseHeader sets a header on the response to the client; an empty
// value removes it. Validation is as for [Request.SetHeader].
func (r *Response) SetResponseHeader(name, value string) error {
	return status(hostSetResponseHeader(name, value))
}

// Reject replaces the upstream's response with an OpenAI-style error and
// returns [Reject]; see [Request.Reject].
func (r *Response) Reject(status int, typ, code, msg string) Verdict {
	return reject(status, typ, code, msg)
}

// Usage is what the host knows of an exchange's usage. Counts are -1 while
// unknown.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	Status           int   // the HTTP status sent to the client
	TextBytes        int64 // bytes of reply text sent to the client
	Reported         bool  // the upstream reported usage (else the counts are the host's)
}

func readUsage() Usage {
	return Usage{
		PromptTokens:     hostUsage(usagePrompt),
		CompletionTokens: hostUsage(usageCompletion),
		Status:           int(hostUsage(usageStatus)),
		TextBytes:        hostUsage(usageTextBytes),
		Reported:         hostUsage(usageReported) == 1,
	}
}

// Chunk is the chunk phase's view of one reply event: a streamed event, or
// the whole reply text when the reply was not streamed ([Chunk.IsWhole]).
// It is valid only during the callback.
type Chunk struct {
	Exchange
	n     int
	flags ChunkFlags
}

var textCache struct {
	b, s  uint64 // the callbacks whose text is in b and in str
	bytes []byte
	str   string
}

// Flags are the event's flags.
func (c *Chunk) Flags() ChunkFlags { return c.flags }

// HasText reports whether the event carries a text delta.
func (c *Chunk) HasText() bool { return c.flags&ChunkText != 0 }

// HasToolCalls reports whether the event carries tool-call deltas.
func (c *Chunk) HasToolCalls() bool { return c.flags&ChunkToolCalls != 0 }

// HasFinish reports whether the event carries a finish_reason.
func (c *Chunk) HasFinish() bool { return c.flags&ChunkFinish != 0 }

// HasUsage reports whether the event carries usage.
func (c *Chunk) HasUsage() bool { return c.flags&ChunkUsage != 0 }

// IsWhole reports whether the reply was not streamed: the text is the
// whole reply, and [Replace] replaces the reply's message content.
func (c *Chunk) IsWhole() bool { return c.flags&ChunkWhole != 0 }

// IsDone reports whether this is the stream's terminating event; [Replace]
// then inserts the emitted text as a final text delta before it.
func (c *Chunk) IsDone() bool { return c.flags&ChunkDone != 0 }

// HasRole reports whether the event carries the assistant role (the first
// event of a stream).
func (c *Chunk) HasRole() bool { return c.flags&ChunkRole != 0 }

// Len is the length in bytes of the event's text, known without reading it.
func (c *Chunk) Len() int { return c.n }

// Bytes returns the event's text (the whole reply with [ChunkWhole]). It
// does not allocate once the SDK's buffer has grown to the longest text
// seen: the slice belongs to the SDK, must not be modified, and is valid
// until the callback returns. Use [Chunk.Text] for a string you may keep.
func (c *Chunk) Bytes() []byte {
	if c.n <= 0 {
		return nil
	}
	if textCache.b != c.call || c.call == 0 {
		b, n := textBuf.read(c.n, hostChunkText)
		if n < 0 {
			broken("chunk_text", n)
		}
		textCache.bytes, textCache.b = b, c.call
	}
	return textCache.bytes
}

// Text returns the event's text as a string of its own: one allocation of
// Len bytes per callback (none for empty text). Prefer [Chunk.Bytes] on
// the hot path.
func (c *Chunk) Text() string {
	if c.n <= 0 {
		return ""
	}
	if textCache.s != c.call || c.call == 0 {
		textCache.str, textCache.s = string(c.Bytes()), c.call
	}
	return textCache.str
}

// ResponseHeader returns a header of the upstream's response; false when
// absent.
func (c *Chunk) ResponseHeader(name string) (string, bool) {
	return readString("response_header", func(b []byte) int32 { return hostResponseHeader(name, b) })
}

// Usage is the exchange's usage as far as it is known at this event.
func (c *Chunk) Usage() Usage { return readUsage() }

// Emit appends text to this callback's replacement text, which [Replace]
// and [Stop] use (and other verdicts ignore). It returns [ErrInvalid] past
// the host's limit on emitted text.
func (c *Chunk) Emit(text string) error { return status(hostEmit(text)) }

// EmitBytes is [Chunk.Emit] for a byte slice; it does not allocate.
func (c *Chunk) EmitBytes(text []byte) error { return status(hostEmitBytes(text)) }

// Replace emits text and returns [Replace]: the event's text becomes
// everything emitted during this callback. If the host refuses the text
// (over its limit) the SDK logs why, and the event is replaced by what was
// emitted before, if anything, so the original text is not let through.
func (c *Chunk) Replace(text string) Verdict {
	if n := hostEmit(text); n < 0 {
		Log(LevelError, "sdk: emit: "+Error(n).Error())
	}
	return Replace
}

// SetFinishReason sets the finish_reason sent with [Stop] (default
// "content_filter"); [ErrInvalid] for more than 64 bytes or non-printable
// ones.
func (c *Chunk) SetFinishReason(reason string) error {
	return status(hostSetFinishReason(reason))
}

// Stop ends the reply and returns [Stop]: this event and any held ones are
// dropped; correction, if not empty, is sent as a final text delta with
// finishReason ("" for the default, "content_filter"), then the stream's
// end; the upstream request is canceled. Errors from the host are logged.
func (c *Chunk) Stop(correction, finishReason string) Verdict {
	if correction != "" {
		if n := hostEmit(correction); n < 0 {
			Log(LevelError, "sdk: emit: "+Error(n).Error())
		}
	}
	if finishReason != "" {
		if n := hostSetFinishReason(finishReason); n < 0 {
			Log(LevelError, "sdk: set_finish_reason: "+Error(n).Error())
		}
	}
	return Stop
}

// End is the end phase's view: the exchange is over. It is valid only
// during the callback.
type End struct {
	Exchange
	flags EndFlags
}

// Flags say how the exchange ended.
func (e *End) Flags() EndFlags { return e.flags }

// Completed reports whether the upstream's reply was complete.
func (e *End) Completed() bool { return e.flags&EndCompleted != 0 }

// ClientGone reports whether the client disconnected.
func (e *End) ClientGone() bool { return e.flags&EndClientGone != 0 }

// UpstreamError reports whether the upstream failed or timed out.
func (e *End) UpstreamError() bool { return e.flags&EndUpstreamError != 0 }

// Stopped reports whether a plugin stopped the stream.
func (e *End) Stopped() bool { return e.flags&EndStopped != 0 }

// Rejected reports whether the request was rejected before or instead of
// being forwarded.
func (e *End) Rejected() bool { return e.flags&EndRejected != 0 }

// Usage is the exchange's final usage.
func (e *End) Usage() Usage { return readUsage() }

// ResponseHeader returns a header of the upstream's response; false when
// absent (also when there was no upstream response).
func (e *End) ResponseHeader(name string) (string, bool) {
	return readString("response_header", func(b []byte) int32 { return hostResponseHeader(name, b) })
}
