// Package mockllm is a fast, deterministic, OpenAI-compatible fake model
// server. The gateway's end-to-end tests, `make run` and the benchmarks use it
// as the upstream on the other side of the gateway.
//
// It serves POST /v1/chat/completions, POST /v1/completions,
// POST /v1/embeddings, GET /v1/models and GET /v1/models/{id}, Anthropic's
// POST /v1/messages (anthropic.go), Azure OpenAI's deployment and v1
// paths (azure.go), Bedrock's Converse and ConverseStream (bedrock.go),
// Google's generateContent and streamGenerateContent in both the Gemini
// API's and Vertex AI's paths (gemini.go), OpenAI's Responses API
// (responses.go), and OpenAI's images, audio, moderations, files and
// batches (passthru.go), and a Model Context Protocol server's Streamable
// HTTP endpoint at /mcp (mcp.go). Replies are
// deterministic: generated content is the words "tok0 ", "tok1 ", ... (or the
// configured Text cut into ChunkSize-byte pieces or at Split offsets), so a test can predict the
// exact bytes the gateway should relay. Behaviour is set by Config and can be
// overridden per request with X-Mock-* headers, so one server can back many
// test cases.
package mockllm

import (
	"context"
	"crypto/subtle"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	DefaultTokens        = 16
	DefaultChunkSize     = 4
	DefaultEmbeddingDims = 8
)

// DefaultModels are the models listed by GET /v1/models when Config.Models is
// empty.
var DefaultModels = []string{"mock-1", "mock-2"}

// MaxBodyBytes is the largest request body the mock accepts; larger bodies
// get a 413 OpenAI-style error.
const MaxBodyBytes = 32 << 20

// modelsCreated is the fixed "created" timestamp of listed models, so the
// models list is byte-for-byte deterministic.
const modelsCreated = 1700000000

