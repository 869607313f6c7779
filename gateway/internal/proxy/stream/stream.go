package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/cancels"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/gateway/internal/sse"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// MaxEventBytes bounds one SSE event from an upstream (and one event of a
// translated upstream's stream).
const MaxEventBytes = 1 << 20

// Stream is the body of a streamed reply. fasthttp calls Read from the
// connection's goroutine and writes and flushes one HTTP chunk per Read, so
// each Read returns the events already at hand and no more: an event is
// flushed to the client as soon as it arrives, and events that arrived
// together go out in one write. Events the gateway does not change are
// forwarded as the upstream's own bytes.
//
// Each event is parsed once into chunk, the structure the chunk phase and
// the accounting read.
type Stream struct {
	x      Exchange
	up     *Counters
	wr     *wasmhost.Request // nil without plugins
	log    *slog.Logger
	id     []byte // the request's id and model, for events the gateway writes
	model  []byte
	start  time.Time
	ex     *upstream.Exchange
	ctx    context.Context
	cancel context.CancelCauseFunc
	pipe   *wasmhost.Pipeline // nil or without chunk plugins: pass-through

	rd     *sse.Reader
	parser openai.ChunkParser
	chunk  openai.Chunk
	data   []byte
	enc    []byte // re-encoded event JSON
	calls  []byte // the event's tool-call deltas for chunk_tool_calls

	out  []byte // bytes ready for the client
	sent int    // of out, already handed to fasthttp
	held []byte // events a plugin holds, in order
	// heldText counts the text bytes in held.
	heldText int64
	template []byte // the first chunk's data, to synthesize events from

	stripUsage bool // drop the usage-only chunk the client did not ask for
	rec        Recorder
	sawDone    bool
	inputKnown bool // the exchange was told the prompt's token count
	stopped    bool
	finished   bool
	endFlags   uint32
	// broken: sending panicked (WriteTo); the stream and its readers are
	// not reused.
	broken bool
	panics *atomic.Int64

	// usage is the last usage the upstream reported.
	usage openai.Usage

	// A translated upstream's stream: read as OpenAI chunks through tr,
	// borrowed from trPool; or Anthropic's events passed through on the
	// native endpoint (native; see native.go).
	tr      provider.Stream
	trPool  *sync.Pool
	native  bool
	nat     nativeState
	scratch []byte // events the gateway writes itself, before they are placed

	// A Responses API stream (responses.go): the upstream's Responses
	// events, or a translated upstream's stream made into them.
	resp bool
	rs   respState
}

var streamPool = sync.Pool{New: func() any { return &Stream{rd: sse.NewReader(nil, MaxEventBytes)} }}

// Exchange is the request a stream belongs to, as the stream sees it.
type Exchange interface {
	// StreamClosed ends the request once fasthttp closed the body: flags
	// are the end phase's (wasmhost.End*), usage the upstream's last report.
	// The request's upstream exchange is its own to release.
	StreamClosed(flags uint32, usage openai.Usage)
	// InputKnown reports the prompt's token count (every kind of input
	// token) when the upstream tells it before the reply (Anthropic's
	// message_start), once per stream, so the request's budget hold can
	// shrink to it.
	InputKnown(prompt int64)
}

// inputReporter is implemented by translated streams that learn the
// prompt's token count before the reply (anthropic.StreamReader,
// gemini.StreamReader).
type inputReporter interface {
	InputTokens() (int64, bool)
}

// reportInput tells the exchange the prompt's token count once a
// translated stream has it.
func (st *Stream) reportInput() {
	if st.inputKnown || st.tr == nil || st.x == nil {
		return
	}
	if ir, ok := st.tr.(inputReporter); ok {
		if n, ok := ir.InputTokens(); ok {
			st.inputKnown = true
			st.x.InputKnown(n)
		}
	}
}

// Counters are what a stream measures of the upstream's reply for its
// request; they live in the request's own state.
type Counters struct {
	Text   int64         // text bytes the upstream sent
	Events int64         // events with text the upstream sent
	TTFT   time.Duration // until the first event with text; -1: none
}

