package sdk

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/sdk/abi"
)

// Dispatched calls (ABI.md, "Dispatched calls"). A handler that needs a
// service that waits on the network (an HTTP classifier, say) does not call
// it: it dispatches the call and answers [Pause]. The host makes the call
// once the handler returned, with none of the plugin's instances held, and
// hands the response to the [OnCallResponse] handler, whose verdict is then
// the phase's verdict:
//
//	func onRequest(r *sdk.Request) sdk.Verdict {
//		if _, err := sdk.DispatchHTTP(sdk.HTTPRequest{Method: "POST", URL: classifierURL, Body: body}); err != nil {
//			return sdk.Fail
//		}
//		return sdk.Pause
//	}
//
//	func onCallResponse(c *sdk.CallResponse) sdk.Verdict {
//		if c.Status() != 200 {
//			return sdk.Fail // the policy's on_error decides
//		}
//		if flagged(c.Body()) {
//			return c.Request().Reject(400, "invalid_request_error", "content_flagged", "…")
//		}
//		return sdk.Continue
//	}

// CallID identifies a dispatched call within its request: the value
// [Dispatch] returned is the one [CallResponse.ID] reports.
type CallID int32

// Errors of dispatched calls, as [Dispatch] returns them and as
// [CallResponse.Err] reports a failed call.
const (
	// ErrTimeout: the call's timeout (the host's grant) passed.
	ErrTimeout Error = abi.CodeTimeout
	// ErrTooLarge: the response body was over the host's cap.
	ErrTooLarge Error = abi.CodeTooLarge
	// ErrBusy: too many calls in flight (more than 16 outstanding for the
	// plugin and request, or the host's in-flight cap for the plugin).
	ErrBusy Error = abi.CodeBusy
)

// dispatches counts the calls dispatched by this instance; see dispatchEnd.
var dispatches uint64

// Dispatch queues a call of the host service named service with the
// request bytes req (copied by the host), and returns its id. The call
// starts only if the handler then returns [Pause] (or [Defer], from
// on_request); any other verdict abandons it. Dispatch itself does no I/O. It returns [ErrNotAllowed]
// outside a phase handler or when the host's policy does not grant the
// call, [ErrInvalid] for a request the service cannot parse,
// [ErrUnavailable] when the host does not serve service, and [ErrBusy]
// past 16 outstanding calls.
//
// Host services that [Call] reaches can be dispatched too
// (`Dispatch("ratelimit.admit", req)`): the response body is then the
// service's result, with status 0.
func Dispatch(service string, req []byte) (CallID, error) {
	n := hostDispatch(service, req)
	if n < 0 {
		return -1, status(n)
	}
	dispatches++
	return CallID(n), nil
}

// MaxExpectPrefixes is how many prefixes [ExpectResponse] takes per call,
// and MaxExpectPrefix how long each may be (bytes).
const (
	MaxExpectPrefixes = abi.MaxExpectPrefixes
	MaxExpectPrefix   = abi.MaxExpectPrefix
)

// ExpectResponse tells the host that the handler needs no
// [OnCallResponse] for an answer of call id (just dispatched by this
// handler, not yet started) that is a host service's result (status 0)
// starting with one of prefixes: the host consumes such an answer as if
// the handler had answered [Pause] while other calls of the handler are
// outstanding, [Continue] after the last. Any other answer reaches
// OnCallResponse as usual, so the plugin still registers it. Do before
// dispatching whatever the handler would do on the expected answer
// (state, facts, [Request.SkipPhases]): it will not run.
//
//	id, err := sdk.Dispatch("ratelimit.admit", req)
//	if err == nil {
//		err = sdk.ExpectResponse(id, "allowed", "unlimited")
//	}
//
// It returns [ErrInvalid] for an id this handler did not dispatch, more
// than [MaxExpectPrefixes] prefixes for the call in all, or a prefix over
// [MaxExpectPrefix] bytes; the prefixes before the bad one are taken.
func ExpectResponse(id CallID, prefixes ...string) error {
	for _, p := range prefixes {
		if n := hostExpectResponse(int32(id), p); n < 0 {
			return status(n)
		}
	}
	return nil
}

// HTTPRequest is a call of the host's `http` service (DispatchHTTP). The
// URL must fall under a prefix the policy grants the plugin; the host adds
// the credentials the policy configures, which the plugin never sees.
type HTTPRequest struct {
	Method string // "" means POST with a Body, else GET
	URL    string
	Header [][2]string // name, value; validated like Request.SetHeader
	Body   []byte
	// CacheKey, when set, lets the host answer from its cache a call of
	// this plugin with the same key for CacheTTL after a 2xx answer
	// (0 < CacheTTL ≤ 1h).
	CacheKey string
	CacheTTL time.Duration
}

// MaxCacheTTL is the longest CacheTTL the host accepts.
const MaxCacheTTL = time.Hour

var httpBuf []byte // DispatchHTTP's request bytes, reused (the host copies them)

// DispatchHTTP dispatches a call of the `http` service (see [Dispatch]).
// It returns [ErrInvalid] for a method, URL, header or cache key that
// would not fit the request format (CR, LF, a space in the URL, a name
// that is not a token) and a CacheTTL out of range.
func DispatchHTTP(r HTTPRequest) (CallID, error) {
	b, err := AppendHTTPRequest(httpBuf[:0], r)
	httpBuf = b[:0]
	if err != nil {
		return -1, err
	}
	return Dispatch("http", b)
}

