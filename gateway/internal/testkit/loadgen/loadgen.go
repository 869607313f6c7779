// Package loadgen is a closed-loop HTTP load generator for OpenAI-compatible
// endpoints.
//
// Each of Config.Concurrency workers sends requests back to back over one
// keep-alive connection (a fasthttp.HostClient with MaxConns equal to the
// concurrency), so the offered load adapts to the server's speed and the
// generator's own overhead stays small and steady: a warm non-streaming
// request allocates nothing (a stream: the few objects fasthttp needs for
// its body reader), no locks are taken outside the failure path, and every
// sample is kept in a preallocated slice so percentiles are exact.
//
// Non-streaming requests are timed from just before the request is written
// until the whole response has been read. Streaming requests additionally
// record the time to first token (the first SSE data event carrying a
// non-empty "content" or "text" string) and the time to "data: [DONE]".
//
// With Config.MCP the endpoint is a Model Context Protocol server's
// Streamable HTTP endpoint instead, and the requests are tool calls
// (mcp.go).
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Defaults applied by Run to zero-valued Config fields.
const (
	// DefaultModel is the model name put in generated request bodies.
	DefaultModel = "mock-1"
	// DefaultTimeout bounds a single request, including a whole stream.
	DefaultTimeout = 60 * time.Second
	// MaxErrorKinds is how many distinct error messages a Result keeps.
	MaxErrorKinds = 5
)

// transportBackoff is how long a worker pauses after a transport error
// (connection refused, reset, timeout) so that a dead target does not turn
// the generator into a busy loop that steals CPU from everything else.
const transportBackoff = 10 * time.Millisecond

// Header is one extra request header.
type Header struct {
	// Name is the header name, e.g. "Authorization".
	Name string
	// Value is the header value.
	Value string
}

// ParseHeader parses "Name: value" into a Header.
func ParseHeader(s string) (Header, error) {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return Header{}, fmt.Errorf("loadgen: header %q is not of the form \"Name: value\"", s)
	}
	return Header{Name: name, Value: strings.TrimSpace(value)}, nil
}

// Config describes one load-generation run.
type Config struct {
	// URL is the full endpoint URL, e.g.
	// http://127.0.0.1:8080/v1/chat/completions. Requests are POSTs.
	URL string
	// Concurrency is the number of workers, and of connections. Default 1.
	Concurrency int
	// Requests is the total number of measured requests. Exactly one of
	// Requests and Duration must be set.
	Requests int
	// Duration is how long the measured phase lasts. Requests in flight
	// when it ends are completed and recorded.
	Duration time.Duration
	// Ramp spreads the workers' first measured requests evenly over this
	// duration instead of starting all at once (for thousands of long
	// streams, which would otherwise overflow the server's accept queue).
	Ramp time.Duration
	// Warmup is the number of unrecorded requests each worker sends before
	// the measured phase starts. All workers finish their warmup before
	// the measured phase begins.
	Warmup int
	// Stream asks for (and measures) an SSE response: "stream":true is set
	// in the generated body.
	Stream bool
	// Model is the model name in the generated body. Default DefaultModel.
	Model string
	// MaxTokens is max_tokens in the generated body; 0 omits it.
	MaxTokens int
	// Body, when non-nil, is sent verbatim instead of a generated body.
	Body []byte
	// Unique makes every request's body different: each occurrence of
	// UniqueMark in the body is replaced by a number no other request
	// sends, in this run or another (the generated body's prompt ends with the mark). A
	// response cache then never finds a request it has seen.
	Unique bool
	// MCP makes URL an MCP Streamable HTTP endpoint: each worker opens a
	// session (initialize and notifications/initialized, untimed, again
	// whenever the server forgets it), then sends tools/call of the tool
	// "echo" with a short "text" (mcp.go). Stream then asks for, and
	// requires, the answer as an SSE stream. A Body is sent with each
	// MCPIDMark in it replaced by the request's JSON-RPC id.
	MCP bool
	// Headers are extra request headers (e.g. Authorization).
	Headers []Header
	// Timeout bounds each request, including a whole stream. Default
	// DefaultTimeout.
	Timeout time.Duration
	// Label is copied into the Result.
	Label string
}

// ErrorCount is one distinct failure message and how often it occurred.
type ErrorCount struct {
	// Message is the error text, e.g. "HTTP 500: upstream failed".
	Message string `json:"message"`
	// Count is how many measured requests failed with this message.
	Count int `json:"count"`
}