// Config sets the default behaviour of a Server. Every field except APIKey,
// Models, EmbeddingDims and MCPSleep can be overridden per request by an
// X-Mock-* header (see the package constants Header*).
type Config struct {
	// TTFT is the delay before the first data event of a stream (the
	// response headers are sent before it), or before the reply of a
	// non-streaming completion or embeddings request.
	TTFT time.Duration
	// Tokens is the number of content tokens to generate. Zero means the
	// default (16); a negative value means no tokens. Ignored when Text is
	// set.
	Tokens int
	// InterToken is the delay between consecutive content events.
	InterToken time.Duration
	// Usage, when true, makes every stream end with a usage chunk even if
	// the request did not ask for stream_options.include_usage. When false
	// the usage chunk is sent only if the request asked for it.
	Usage bool
	// UsageKinds are tokens of the kinds providers price apart (cached,
	// cache writes, audio, images, reasoning) added to every reply's
	// usage; see UsageKinds. Zero: none, the usage as before.
	UsageKinds UsageKinds
	// Text, if non-empty, is the exact reply text instead of generated
	// tokens. It should be valid UTF-8.
	Text string
	// ChunkSize is the number of bytes of Text per content event (default
	// 4). A UTF-8 rune is never split: a piece is shortened to the last
	// whole rune, or holds one whole rune if that rune alone is longer.
	ChunkSize int
	// Split, if non-empty, cuts Text into content events at exactly these
	// byte offsets instead of every ChunkSize bytes: strictly increasing,
	// each inside Text (0 < offset < len(Text)) and on a rune boundary.
	// Streams and the non-streamed text are the same either way.
	Split []int
	// ToolCallAt, if > 0, makes a chat stream carry a tool-call delta
	// event after the first ToolCallAt bytes of Text (a content event
	// ends there) and finish with "tool_calls". At most len(Text).
	ToolCallAt int
	// ToolCallArgs, if non-empty, are the fragments of that tool call's
	// function.arguments, one event each (the first also carries the
	// call's id and name); empty means one event with arguments "{}".
	ToolCallArgs []string
	// FailStatus, if non-zero, makes every known route reply with this HTTP
	// status and an OpenAI-style error body. Values outside 200..599 are
	// treated as 500.
	FailStatus int
	// FailDelay is the delay before the first byte of any reply on a known
	// route (the failure reply, response headers, or a 4xx), useful for
	// imitating a hung upstream.
	FailDelay time.Duration
	// CutAfter, if > 0, makes streams close the connection abruptly after N
	// data events (never sending [DONE]); non-streaming completions get the
	// connection closed without any response.
	CutAfter int
	// GarbageAfter, if > 0, makes streams write a run of malformed SSE
	// (GarbageSSE) after N data events and then go on as usual, so a
	// stream still ends with [DONE]. The garbage carries no content
	// text. Non-streaming replies ignore it.
	GarbageAfter int
	// APIKey, if non-empty, is required as "Authorization: Bearer <APIKey>"
	// (as "x-api-key: <APIKey>" on POST /v1/messages, as the Gemini API's
	// key and Vertex AI's bearer token on generateContent); other requests
	// get a 401 error.
	APIKey string
	// Models are the model ids listed by GET /v1/models (default
	// DefaultModels).
	Models []string
	// Recordings are Messages API replies POST /v1/messages replays when
	// a request names one in HeaderRecording: an SSE stream, or a JSON
	// message (see anthropic.go).
	Recordings map[string][]byte
	// TokensPerByte makes chat and completions usage count one token per
	// byte: prompt_tokens is the UTF-8 bytes of the prompt's text plus 4
	// per message, completion_tokens the bytes of the reply's text. Tests
	// use it for prompts whose true count is far above chars/4 (Chinese,
	// hex), as no tokenizer's count can exceed it.
	TokensPerByte bool
	// EmbeddingDims is the length of embedding vectors (default 8); a
	// request's "dimensions" field overrides it.
	EmbeddingDims int
	// AWSSecretKeys, if non-empty, are the AWS credentials (access key id
	// → secret access key) the Bedrock routes accept: their SigV4
	// signatures are verified (see bedrock.go).
	AWSSecretKeys map[string]string
	// MCPSleep is how long the MCP tool "sleep" sleeps when its call
	// names no "ms" (see mcp.go).
	MCPSleep time.Duration
	// MCPStream makes POST /mcp answer tools/call as an SSE stream (the
	// progress notifications, then the result) instead of JSON.
	MCPStream bool
	// MCPProgress is the number of notifications/progress events an SSE
	// tools/call answer sends before its result: the first after TTFT,
	// the others InterToken apart.
	MCPProgress int
}

// Stats is a snapshot of a Server's counters.
type Stats struct {
	// Requests counts every HTTP request received, on any path.
	Requests int64
	// Streams counts valid streaming completion requests that started.
	Streams int64
	// Completed counts requests whose reply, of any status, was written in
	// full (a stream counts once its [DONE] was flushed).
	Completed int64
	// ClientClosed counts requests abandoned because the client closed or
	// reset the connection before the reply was complete.
	ClientClosed int64
}

// Server is the mock model server. It is an http.Handler; create it with New.
type Server struct {
	cfg    Config
	models []byte // pre-encoded GET /v1/models body

	seq          atomic.Int64
	requests     atomic.Int64
	streams      atomic.Int64
	completed    atomic.Int64
	clientClosed atomic.Int64

	// Replies kept for GET /v1/responses/{id} (responses.go).
	storeMu     sync.Mutex
	stored      map[string]storedResponse
	storedOrder []string
	// Files and batches (passthru.go).
	store passStore
	// MCP sessions by Mcp-Session-Id (mcp.go).
	mcpSessions sync.Map // session id → the negotiated protocol version

	onClose   atomic.Pointer[func(requestID string, at time.Time)]
	onRequest atomic.Pointer[func(h http.Header, body []byte)]
}