// AppendHTTPRequest appends r in the `http` service's request format
// (ABI.md, "Dispatched calls") to dst.
func AppendHTTPRequest(dst []byte, r HTTPRequest) ([]byte, error) {
	method := r.Method
	if method == "" {
		method = "GET"
		if r.Body != nil {
			method = "POST"
		}
	}
	if !isToken(method) || r.URL == "" || !lineSafe(r.URL) || indexByte(r.URL, ' ') >= 0 {
		return dst, ErrInvalid
	}
	dst = append(append(append(append(dst, method...), ' '), r.URL...), '\n')
	for _, h := range r.Header {
		if !isToken(h[0]) || !lineSafe(h[1]) {
			return dst, ErrInvalid
		}
		dst = append(append(append(append(dst, h[0]...), ": "...), h[1]...), '\n')
	}
	if r.CacheKey != "" {
		ms := r.CacheTTL.Milliseconds()
		if ms <= 0 || r.CacheTTL > MaxCacheTTL || !lineSafe(r.CacheKey) {
			return dst, ErrInvalid
		}
		dst = append(strconv.AppendInt(append(dst, ":cache "...), ms, 10), ' ')
		dst = append(append(dst, r.CacheKey...), '\n')
	}
	dst = append(dst, '\n')
	return append(dst, r.Body...), nil
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case indexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// lineSafe: no CR, LF or NUL.
func lineSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// OnCallResponse registers the handler of on_call_response: the response
// to a call dispatched by a phase handler that answered [Pause] or
// [Defer], one call at a time in dispatch order. It runs in the dispatching phase, with that
// phase's view ([CallResponse.Request], [CallResponse.Chunk], ...). Its
// verdict is the phase's: [Pause] waits for the next response (and for
// calls dispatched in this handler; [Defer] counts as Pause here); any
// other verdict decides, and the
// responses still due are dropped, their calls cancelled. Without a
// handler every response answers [Pause]: the calls are made, and the
// phase fails after the last one (except in the end phase, where verdicts
// are ignored).
func OnCallResponse(f func(r *CallResponse) Verdict) { handlers.callResponse = f }

// CallResponse is on_call_response's view: one dispatched call's response,
// and the dispatching phase's object. Like every view, it is valid only
// during the callback.
type CallResponse struct {
	Exchange
	id     CallID
	status int
	n      int
	phase  Phases
	flags  uint32
}

// ID is the call's id, as [Dispatch] returned it.
func (r *CallResponse) ID() CallID { return r.id }

// Status is the call's status: the HTTP status for `http`, 0 for a host
// service's result, negative when the call failed (see [CallResponse.Err]).
func (r *CallResponse) Status() int { return r.status }

// Err is nil when the call got a response (whatever its HTTP status), else
// why not: [ErrUnavailable] (connection refused or reset, DNS, TLS, the
// service down), [ErrTimeout], [ErrTooLarge], [ErrBusy] or [ErrInvalid].
func (r *CallResponse) Err() error {
	if r.status >= 0 {
		return nil
	}
	return status(int32(r.status))
}

// Phase is the phase of the handler that dispatched the call.
func (r *CallResponse) Phase() Phases { return r.phase }

var callBodyBuf buffer // CallResponse.Body

var callBodyCache struct {
	b    []byte
	call uint64
}

// Body is the response body. The slice belongs to the SDK and is reused by
// the next callback; use [CallResponse.AppendBody] to keep it.
func (r *CallResponse) Body() []byte {
	if r.n <= 0 {
		return nil
	}
	if callBodyCache.call != r.call || r.call == 0 {
		b, n := callBodyBuf.read(r.n, hostCallResponse)
		if n < 0 {
			broken("call_response", n)
		}
		callBodyCache.b, callBodyCache.call = b, r.call
	}
	return callBodyCache.b
}

// AppendBody appends the response body to dst.
func (r *CallResponse) AppendBody(dst []byte) []byte { return append(dst, r.Body()...) }

// Header returns a response header (case-insensitive name); false when
// absent.
func (r *CallResponse) Header(name string) (string, bool) {
	return readString("call_response_header", func(b []byte) int32 { return hostCallResponseHeader(name, b) })
}

// Request is the request phase's view when the call was dispatched there,
// else nil.
func (r *CallResponse) Request() *Request {
	if r.phase != PhaseRequest {
		return nil
	}
	curRequest = Request{Exchange: r.Exchange}
	return &curRequest
}

// Response is the response_headers phase's view when the call was
// dispatched there, else nil.
func (r *CallResponse) Response() *Response {
	if r.phase != PhaseResponseHeaders {
		return nil
	}
	curResponse = Response{Exchange: r.Exchange, status: int(hostUsage(usageStatus))}
	return &curResponse
}

// Chunk is the chunk phase's view of the event being decided when the call
// was dispatched there, else nil. Its text is the event's as it was; what
// the dispatching handler emitted counts towards [Replace] and [Stop].
func (r *CallResponse) Chunk() *Chunk {
	if r.phase != PhaseChunk {
		return nil
	}
	curChunk = Chunk{Exchange: r.Exchange, n: int(max(hostChunkText(nil), 0)), flags: ChunkFlags(r.flags)}
	return &curChunk
}

// End is the end phase's view when the call was dispatched there, else nil.
func (r *CallResponse) End() *End {
	if r.phase != PhaseEnd {
		return nil
	}
	curEnd = End{Exchange: r.Exchange, flags: EndFlags(r.flags)}
	return &curEnd
}

var curCallResponse CallResponse

func dispatchCallResponse(ctx uint32, call, st, bodyLen int32, phase Phases, flags uint32) Verdict {
	f := handlers.callResponse
	if f == nil {
		return Pause
	}
	calls++
	curCallResponse = CallResponse{Exchange: Exchange{ctx: ctx, call: calls}, id: CallID(call), status: int(st),
		n: int(bodyLen), phase: phase, flags: flags}
	return f(&curCallResponse)
}