// Result is the outcome of a run. Durations are in microseconds.
type Result struct {
	// Label is Config.Label.
	Label string `json:"label,omitempty"`
	// URL is Config.URL.
	URL string `json:"url"`
	// Stream reports whether streaming was measured.
	Stream bool `json:"stream"`
	// MCP reports whether the requests were MCP tool calls.
	MCP bool `json:"mcp,omitempty"`
	// Concurrency is the number of workers and connections.
	Concurrency int `json:"concurrency"`
	// Warmup is the number of unrecorded requests per worker.
	Warmup int `json:"warmup"`
	// WarmupFailures counts failed warmup requests (not in Failures).
	WarmupFailures int `json:"warmup_failures"`
	// GOMAXPROCS is the generator's GOMAXPROCS during the run.
	GOMAXPROCS int `json:"gomaxprocs"`
	// Started is when the measured phase began.
	Started time.Time `json:"started"`
	// ElapsedSeconds is the length of the measured phase, up to the end of
	// the last request.
	ElapsedSeconds float64 `json:"elapsed_s"`
	// Count is the number of measured requests, successful or not.
	Count int `json:"count"`
	// Successes is Count minus Failures.
	Successes int `json:"successes"`
	// Failures counts non-2xx responses, transport errors, and streams
	// that ended without "data: [DONE]" or without any content delta.
	Failures int `json:"failures"`
	// Errors lists the first MaxErrorKinds distinct failure messages.
	Errors []ErrorCount `json:"errors,omitempty"`
	// RequestsPerSec is Count / ElapsedSeconds.
	RequestsPerSec float64 `json:"rps"`
	// SuccessesPerSec is Successes / ElapsedSeconds.
	SuccessesPerSec float64 `json:"ok_rps"`
	// Latency summarises successful requests, from just before the request
	// is written to the end of the response body.
	Latency Percentiles `json:"latency_us"`
	// TTFT summarises the time to the first non-empty content delta of
	// successful streams (MCP: to the stream's first event). Nil unless
	// Stream.
	TTFT *Percentiles `json:"ttft_us,omitempty"`
	// StreamTotal summarises the time to "data: [DONE]" of successful
	// streams (MCP: to the tool call's result). Nil unless Stream.
	StreamTotal *Percentiles `json:"total_us,omitempty"`
}

// sample is one measured request.
type sample struct {
	latency time.Duration
	ttft    time.Duration
	total   time.Duration
	// recorded distinguishes a filled slot from an untouched one in the
	// shared slice used by request-count runs.
	recorded bool
	failed   bool
}

// statusError is a non-2xx response.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	if e.body == "" {
		return fmt.Sprintf("HTTP %d", e.code)
	}
	return fmt.Sprintf("HTTP %d: %s", e.code, e.body)
}

// errNoDone and errNoToken are stream failures with a 2xx status.
var (
	errNoDone  = errors.New("stream ended without data: [DONE]")
	errNoToken = errors.New("stream had no non-empty content delta")
)