// Config is what Acquire needs of a request to stream its reply.
type Config struct {
	Exchange Exchange
	Counters *Counters
	// Start is when the request arrived (for Counters.TTFT).
	Start time.Time
	// Request is the plugins' view of the request (nil without plugins),
	// Pipeline the plugins (nil: none).
	Request  *wasmhost.Request
	Pipeline *wasmhost.Pipeline
	Log      *slog.Logger
	// ID and Model are the request's, for events the gateway writes
	// itself; they must stay valid until Close.
	ID, Model []byte
	// Upstream is the reply being streamed, read under Ctx; Cancel ends
	// Ctx (with a cause in cancels) when the stream stops early.
	Upstream *upstream.Exchange
	Ctx      context.Context
	Cancel   context.CancelCauseFunc
	// Native: the client's Messages API, whose Anthropic events pass
	// through (native.go).
	Native bool
	// Translation, when set, holds the provider.Stream readers that turn
	// the upstream's stream into OpenAI chunks (a translated provider's:
	// package provider); ReplyModel is the model name they write.
	Translation *sync.Pool
	ReplyModel  string
	// Responses: the client's Responses API (responses.go), whose events
	// pass through from an upstream that has it; with FromChat the
	// upstream's reply is a chat stream (OpenAI's, or Translation's
	// reading of the provider's), made into Responses events.
	Responses, FromChat bool
	// StripUsage drops the usage-only chunk the client did not ask for.
	StripUsage bool
	// Record, when set, is told every event of an OpenAI chat or
	// completions stream as it arrived (after a provider's translation,
	// before the chunk phase): the response cache keeps a reply to store.
	Record Recorder
	// Panics, when set, counts the streams whose sending panicked.
	Panics *atomic.Int64
}

// Recorder is told a stream's events (Config.Record).
type Recorder interface {
	// RecordEvent is called with each event's data, valid only during the
	// call; ok is false for an event that is not a chunk of a reply (an
	// error event, an unparsable one) and when a plugin replaced an
	// event's text: such a stream is not to be kept.
	RecordEvent(data []byte, ok bool)
}

// Acquire returns a pooled stream of c's reply; fasthttp reads it and
// Closes it, which returns it to the pool.
func Acquire(c Config) *Stream {
	st := streamPool.Get().(*Stream)
	ex := c.Upstream
	st.x, st.up, st.wr, st.log, st.id, st.model, st.start = c.Exchange, c.Counters, c.Request, c.Log, c.ID, c.Model, c.Start
	st.ex, st.ctx, st.cancel, st.stripUsage, st.rec, st.panics = ex, c.Ctx, c.Cancel, c.StripUsage, c.Record, c.Panics
	if c.Pipeline.Wants(c.Request, wasmhost.PhaseChunk) {
		st.pipe = c.Pipeline
	}
	if st.wr != nil {
		// Client headers are readable only until the reply starts.
		st.wr.ClientHeader = nil
		st.wr.Status = ex.StatusCode()
	}
	var src io.Reader = ex
	switch {
	case c.Responses:
		st.resp = true
		st.rs.reset()
		if !c.FromChat {
			break
		}
		var chat io.Reader = ex
		if c.Translation != nil {
			st.trPool = c.Translation
			st.tr = st.trPool.Get().(provider.Stream)
			st.tr.Reset(ex, c.ReplyModel, "", time.Now().Unix(), true)
			chat = st.tr
		}
		if st.rs.tr == nil {
			st.rs.tr = responses.NewStreamReader(MaxEventBytes)
		}
		st.rs.id = append(append(st.rs.id[:0], "resp_"...), c.ID...)
		st.rs.tr.Reset(chat, c.Model, st.rs.id, time.Now().Unix())
		src = st.rs.tr
	case c.Native:
		st.native = true
		st.nat.reset()
	case c.Translation != nil:
		st.trPool = c.Translation
		st.tr = st.trPool.Get().(provider.Stream)
		// Usage is always asked for, as from an OpenAI upstream (see
		// StripUsage); "" keeps the upstream's reply id.
		st.tr.Reset(ex, c.ReplyModel, "", time.Now().Unix(), true)
		src = st.tr
	}
	st.rd.Reset(src)
	return st
}

// Read implements io.Reader for fasthttp's chunked body writer.
func (st *Stream) Read(p []byte) (int, error) {
	if !st.next() {
		return 0, io.EOF
	}
	n := copy(p, st.out[st.sent:])
	st.sent += n
	return n, nil
}

// next makes sure out holds something not yet sent, filling it again once
// all of it was; false at the stream's end.
func (st *Stream) next() bool {
	for st.sent == len(st.out) {
		if st.finished {
			return false
		}
		st.out, st.sent = st.out[:0], 0
		st.fill()
	}
	return true
}