// New returns a Server for cfg, with defaults applied to zero fields.
func New(cfg Config) *Server {
	if cfg.Tokens == 0 {
		cfg.Tokens = DefaultTokens
	}
	if cfg.Tokens < 0 {
		cfg.Tokens = 0
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.FailStatus != 0 && (cfg.FailStatus < 200 || cfg.FailStatus > 599) {
		cfg.FailStatus = http.StatusInternalServerError
	}
	if cfg.CutAfter < 0 {
		cfg.CutAfter = 0
	}
	if cfg.GarbageAfter < 0 {
		cfg.GarbageAfter = 0
	}
	if cfg.MCPProgress < 0 {
		cfg.MCPProgress = 0
	}
	if cfg.ToolCallAt < 0 {
		cfg.ToolCallAt = 0
	}
	if len(cfg.Models) == 0 {
		cfg.Models = DefaultModels
	}
	cfg.Models = append([]string(nil), cfg.Models...)
	cfg.Split = append([]int(nil), cfg.Split...)
	if cfg.EmbeddingDims <= 0 {
		cfg.EmbeddingDims = DefaultEmbeddingDims
	}
	s := &Server{cfg: cfg}
	s.models = appendModelList(nil, cfg.Models)
	return s
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	return Stats{
		Requests:     s.requests.Load(),
		Streams:      s.streams.Load(),
		Completed:    s.completed.Load(),
		ClientClosed: s.clientClosed.Load(),
	}
}

// SetOnClose sets a function called, from the request goroutine, when the
// mock notices that the client closed or reset the connection before the
// reply was complete. at is when it noticed; requestID is the request's
// X-Request-Id header ("" if none). Set it before serving; nil removes it.
func (s *Server) SetOnClose(f func(requestID string, at time.Time)) {
	if f == nil {
		s.onClose.Store(nil)
		return
	}
	s.onClose.Store(&f)
}

// SetOnRequest sets a function called with each request's headers (a copy)
// and body as received, before any validation. Set it before serving; nil
// removes it.
func (s *Server) SetOnRequest(f func(h http.Header, body []byte)) {
	if f == nil {
		s.onRequest.Store(nil)
		return
	}
	s.onRequest.Store(&f)
}

// ServeHTTP implements http.Handler. To cut a connection (CutAfter) it
// panics with http.ErrAbortHandler, which net/http servers handle silently.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	body, readErr := readBody(r)
	if f := s.onRequest.Load(); f != nil {
		(*f)(r.Header.Clone(), body)
	}
	if readErr != nil {
		if errors.As(readErr, new(*http.MaxBytesError)) {
			s.writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "",
				"request body too large")
			return
		}
		s.noticeClose(r)
		return
	}

	var handle func(*Server, http.ResponseWriter, *http.Request, []byte, *params)
	var modelID string
	switch p := r.URL.Path; {
	case r.Method == http.MethodPost && p == "/v1/chat/completions":
		handle = (*Server).serveChat
	case r.Method == http.MethodPost && p == "/v1/completions":
		handle = (*Server).serveCompletion
	case r.Method == http.MethodPost && p == "/v1/embeddings":
		handle = (*Server).serveEmbeddings
	case r.Method == http.MethodPost && p == "/v1/messages":
		s.serveMessages(w, r, body) // Anthropic's API, its own auth and errors
		return
	case strings.HasPrefix(p, "/model/"):
		s.serveBedrock(w, r, body) // Bedrock's Converse API, its own auth and errors
		return
	case r.Method == http.MethodPost && isGeminiRoute(p):
		s.serveGenerateContent(w, r, body) // Google's APIs, their own auth and errors
		return
	case p == "/v1/responses" || strings.HasPrefix(p, "/v1/responses/"):
		handle = responsesRoute(r.Method, p) // responses.go
	case isPassthru(p): // images, audio, moderations, files, batches (passthru.go)
		handle = (*Server).servePassthru
	case strings.HasPrefix(p, "/openai/") || strings.HasPrefix(p, "/v1/openai/"):
		s.serveAzure(w, r, body) // Azure OpenAI's paths, api-version and api-key
		return
	case p == MCPPath:
		handle = (*Server).serveMCP // the MCP Streamable HTTP endpoint, JSON-RPC errors (mcp.go)
	case r.Method == http.MethodGet && p == "/v1/models":
		handle = (*Server).serveModels
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/models/") && len(p) > len("/v1/models/"):
		modelID = p[len("/v1/models/"):]
		handle = func(s *Server, w http.ResponseWriter, r *http.Request, _ []byte, _ *params) {
			s.serveModel(w, r, modelID)
		}
	default:
		s.writeError(w, http.StatusNotFound, "invalid_request_error", "",
			"Invalid URL ("+r.Method+" "+r.URL.Path+")")
		return
	}

	if !s.authorized(w, r) {
		return
	}
	s.run(w, r, body, handle)
}

