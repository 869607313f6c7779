// Package plugintest runs a built Tollgate plugin (.wasm) in the real host
// runtime against fake host services, so a plugin author can unit-test a
// guard without a gateway:
//
//	func TestGuard(t *testing.T) {
//		p := plugintest.Load(t, plugintest.Build(t, "."), `{"deny":["secret"]}`)
//		res := p.Request(plugintest.Request{Body: `{"model":"m","messages":[{"role":"user","content":"the secret"}]}`})
//		if !res.Rejected || res.Status != 400 { t.Fatal(res) }
//	}
//
// `tollgate plugin test DIR` builds DIR and runs its tests with
// TOLLGATE_PLUGIN_WASM set to the built module, which Build then returns.
package plugintest

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Build returns the .wasm of the plugin in dir: $TOLLGATE_PLUGIN_WASM when
// set (as `tollgate plugin test` does), otherwise a cached build of dir.
func Build(t testing.TB, dir string) string {
	t.Helper()
	if p := os.Getenv("TOLLGATE_PLUGIN_WASM"); p != "" {
		return p
	}
	p, err := wasmbuild.Cached(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Plugin is a loaded plugin and the fake services it calls.
type Plugin struct {
	t        testing.TB
	pipe     *wasmhost.Pipeline
	Services *Services
	logs     *logBuffer
}

// Options tune Load. The zero value is the gateway's defaults.
type Options struct {
	Deadline    time.Duration
	MemoryBytes int64
	FailOpen    bool
}

var (
	hostOnce sync.Once
	host     *wasmhost.Host
	hostErr  error
	logs     = &logBuffer{}
)

// Load loads the module at path with config (JSON; "" means {}). The plugin
// is closed when the test ends. A config the plugin refuses fails the test;
// use LoadErr to test that.
func Load(t testing.TB, path, config string, opts ...Options) *Plugin {
	t.Helper()
	p, err := LoadErr(t, path, config, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LoadErr is Load returning the load error (e.g. a refused config).
func LoadErr(t testing.TB, path, config string, opts ...Options) (*Plugin, error) {
	t.Helper()
	hostOnce.Do(func() {
		// Compiled code is cached where the gateway caches it by default
		// (the user cache dir), so a plugin is compiled once per machine
		// rather than once per test process: under the race detector one
		// compile takes 10-20 s of CPU.
		host, hostErr = wasmhost.NewHost("", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	})
	if hostErr != nil {
		return nil, hostErr
	}
	mod, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if config == "" {
		config = "{}"
	}
	spec := wasmhost.Spec{Name: "plugin", Module: mod, Config: []byte(config)}
	for _, o := range opts {
		spec.Deadline, spec.MemoryBytes = o.Deadline, o.MemoryBytes
		if o.FailOpen {
			spec.OnError = wasmhost.FailOpen
		}
	}
	pipe, err := wasmhost.NewPipeline(context.Background(), host, []wasmhost.Spec{spec})
	if err != nil {
		return nil, err
	}
	t.Cleanup(pipe.Close)
	return &Plugin{t: t, pipe: pipe, Services: &Services{}, logs: logs}, nil
}

// Instrument sets the plugin's instruments, as the gateway sets them for
// its per-phase histograms: a benchmark can observe the callbacks' time
// without the fake services' and the test's own.
func (p *Plugin) Instrument(in wasmhost.Instruments) { p.pipe.Instrument("plugin", in) }

// Logs returns everything plugins logged so far in this test binary.
func (p *Plugin) Logs() string { return p.logs.String() }

// Metric returns the value of a counter the plugin added to with metric_add.
func (p *Plugin) Metric(name string) int64 {
	v, ok := p.pipe.Plugins()[0].Stats().Events.Load(name)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

// Request is what the host tells a plugin about a request.
//
// The facts the gateway reads from a request body — the model, stream,
// max_tokens, the number of messages, the prompt's bytes and estimated
// tokens — come from Body, read for Endpoint as the gateway reads them
// (wasmhost.ReadRequestFacts). A field set here overrides the body's: any
// non-zero value, and any value (zero included) of a field named in
// Explicit, so that a test can say "not streamed" or "no max_tokens" for a
// body that says otherwise. body_bytes is always len(Body). After a
// plugin rewrote the body (set_message_text) the prompt's facts are read
// from the new body: the overrides of PromptChars, PromptTokens and Bound
// no longer apply.
type Request struct {
	Model    string            // the body's "model" when "", or "test-model" if it has none; for "mcp", "mcp:{server}/{tool}" (a tools/call) or "mcp:{server}"
	Endpoint string            // default "chat/completions"; also "completions", "embeddings", "messages", "responses", and "mcp" (Body one JSON-RPC message)
	Body     string            // the raw request JSON
	Headers  map[string]string // client headers; CR and LF in a value become spaces, as the gateway's server hands them over
	Stream   bool
	// MaxTokens is max_completion_tokens, else max_tokens; a negative
	// value means absent.
	MaxTokens    int64
	Messages     int64
	PromptChars  int64
	PromptTokens int64 // the gateway's estimate, request_int(PROMPT_TOKENS)
	// Bound, when not zero, replaces the body's prompt-bound facts
	// (request_int PROMPT_BYTES, IMAGES, UNBOUNDED, TOOLS, BUILTIN_TOOLS,
	// CHOICES).
	Bound wasmhost.BoundFacts
	// Explicit names the fields whose values count even when zero.
	Explicit Field
	Tenant   *wasmhost.Tenant
}

// Field names a field of Request for Request.Explicit.
type Field uint8

// The fields of Request that Explicit can name.
const (
	FieldModel Field = 1 << iota
	FieldStream
	FieldMaxTokens
	FieldMessages
	FieldPromptChars
	FieldPromptTokens
)

// facts returns the facts the plugin sees: the body's, then req's
// overrides.
func (req *Request) facts() wasmhost.RequestFacts {
	f, _ := wasmhost.ReadRequestFacts([]byte(req.Body), req.endpoint())
	if req.Model != "" || req.Explicit&FieldModel != 0 {
		f.Model = []byte(req.Model)
	} else if len(f.Model) == 0 {
		f.Model = []byte("test-model")
	}
	if req.Stream || req.Explicit&FieldStream != 0 {
		f.Stream = req.Stream
	}
	if req.MaxTokens != 0 || req.Explicit&FieldMaxTokens != 0 {
		f.MaxTokens = max(req.MaxTokens, -1)
	}
	override(&f.Messages, req.Messages, req.Explicit&FieldMessages != 0)
	override(&f.PromptChars, req.PromptChars, req.Explicit&FieldPromptChars != 0)
	override(&f.PromptTokens, req.PromptTokens, req.Explicit&FieldPromptTokens != 0)
	if req.Bound != (wasmhost.BoundFacts{}) {
		f.Bound = req.Bound
	}
	return f
}

// MaxBodyBytes is the largest body a plugin's rewrite may make, the
// gateway's default server.max_body_bytes.
const MaxBodyBytes = 4 << 20

// rewrittenFacts are the facts the plugins see after a plugin rewrote the
// body: the new body's, with req's overrides of the facts a rewrite does
// not change (model, stream, max_tokens, messages).
func (req *Request) rewrittenFacts(body []byte) wasmhost.RequestFacts {
	next := *req
	next.Body = string(body)
	next.PromptChars, next.PromptTokens, next.Bound = 0, 0, wasmhost.BoundFacts{}
	next.Explicit &^= FieldPromptChars | FieldPromptTokens
	return next.facts()
}

func override(dst *int64, v int64, explicit bool) {
	if v != 0 || explicit {
		*dst = v
	}
}

func (req *Request) endpoint() string { return or(req.Endpoint, "chat/completions") }

// RequestResult is what the request phase decided.
type RequestResult struct {
	// Body is the request body as it would go upstream: the client's,
	// or as plugins rewrote it (set_message_text; Rewritten is then
	// true).
	Body                string
	Rewritten           bool
	Rejected            bool
	Status              int
	Type, Code, Message string
	UpstreamHeaders     map[string]string // set with set_request_header
	ClientHeaders       map[string]string // set with set_response_header
	Err                 error             // a plugin failure (trap, deadline, bad verdict)
	// Answered: a plugin answered the request itself (RESPOND). Status is
	// then the answer's, AnswerBody its whole reply, AnswerEvents its
	// stream's events (the data of each, without [DONE]).
	Answered     bool
	AnswerBody   string
	AnswerEvents []string
}

func (p *Plugin) newRequest(req Request) *wasmhost.Request {
	r := wasmhost.AcquireRequest()
	r.SetFacts(req.facts())
	r.Endpoint, r.Body, r.RequestID = []byte(req.endpoint()), []byte(req.Body), []byte("req_test")
	r.Tenant = req.Tenant
	r.MaxBodyBytes = MaxBodyBytes
	r.Refacts = func(r *wasmhost.Request) error {
		r.SetFacts(req.rewrittenFacts(r.Body))
		return nil
	}
	h := make(wasmhost.Headers, 0, len(req.Headers))
	for k, v := range req.Headers {
		h = append(h, wasmhost.Header{Name: []byte(k), Value: headerValue(v)})
	}
	r.ClientHeader = h
	r.Services = p.Services
	return r
}

// headerValue is v as the gateway's HTTP server hands a header value to
// plugins: a value cannot hold CR or LF on the wire, and the server turns
// any it is given into spaces (as fasthttp's RequestHeader.Set does).
func headerValue(v string) []byte {
	b := []byte(v)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return b
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Request runs the request phase.
func (p *Plugin) Request(req Request) RequestResult {
	r := p.newRequest(req)
	defer wasmhost.ReleaseRequest(r)
	return p.request(r)
}

func (p *Plugin) request(r *wasmhost.Request) RequestResult {
	err := p.pipe.Request(r)
	res := RequestResult{UpstreamHeaders: headerMap(r.SetUpstreamHeaders), ClientHeaders: headerMap(r.SetClientHeaders),
		Body: string(r.Body), Rewritten: r.BodyRewritten()}
	var rej *wasmhost.RejectError
	var an *wasmhost.Answered
	switch {
	case errors.As(err, &rej):
		res.Rejected, res.Status, res.Type, res.Code, res.Message = true, rej.Status, rej.Type, rej.Code, rej.Message
	case errors.As(err, &an):
		res.Answered, res.Status, res.AnswerBody = true, r.Answer.Status, string(r.Answer.Body)
		for _, e := range r.Answer.Events {
			res.AnswerEvents = append(res.AnswerEvents, string(e))
		}
	case err != nil:
		res.Err = err
	}
	return res
}

func headerMap(hs []wasmhost.Header) map[string]string {
	m := make(map[string]string, len(hs))
	for _, h := range hs {
		m[string(h.Name)] = string(h.Value)
	}
	return m
}

// StreamResult is what a client would have received from a stream whose
// upstream sent the given text deltas.
type StreamResult struct {
	Text         string // the text the client received, in order
	Stopped      bool   // a plugin stopped the stream
	FinishReason string // the finish_reason sent with STOP
	Err          error  // a plugin failure (the stream would end with an error event)
}

// Stream runs the chunk phase over deltas (one event each), then the
// stream's end ([DONE]) and the end phase, applying the verdicts as the
// gateway does: HOLD queues events, RELEASE/CONTINUE/REPLACE send what is
// held first, STOP drops held events and sends the correction.
func (p *Plugin) Stream(req Request, deltas []string) StreamResult {
	req.Stream = true
	r := p.newRequest(req)
	defer wasmhost.ReleaseRequest(r)
	var out strings.Builder
	var held []string
	flush := func() {
		for _, h := range held {
			out.WriteString(h)
		}
		held = held[:0]
	}
	for i, d := range deltas {
		flags := wasmhost.ChunkText
		if i == 0 {
			flags |= wasmhost.ChunkRole
		}
		res, err := p.pipe.Chunk(r, []byte(d), flags)
		if err != nil {
			return StreamResult{Text: out.String(), Err: err}
		}
		switch res.Verdict {
		case wasmhost.Hold:
			held = append(held, d)
		case wasmhost.Replace:
			flush()
			out.WriteString(string(res.Text))
		case wasmhost.Stop:
			out.WriteString(string(res.Text))
			return StreamResult{Text: out.String(), Stopped: true, FinishReason: or(string(res.FinishReason), "content_filter")}
		default:
			flush()
			out.WriteString(d)
		}
	}
	res, err := p.pipe.Chunk(r, nil, wasmhost.ChunkDone)
	if err != nil {
		return StreamResult{Text: out.String(), Err: err}
	}
	switch res.Verdict {
	case wasmhost.Stop:
		out.WriteString(string(res.Text))
		return StreamResult{Text: out.String(), Stopped: true, FinishReason: or(string(res.FinishReason), "content_filter")}
	case wasmhost.Replace:
		flush()
		out.WriteString(string(res.Text))
	default:
		flush()
	}
	r.TextBytesSent = int64(out.Len())
	p.pipe.End(r, wasmhost.EndCompleted)
	return StreamResult{Text: out.String()}
}

// Whole runs the chunk phase over a non-streamed reply's text and returns
// the text the client would receive.
func (p *Plugin) Whole(req Request, text string) StreamResult {
	r := p.newRequest(req)
	defer wasmhost.ReleaseRequest(r)
	res, err := p.pipe.Chunk(r, []byte(text), wasmhost.ChunkText|wasmhost.ChunkWhole)
	switch {
	case err != nil:
		return StreamResult{Err: err}
	case res.Verdict == wasmhost.Stop:
		return StreamResult{Text: string(res.Text), Stopped: true, FinishReason: or(string(res.FinishReason), "content_filter")}
	case res.Verdict == wasmhost.Replace:
		return StreamResult{Text: string(res.Text)}
	}
	return StreamResult{Text: text}
}

// Services is a fake of the host services plugins reach with `call`:
// Handle registers a handler per service name; Calls records every call.
// It answers dispatched calls too (dispatch.go).
type Services struct {
	// Models are the host's facts about models (from their prices), by
	// model name: request_int's MODEL_* numbers and PROMPT_TOKENS_BOUND.
	// A model not here is unknown. Set it before the first request.
	Models map[string]wasmhost.ModelFacts

	mu       sync.Mutex
	handlers map[string]func(req []byte) ([]byte, error)
	calls    []Call
	d        dispatchState // dispatched calls (dispatch.go)
}

// ModelFacts implements wasmhost.ModelFacter from Models.
func (s *Services) ModelFacts(r *wasmhost.Request) wasmhost.ModelFacts {
	return s.Models[string(r.Model)]
}

// Call is one recorded service call.
type Call struct {
	Service string
	Request string
}

// Handle serves service name with f.
func (s *Services) Handle(name string, f func(req []byte) ([]byte, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handlers == nil {
		s.handlers = map[string]func([]byte) ([]byte, error){}
	}
	s.handlers[name] = f
}

// Calls returns the calls made so far.
func (s *Services) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Call implements wasmhost.Services.
func (s *Services) Call(_ *wasmhost.Request, name string, req []byte) ([]byte, error) {
	s.mu.Lock()
	s.calls = append(s.calls, Call{Service: name, Request: string(req)})
	f := s.handlers[name]
	s.mu.Unlock()
	if f == nil {
		return nil, wasmhost.ErrNoService
	}
	return f(req)
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