// Prefill processes the events that have already arrived, as the first
// WriteTo would, and reports whether there is something to send. It never
// waits for the upstream: a reply whose first events came with its
// headers can send the headers with them, in one write, and one whose
// events have not come sends its headers at once, alone.
func (st *Stream) Prefill() bool {
	if st.rd.More() {
		st.fill()
	}
	return len(st.out) > 0
}

// SupportsBodyWriteTo implements fasthttp.BodyWriterTo: fasthttp takes the
// reply through WriteTo.
func (st *Stream) SupportsBodyWriteTo() bool { return true }

// WriteTo implements io.WriterTo for fasthttp's chunked body writer, which
// makes each Write one chunk and flushes it: what fill gathered (every
// event that had arrived) goes out as one chunk, whatever its size, where
// Read hands fasthttp at most its 4 KB buffer at a time — a chunk and a
// flush each, and a write of a few bytes when a chunk's framing overflows
// the connection's buffer.
//
// A panic while the stream is sent — a bug, never the client's or the
// upstream's doing — ends this stream alone: WriteTo returns
// ErrPanicked, on which fasthttp closes the connection (the status and
// headers are out; an error event could not be told from the reply), and
// Close runs the request's end as for a client gone mid-stream. fasthttp
// would recover the panic too, but knows nothing of the stream: here it
// is logged with its stack and counted, the upstream is cancelled, and
// nothing the panic may have left half way is reused.
func (st *Stream) WriteTo(w io.Writer) (total int64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = st.panicked(p)
		}
	}()
	for st.next() {
		n, err := w.Write(st.out[st.sent:])
		st.sent += n
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// ErrPanicked is WriteTo's error when sending the stream panicked.
var ErrPanicked = errors.New("sending the stream panicked (a bug: the panic and its stack are logged)")

// panicked handles a panic of WriteTo: it is logged with its stack and
// counted, the upstream's reply is cancelled, and the stream is marked so
// that nothing of it is reused.
func (st *Stream) panicked(p any) error {
	st.broken = true
	if st.panics != nil {
		st.panics.Add(1)
	}
	if st.log != nil {
		st.log.Error("sending a stream panicked; its connection is closed",
			"request_id", string(st.id), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	}
	if st.cancel != nil {
		st.cancel(cancels.ErrClientGone)
	}
	return ErrPanicked
}

// fill reads the next event, waiting if none is buffered, then every event
// that has already arrived (sse.Reader.More: also those still inside the
// upstream's chunk framing), and leaves what is to be sent in out.
func (st *Stream) fill() {
	for {
		raw, err := st.rd.Next()
		if err != nil {
			st.finish(err)
			return
		}
		st.process(raw)
		if up := st.up; up.TTFT < 0 && up.Events > 0 {
			up.TTFT = time.Since(st.start) // the first event with text
		}
		if st.finished || !st.rd.More() {
			return
		}
	}
}

// process decides what one upstream event becomes.
func (st *Stream) process(raw []byte) {
	st.reportInput()
	if st.resp {
		st.processResponses(raw)
		return
	}
	if st.native {
		st.processNative(raw)
		return
	}
	var ok bool
	st.data, ok = sse.AppendData(st.data[:0], raw)
	if !ok {
		st.pass(raw, 0) // comments, retry hints: forwarded in order
		return
	}
	if sse.IsDone(st.data) {
		st.sawDone = true
		if st.pipe != nil && !st.runChunk(raw, nil, wasmhost.ChunkDone) {
			return
		}
		st.flushHeld()
		st.out = append(st.out, raw...)
		return
	}
	if st.parser.Parse(st.data, &st.chunk) != nil || st.chunk.Error {
		if st.rec != nil {
			st.rec.RecordEvent(st.data, false)
		}
		st.pass(raw, 0) // not ours to judge: forwarded as sent
		return
	}
	if st.rec != nil {
		st.rec.RecordEvent(st.data, true)
	}
	c := &st.chunk
	if c.Usage.Present {
		st.usage = c.Usage
	}
	if len(c.Text) > 0 {
		st.up.Text += int64(len(c.Text))
		st.up.Events++
	}
	if len(st.template) == 0 && c.Choices > 0 {
		st.template = append(st.template[:0], st.data...)
	}
	if st.stripUsage && c.IsUsageOnly() {
		return
	}
	if st.pipe == nil {
		st.out = append(st.out, raw...)
		st.countText(int64(len(c.Text)))
		return
	}
	flags := chunkFlags(c)
	if len(c.ToolCalls) == 0 {
		st.runChunk(raw, c.Text, flags)
		return
	}
	st.calls = st.calls[:0]
	for _, tc := range c.ToolCalls {
		st.calls = wasmhost.AppendToolCallDelta(st.calls, tc.Index, tc.Name, tc.Arguments)
	}
	wr := st.wr
	wr.ToolCalls = st.calls
	st.runChunk(raw, c.Text, flags)
	wr.ToolCalls = nil
}

// chunkFlags are the chunk phase's flags for an event parsed into c (an
// OpenAI chunk, or an Anthropic event's view of one).
func chunkFlags(c *openai.Chunk) uint32 {
	var flags uint32
	if len(c.Text) > 0 { // text is set only with HasText
		flags |= wasmhost.ChunkText
	}
	if len(c.ToolCalls) > 0 {
		flags |= wasmhost.ChunkToolCalls
	}
	if c.FinishReason != nil {
		flags |= wasmhost.ChunkFinish
	}
	if c.Usage.Present {
		flags |= wasmhost.ChunkUsage
	}
	if c.Role != nil {
		flags |= wasmhost.ChunkRole
	}
	return flags
}

// runChunk runs the chunk phase for one event and applies its verdict. It
// reports whether the event itself is still to be forwarded by the caller
// (only for DONE, which the caller writes).
func (st *Stream) runChunk(raw, text []byte, flags uint32) bool {
	wr := st.wr
	res, err := st.pipe.Chunk(wr, text, flags)
	if err != nil {
		st.log.Error("plugin failed mid-stream; stream ended (fail_closed)", "err", err)
		st.held, st.heldText = st.held[:0], 0
		st.endWithError(PluginFailed(err, "; the reply was ended."))
		st.cancel(cancels.ErrPluginStopped)
		return false
	}
	done := flags&wasmhost.ChunkDone != 0
	switch res.Verdict {
	case wasmhost.Hold:
		if done { // nothing follows [DONE]: holding it would lose the end
			return true
		}
		st.held = append(st.held, raw...)
		st.heldText += int64(len(text))
		return false
	case wasmhost.Replace:
		if st.rec != nil {
			st.rec.RecordEvent(nil, false) // a reply a guard changed is not kept
		}
		st.flushHeld()
		if done {
			if len(res.Text) > 0 {
				st.synthesize(res.Text, nil)
			}
			return true
		}
		var err error
		st.enc, err = AppendWithText(st.enc[:0], st.data, res.Text, nil, false)
		if err != nil {
			st.pass(raw, int64(len(text)))
			return false
		}
		st.out = appendEvent(st.out, st.enc)
		st.countText(int64(len(res.Text)))
		return false
	case wasmhost.Stop:
		st.held, st.heldText = st.held[:0], 0
		finish := res.FinishReason
		if len(finish) == 0 {
			finish = []byte("content_filter")
		}
		st.synthesize(res.Text, finish)
		st.out = append(st.out, "data: [DONE]\n\n"...)
		st.stopped, st.finished = true, true
		st.endFlags |= wasmhost.EndStopped
		st.cancel(cancels.ErrPluginStopped)
		return false
	}
	if done {
		return true
	}
	st.pass(raw, int64(len(text)))
	return false
}

// pass forwards an event unchanged, behind any held events.
func (st *Stream) pass(raw []byte, text int64) {
	st.flushHeld()
	st.out = append(st.out, raw...)
	st.countText(text)
}

func (st *Stream) flushHeld() {
	if len(st.held) == 0 {
		return
	}
	st.out = append(st.out, st.held...)
	st.countText(st.heldText)
	st.held, st.heldText = st.held[:0], 0
}

func (st *Stream) countText(n int64) {
	if wr := st.wr; wr != nil {
		wr.TextBytesSent += n
	}
}

// synthesize appends a text event the gateway writes itself, shaped like
// the upstream's first chunk.
func (st *Stream) synthesize(text, finish []byte) {
	template := st.template
	if len(template) == 0 {
		template = defaultTemplate
	}
	var err error
	st.enc, err = AppendWithText(st.enc[:0], template, text, finish, true)
	if err != nil {
		return
	}
	st.out = appendEvent(st.out, st.enc)
	st.countText(int64(len(text)))
}

var defaultTemplate = []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":null}]}`)

// finish ends the stream after the upstream's last read. A clean end is
// forwarded as is; a broken one gets a final OpenAI-style error event so the
// client knows the reply is incomplete.
func (st *Stream) finish(err error) {
	if errors.Is(err, io.EOF) {
		st.flushHeld()
		if st.resp {
			st.respFlushHeld()
			st.respFlushDeferred()
		}
		if st.native {
			st.flushDeferred()
		}
		st.finished = true
		st.endFlags |= wasmhost.EndCompleted
		return
	}
	cause := context.Cause(st.ctx)
	if errors.Is(cause, cancels.ErrClientGone) {
		st.finished = true
		st.endFlags |= wasmhost.EndClientGone
		return
	}
	var e *openai.Error
	switch {
	case errors.Is(cause, cancels.ErrCancelled):
		st.endWithError(Cancelled())
		st.endFlags = st.endFlags&^wasmhost.EndUpstreamError | wasmhost.EndCancelled
		return
	case errors.Is(cause, cancels.ErrShuttingDown):
		e = &openai.Error{Status: 503, Type: "server_error", Code: "shutting_down",
			Message: "The gateway is shutting down and ended this stream before the upstream finished."}
	case errors.Is(err, upstream.ErrTimeout):
		e = &openai.Error{Status: 504, Type: "upstream_error", Code: "upstream_timeout",
			Message: "The upstream stopped sending before the reply was complete."}
	case errors.Is(err, sse.ErrEventTooLarge):
		e = &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_bad_response",
			Message: "The upstream sent an event larger than the gateway accepts."}
	default:
		e = &openai.Error{Status: 502, Type: "upstream_error", Code: "upstream_stream_error",
			Message: "The upstream connection broke before the reply was complete."}
	}
	st.log.Warn("stream ended early", "upstream", st.ex.Upstream(), "err", err, "cause", cause)
	st.endWithError(e)
}

// endWithError ends the stream with a final error event. Text held back by
// a plugin is dropped, never flushed unchecked.
func (st *Stream) endWithError(e *openai.Error) {
	switch {
	case st.resp:
		st.rs.held, st.rs.spans, st.rs.htext = st.rs.held[:0], st.rs.spans[:0], st.rs.htext[:0]
		st.out = responses.AppendErrorEvent(st.out, st.rs.next, e)
		st.rs.next++
	case st.native:
		st.out = anthropic.AppendErrorEvent(st.out, e)
	default:
		st.out = append(st.out, "data: "...)
		st.out = e.AppendJSON(st.out)
		st.out = append(st.out, "\n\n"...)
	}
	st.finished = true
	st.endFlags |= wasmhost.EndUpstreamError
}

// Close implements io.Closer; fasthttp calls it once the body is written or
// the client is gone. It hands the request its end (Exchange.StreamClosed:
// its end phase and call log run once the last chunk is flushed, then the
// upstream exchange ends) and returns the stream to the pool.
func (st *Stream) Close() error {
	if !st.finished || st.sent < len(st.out) {
		st.endFlags |= wasmhost.EndClientGone
	}
	st.x.StreamClosed(st.endFlags, st.usage)
	if st.broken {
		// What panicked may have left the stream or its readers half
		// way: none of them goes back to a pool.
		st.tr, st.trPool, st.rs.tr = nil, nil, nil
		*st = Stream{}
		return nil
	}
	st.rd.Reset(nil)
	if st.tr != nil {
		st.tr.Reset(nil, "", "", 0, false)
		st.trPool.Put(st.tr)
		st.tr, st.trPool = nil, nil
	}
	if st.rs.tr != nil {
		st.rs.tr.Reset(nil, nil, nil, 0)
	}
	st.native, st.resp = false, false
	st.x, st.up, st.wr, st.log, st.id, st.model = nil, nil, nil, nil, nil, nil
	st.ex, st.ctx, st.cancel, st.pipe, st.rec = nil, nil, nil, nil, nil
	st.out, st.sent, st.held, st.heldText, st.template = st.out[:0], 0, st.held[:0], 0, st.template[:0]
	st.sawDone, st.stopped, st.finished, st.stripUsage, st.endFlags = false, false, false, false, 0
	st.inputKnown = false
	st.usage = openai.Usage{}
	streamPool.Put(st)
	return nil
}