// run serves an authorized request on a known route with handle, after
// the X-Mock-* behaviour that applies to every route (delays, failures).
// Each wire format's file calls it once its own path and auth checks pass.
func (s *Server) run(w http.ResponseWriter, r *http.Request, body []byte, handle func(*Server, http.ResponseWriter, *http.Request, []byte, *params)) {
	p, perr := s.params(r.Header)
	if perr != nil {
		s.writeError(w, http.StatusBadRequest, "invalid_request_error", "", perr.Error())
		return
	}
	t := newWaiter(r.Context())
	defer t.stop()
	p.wait = t
	if !t.wait(p.failDelay) {
		s.noticeClose(r)
		return
	}
	if p.failStatus != 0 {
		s.writeFailure(w, p.failStatus)
		return
	}
	handle(s, w, r, body, p)
}

// readBody reads the whole request body, up to MaxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	rd := http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	if r.ContentLength > 0 && r.ContentLength <= MaxBodyBytes {
		buf := make([]byte, r.ContentLength)
		_, err := io.ReadFull(rd, buf)
		if err != nil {
			return nil, err
		}
		// Drain to EOF so net/http starts watching for a client close.
		_, err = io.Copy(io.Discard, rd)
		return buf, err
	}
	return io.ReadAll(rd)
}

// authorized checks the API key and writes a 401 if it is wrong.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		s.writeError(w, http.StatusUnauthorized, "invalid_request_error", "",
			"You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
		return false
	}
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) != 1 {
		s.writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"Incorrect API key provided.")
		return false
	}
	return true
}

// noticeClose records that the client went away and calls OnClose.
func (s *Server) noticeClose(r *http.Request) {
	at := time.Now()
	s.clientClosed.Add(1)
	if f := s.onClose.Load(); f != nil {
		(*f)(r.Header.Get("X-Request-Id"), at)
	}
}

// writeFailure writes the injected FailStatus error.
func (s *Server) writeFailure(w http.ResponseWriter, status int) {
	typ, code := "invalid_request_error", ""
	msg := "mock: injected failure with HTTP status " + itoa(status)
	if text := http.StatusText(status); text != "" {
		msg += " (" + text + ")"
	}
	switch {
	case status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status >= 500:
		typ = "server_error"
	}
	s.writeError(w, status, typ, code, msg)
}

// writeError writes an OpenAI-style error body
// {"error":{"message":..,"type":..,"param":null,"code":..}} (code null when
// empty) and counts the reply as completed.
func (s *Server) writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	b := make([]byte, 0, 96+len(msg))
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"param":null,"code":`...)
	if code == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, code)
	}
	b = append(b, "}}\n"...)
	s.writeJSON(w, status, b)
}

// writeJSON writes a complete JSON reply and counts it as completed.
func (s *Server) writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{itoa(len(body))}
	w.WriteHeader(status)
	if _, err := w.Write(body); err != nil {
		return
	}
	s.completed.Add(1)
}

// waiter implements context-aware delays with one reusable timer.
type waiter struct {
	ctx   context.Context
	done  <-chan struct{}
	timer *time.Timer
}

func newWaiter(ctx context.Context) *waiter {
	return &waiter{ctx: ctx, done: ctx.Done()}
}

// wait sleeps for d and reports whether the client is still connected. With
// d <= 0 it only checks the connection.
func (t *waiter) wait(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-t.done:
			return false
		default:
			return true
		}
	}
	if t.timer == nil {
		t.timer = time.NewTimer(d)
	} else {
		t.timer.Reset(d)
	}
	select {
	case <-t.done:
		t.timer.Stop()
		return false
	case <-t.timer.C:
		return true
	}
}

func (t *waiter) stop() {
	if t.timer != nil {
		t.timer.Stop()
	}
}

// bufPool holds reusable event buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
