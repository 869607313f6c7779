package sdk

// The handlers a plugin registered. An instance runs one callback at a time
// on Go's single wasm thread, so plain globals are safe here.
var handlers struct {
	configure       func(cfg []byte) error
	request         func(*Request) Verdict
	responseHeaders func(*Response) Verdict
	chunk           func(*Chunk) Verdict
	end             func(*End)
	callResponse    func(*CallResponse) Verdict
}

// OnConfigure registers the handler of on_configure, called once per
// instance, before any phase, with the plugin's config from the policy as
// JSON ("{}" when the policy gives none). cfg belongs to the handler, which
// may keep it. A non-nil error refuses the config: the SDK passes
// err.Error() to the host's fail, and the plugin does not load, with that
// message, naming the bad setting, shown to the operator. Without a handler
// every config is accepted.
//
// Register every handler from an init function of the plugin's main
// package (see the package documentation for why main does not work).
// Phase handlers may also be registered, or replaced by nil to drop the
// phase, from the OnConfigure handler: the host reads the phase set after
// on_configure (see [OnRequest]).
func OnConfigure(f func(cfg []byte) error) { handlers.configure = f }

// OnRequest registers the handler of the request phase: the request was
// parsed and nothing was sent upstream yet. The handler returns [Continue]
// or [Reject] (best through [Request.Reject]).
//
// The phases with a non-nil handler make the bitmask the SDK's
// tollgate_phases export returns; the host calls only those. Passing nil
// removes the phase.
func OnRequest(f func(r *Request) Verdict) { handlers.request = f }

// OnResponseHeaders registers the handler of the response_headers phase:
// the upstream's status and headers arrived. The handler returns
// [Continue] or [Reject].
func OnResponseHeaders(f func(r *Response) Verdict) { handlers.responseHeaders = f }

// OnChunk registers the handler of the chunk phase, called once per
// streamed event, or once with the whole reply text when the reply is not
// streamed ([ChunkWhole]). It is the hot path: keep it allocation-free
// where you can ([Chunk.Bytes] does not allocate). The handler returns
// [Continue], [Hold], [Release], [Replace] or [Stop].
func OnChunk(f func(c *Chunk) Verdict) { handlers.chunk = f }

// OnEnd registers the handler of the end phase: the exchange is over and
// its usage is known. It cannot change anything any more; use it for
// accounting (state, facts, [MetricAdd], [Call]). If it dispatched calls
// ([Dispatch]), the SDK answers [Pause] for it, so the calls are made and
// their responses handed to the [OnCallResponse] handler. It runs once the reply
// is flushed to the client and before the gateway reads the next request
// on that client connection, so a slow handler delays that request.
func OnEnd(f func(e *End)) { handlers.end = f }

// registeredPhases is what tollgate_phases returns.
func registeredPhases() Phases {
	var p Phases
	if handlers.request != nil {
		p |= PhaseRequest
	}
	if handlers.responseHeaders != nil {
		p |= PhaseResponseHeaders
	}
	if handlers.chunk != nil {
		p |= PhaseChunk
	}
	if handlers.end != nil {
		p |= PhaseEnd
	}
	return p
}

// The objects handed to handlers are reused: they are valid only during the
// callback they were passed to.
var (
	curRequest  Request
	curResponse Response
	curChunk    Chunk
	curEnd      End
)

// A handler's panic is not recovered: it traps the instance, and the host
// puts the first line Go prints on stderr ("panic: ...") in the failed
// callback's error. A deferred recover in every dispatch would run the
// runtime's defer and recover code on every callback, about 1 µs when it is
// not in the CPU's caches.

func dispatchConfigure(configLen int32) int32 {
	f := handlers.configure
	if f == nil {
		return 0
	}
	// The config belongs to the handler: a fresh buffer, never reused.
	var cfg []byte
	if configLen > 0 {
		cfg = make([]byte, configLen)
	}
	var own buffer
	own.b = cfg
	b, n := own.read(0, hostConfig)
	if n < 0 {
		hostFail("sdk: reading the config: " + Error(n).Error())
		return 1
	}
	if err := f(b); err != nil {
		msg := err.Error()
		if msg == "" {
			msg = "configuration refused"
		}
		hostFail(msg)
		return 1
	}
	return 0
}

func dispatchRequest(ctx uint32) Verdict {
	f := handlers.request
	if f == nil {
		return Continue
	}
	calls++
	curRequest = Request{Exchange: Exchange{ctx: ctx, call: calls}}
	return f(&curRequest)
}

func dispatchResponseHeaders(ctx uint32, status int32) Verdict {
	f := handlers.responseHeaders
	if f == nil {
		return Continue
	}
	calls++
	curResponse = Response{Exchange: Exchange{ctx: ctx, call: calls}, status: int(status)}
	return f(&curResponse)
}

func dispatchChunk(ctx uint32, textLen int32, flags uint32) Verdict {
	f := handlers.chunk
	if f == nil {
		return Continue
	}
	calls++
	curChunk = Chunk{Exchange: Exchange{ctx: ctx, call: calls}, n: int(textLen), flags: ChunkFlags(flags)}
	return f(&curChunk)
}

// dispatchEnd runs the end handler: on_end's result is ignored, except
// PAUSE, which waits for the calls the handler dispatched.
func dispatchEnd(ctx uint32, flags uint32) Verdict {
	f := handlers.end
	if f == nil {
		return Continue
	}
	calls++
	curEnd = End{Exchange: Exchange{ctx: ctx, call: calls}, flags: EndFlags(flags)}
	before := dispatches
	f(&curEnd)
	if dispatches != before {
		return Pause
	}
	return Continue
}