// Run executes the load described by cfg and returns its summary. A
// cancelled ctx stops the run early; the partial Result is returned along
// with ctx's error.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := normalise(cfg)
	if err != nil {
		return Result{}, err
	}
	client, err := newClient(cfg)
	if err != nil {
		return Result{}, err
	}
	body := cfg.Body
	if body == nil {
		body, err = defaultBody(cfg)
		if err != nil {
			return Result{}, err
		}
	}
	log := &errorLog{}
	workers := make([]*worker, cfg.Concurrency)
	for i := range workers {
		workers[i] = newWorker(cfg, client, body)
	}
	defer func() {
		for _, w := range workers {
			w.release()
		}
		client.CloseIdleConnections()
	}()

	// Warmup: every worker finishes before the clock starts, so the
	// measured phase begins with C established connections.
	var wg sync.WaitGroup
	var warmupFailures atomic.Int64
	warmupRate := make([]float64, len(workers))
	for i, w := range workers {
		wg.Go(func() {
			t0 := time.Now()
			n := 0
			for ; n < cfg.Warmup && ctx.Err() == nil; n++ {
				if _, err := w.once(); err != nil {
					warmupFailures.Add(1)
					w.backoff(ctx, err)
				}
			}
			if el := time.Since(t0); n > 0 && el > 0 {
				warmupRate[i] = float64(n) / el.Seconds()
			}
		})
	}
	wg.Wait()

	res := Result{
		Label:          cfg.Label,
		URL:            cfg.URL,
		Stream:         cfg.Stream,
		MCP:            cfg.MCP,
		Concurrency:    cfg.Concurrency,
		Warmup:         cfg.Warmup,
		WarmupFailures: int(warmupFailures.Load()),
		GOMAXPROCS:     runtime.GOMAXPROCS(0),
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}

	var perWorker [][]sample
	start := time.Now()
	if cfg.Requests > 0 {
		perWorker = [][]sample{make([]sample, cfg.Requests)}
		shared := perWorker[0]
		var next atomic.Int64
		for wi, w := range workers {
			wg.Go(func() {
				rampWait(ctx, cfg, wi)
				for ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(shared)) {
						return
					}
					shared[i] = w.measure(ctx, log)
				}
			})
		}
	} else {
		perWorker = make([][]sample, len(workers))
		deadline := start.Add(cfg.Duration)
		for i, w := range workers {
			wg.Go(func() {
				rampWait(ctx, cfg, i)
				s := make([]sample, 0, capacityFor(warmupRate[i], cfg.Duration))
				for ctx.Err() == nil && time.Now().Before(deadline) {
					s = append(s, w.measure(ctx, log))
				}
				perWorker[i] = s
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)

	res.Started = start
	res.ElapsedSeconds = elapsed.Seconds()
	res.Errors = log.entries
	summariseInto(&res, perWorker, cfg.Stream)
	return res, ctx.Err()
}

// rampWait delays worker i by its share of cfg.Ramp.
func rampWait(ctx context.Context, cfg Config, i int) {
	if cfg.Ramp <= 0 || cfg.Concurrency <= 1 {
		return
	}
	t := time.NewTimer(cfg.Ramp * time.Duration(i) / time.Duration(cfg.Concurrency))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// capacityFor estimates how many samples one worker will produce in d given
// its warmup rate, with headroom; append grows the slice if it is short.
func capacityFor(rate float64, d time.Duration) int {
	const minCap, maxCap = 1024, 1 << 22
	if rate <= 0 {
		return minCap
	}
	n := int(rate*d.Seconds()*1.5) + 64
	return max(minCap, min(n, maxCap))
}

// summariseInto fills the counting and percentile fields of res.
func summariseInto(res *Result, perWorker [][]sample, stream bool) {
	n := 0
	for _, s := range perWorker {
		n += len(s)
	}
	lat := make([]time.Duration, 0, n)
	var ttft, total []time.Duration
	if stream {
		ttft = make([]time.Duration, 0, n)
		total = make([]time.Duration, 0, n)
	}
	for _, ws := range perWorker {
		for _, s := range ws {
			if !s.recorded {
				continue
			}
			res.Count++
			if s.failed {
				res.Failures++
				continue
			}
			lat = append(lat, s.latency)
			if stream {
				ttft = append(ttft, s.ttft)
				total = append(total, s.total)
			}
		}
	}
	res.Successes = res.Count - res.Failures
	if res.ElapsedSeconds > 0 {
		res.RequestsPerSec = round2(float64(res.Count) / res.ElapsedSeconds)
		res.SuccessesPerSec = round2(float64(res.Successes) / res.ElapsedSeconds)
	}
	res.Latency = summarise(lat)
	if stream {
		t, tot := summarise(ttft), summarise(total)
		res.TTFT, res.StreamTotal = &t, &tot
	}
}

func round2(v float64) float64 {
	return float64(int64(v*100+0.5)) / 100
}

// normalise validates cfg and applies defaults.
func normalise(cfg Config) (Config, error) {
	if cfg.URL == "" {
		return cfg, errors.New("loadgen: URL is required")
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Concurrency < 0 {
		return cfg, errors.New("loadgen: Concurrency must be positive")
	}
	if cfg.Requests < 0 || cfg.Duration < 0 || cfg.Warmup < 0 || cfg.MaxTokens < 0 {
		return cfg, errors.New("loadgen: Requests, Duration, Warmup and MaxTokens must not be negative")
	}
	if (cfg.Requests > 0) == (cfg.Duration > 0) {
		return cfg, errors.New("loadgen: set exactly one of Requests and Duration")
	}
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return cfg, nil
}

// newClient builds the single HostClient shared by all workers.
func newClient(cfg Config) (*fasthttp.HostClient, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("loadgen: bad URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("loadgen: URL scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("loadgen: URL %q has no host", cfg.URL)
	}
	tls := u.Scheme == "https"
	return &fasthttp.HostClient{
		Addr:                      fasthttp.AddMissingPort(u.Host, tls),
		IsTLS:                     tls,
		Name:                      "tollgate-loadgen",
		MaxConns:                  cfg.Concurrency,
		MaxConnWaitTimeout:        cfg.Timeout,
		ReadTimeout:               cfg.Timeout,
		WriteTimeout:              cfg.Timeout,
		MaxIdemponentCallAttempts: 1,
		Dial: func(addr string) (net.Conn, error) {
			return fasthttp.DialTimeout(addr, 10*time.Second)
		},
		ReadBufferSize:     16 << 10,
		StreamResponseBody: cfg.Stream,
	}, nil
}

// defaultBody builds the request body: a chat completion request, or a
// legacy completion request when the URL path ends in /completions without
// /chat/.
func defaultBody(cfg Config) ([]byte, error) {
	if cfg.MCP {
		return mcpBody(cfg), nil
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	type request struct {
		Model     string    `json:"model"`
		Messages  []message `json:"messages,omitempty"`
		Prompt    string    `json:"prompt,omitempty"`
		MaxTokens int       `json:"max_tokens,omitempty"`
		Stream    bool      `json:"stream,omitempty"`
	}
	prompt := "Say hello in one short sentence."
	if cfg.Unique {
		prompt += " " + UniqueMark
	}
	r := request{Model: cfg.Model, MaxTokens: cfg.MaxTokens, Stream: cfg.Stream}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(u.Path, "/completions") && !strings.HasSuffix(u.Path, "/chat/completions") {
		r.Prompt = prompt
	} else {
		r.Messages = []message{{Role: "user", Content: prompt}}
	}
	return json.Marshal(r)
}

// UniqueMark is the placeholder Config.Unique replaces in each body.
const UniqueMark = "{{unique}}"

// uniqueSeq numbers the requests of Config.Unique across workers;
// uniqueRun, the process's start time, keeps two runs' numbers apart.
var (
	uniqueSeq atomic.Int64
	uniqueRun = strconv.FormatInt(time.Now().UnixNano(), 36)
)

// worker owns one request, one response and one line reader, reused for
// every request it sends.
type worker struct {
	client *fasthttp.HostClient
	stream bool
	req    *fasthttp.Request
	resp   *fasthttp.Response
	lines  *bufio.Reader
	// With Config.Unique or MCP: the body cut at its marks, and the body
	// rebuilt per request.
	tmpl []segment
	buf  []byte
	// mcp is the worker's MCP session (Config.MCP), nil otherwise.
	mcp *mcpSession
}

// segment is a piece of a body template: text, then the value of mark
// (markNone after the last piece).
type segment struct {
	text []byte
	mark byte
}

// Marks a body template fills in per request.
const (
	markNone   byte = iota
	markUnique      // UniqueMark: a number no other request sends
	markID          // MCPIDMark: the worker's next JSON-RPC id
)

// template cuts body at each UniqueMark (if unique) and MCPIDMark (if
// mcp); nil if it has no mark to fill.
func template(body []byte, unique, mcp bool) []segment {
	var t []segment
	for {
		i, mark, n := -1, markNone, 0
		if unique {
			i, mark, n = bytes.Index(body, []byte(UniqueMark)), markUnique, len(UniqueMark)
		}
		if mcp {
			if j := bytes.Index(body, []byte(MCPIDMark)); j >= 0 && (i < 0 || j < i) {
				i, mark, n = j, markID, len(MCPIDMark)
			}
		}
		if i < 0 {
			if t == nil {
				return nil
			}
			return append(t, segment{text: body})
		}
		t = append(t, segment{text: body[:i], mark: mark})
		body = body[i+n:]
	}
}

// renumber fills in the body's marks for the next request: a body no
// other request sent (Config.Unique), the next JSON-RPC id (Config.MCP).
func (w *worker) renumber() {
	if w.tmpl == nil {
		return
	}
	var n int64
	w.buf = w.buf[:0]
	for _, sg := range w.tmpl {
		w.buf = append(w.buf, sg.text...)
		switch sg.mark {
		case markUnique:
			if n == 0 {
				n = uniqueSeq.Add(1)
			}
			w.buf = append(append(w.buf, uniqueRun...), '-')
			w.buf = strconv.AppendInt(w.buf, n, 10)
		case markID:
			w.buf = strconv.AppendInt(w.buf, w.mcp.nextID, 10)
		}
	}
	if w.mcp != nil {
		w.mcp.nextID++
	}
	w.req.SetBodyRaw(w.buf)
}

func newWorker(cfg Config, client *fasthttp.HostClient, body []byte) *worker {
	req := fasthttp.AcquireRequest()
	req.SetRequestURI(cfg.URL)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	switch {
	case cfg.MCP:
		// The transport requires both, whichever the server answers.
		req.Header.Set(fasthttp.HeaderAccept, mcpAccept)
	case cfg.Stream:
		req.Header.Set(fasthttp.HeaderAccept, "text/event-stream")
	}
	for _, h := range cfg.Headers {
		req.Header.Set(h.Name, h.Value)
	}
	req.SetBody(body)
	w := &worker{client: client, stream: cfg.Stream, req: req, resp: fasthttp.AcquireResponse()}
	if cfg.MCP {
		w.mcp = newMCPSession(cfg)
	}
	w.tmpl = template(body, cfg.Unique, cfg.MCP)
	if cfg.Stream {
		w.lines = bufio.NewReaderSize(nil, 64<<10)
	}
	return w
}

func (w *worker) release() {
	_ = w.resp.CloseBodyStream()
	if w.mcp != nil {
		w.mcp.release()
	}
	fasthttp.ReleaseRequest(w.req)
	fasthttp.ReleaseResponse(w.resp)
}

// measure sends one recorded request, logging its failure if any.
func (w *worker) measure(ctx context.Context, log *errorLog) sample {
	s, err := w.once()
	s.recorded = true
	if err != nil {
		s.failed = true
		log.add(err.Error())
		w.backoff(ctx, err)
	}
	return s
}

// backoff pauses briefly after a transport error (not after an HTTP error
// status or a malformed stream, which are fast, legitimate answers).
func (w *worker) backoff(ctx context.Context, err error) {
	var se *statusError
	var me *mcpError
	if errors.As(err, &se) || errors.As(err, &me) || errors.Is(err, errNoDone) || errors.Is(err, errNoToken) {
		return
	}
	t := time.NewTimer(transportBackoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// once sends one request and times it.
func (w *worker) once() (sample, error) {
	if w.mcp != nil {
		return w.onceMCP()
	}
	w.renumber()
	if w.stream {
		return w.onceStream()
	}
	start := time.Now()
	err := w.client.Do(w.req, w.resp)
	latency := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	if code := w.resp.StatusCode(); code < 200 || code > 299 {
		return sample{}, &statusError{code: code, body: snippet(w.resp.Body())}
	}
	return sample{latency: latency}, nil
}

// onceStream sends one streaming request and reads the SSE body line by
// line, timestamping the first content delta and [DONE] as they arrive.
func (w *worker) onceStream() (sample, error) {
	start := time.Now()
	err := w.client.Do(w.req, w.resp)
	if err != nil {
		return sample{}, err
	}
	// Closing after the body reached EOF returns the connection to the
	// pool; closing earlier (errors) discards it.
	defer w.resp.CloseBodyStream() //nolint:errcheck
	body := w.resp.BodyStream()
	if code := w.resp.StatusCode(); code < 200 || code > 299 {
		// Error bodies are small: reading one to EOF lets the connection
		// go back to the pool instead of being discarded.
		var msg []byte
		if body != nil {
			msg, _ = io.ReadAll(io.LimitReader(body, 64<<10))
		}
		return sample{}, &statusError{code: code, body: snippet(msg)}
	}
	if body == nil {
		return sample{}, errNoDone
	}
	w.lines.Reset(body)
	var (
		s                       sample
		gotToken, gotDone, cont bool
	)
	for {
		line, err := w.lines.ReadSlice('\n')
		if len(line) > 0 && !cont {
			switch classifyLine(line) {
			case lineToken:
				if !gotToken {
					s.ttft, gotToken = time.Since(start), true
				}
			case lineDone:
				if !gotDone {
					s.total, gotDone = time.Since(start), true
				}
			}
		}
		// A line longer than the buffer arrives in pieces; only its
		// first piece is classified.
		cont = err == bufio.ErrBufferFull
		if err == nil || cont {
			continue
		}
		if err == io.EOF {
			break
		}
		w.lines.Reset(nil)
		return sample{}, fmt.Errorf("reading stream: %w", err)
	}
	s.latency = time.Since(start)
	w.lines.Reset(nil)
	switch {
	case !gotDone:
		return sample{}, errNoDone
	case !gotToken:
		return sample{}, errNoToken
	}
	return s, nil
}

// snippet shortens a response body for an error message.
func snippet(b []byte) string {
	const limit = 200
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return s
}

// errorLog keeps the first MaxErrorKinds distinct failure messages.
type errorLog struct {
	mu      sync.Mutex
	entries []ErrorCount
}

func (l *errorLog) add(msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.entries {
		if l.entries[i].Message == msg {
			l.entries[i].Count++
			return
		}
	}
	if len(l.entries) < MaxErrorKinds {
		l.entries = append(l.entries, ErrorCount{Message: msg, Count: 1})
	}
}
