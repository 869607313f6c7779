package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// loaded is one load of the module under test: a pipeline of it alone,
// and the recorder watching its instances.
type loaded struct {
	pipe   *wasmhost.Pipeline
	plugin *wasmhost.Plugin
	rec    *recorder
}

// Each load has a Host of its own: runtimes that share a Host share its
// compilation cache's engine, which keeps one compiled module, with the
// listeners of the load that compiled it, for all of them.
func (c *checker) load(instances int, config []byte) (*loaded, error) {
	host, err := wasmhost.NewHost(c.opts.CacheDir, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	rec := &recorder{}
	spec := wasmhost.Spec{Name: "plugin", Module: c.module, Config: config,
		Deadline: c.opts.Deadline, MemoryBytes: c.opts.MemoryBytes, Instances: instances}
	pipe, err := wasmhost.NewPipeline(rec.with(context.Background()), host, []wasmhost.Spec{spec})
	// The host's functions are defined before the module is compiled, so
	// they are known even when it failed.
	c.noteHost(rec)
	if err != nil {
		host.Close()
		return nil, err
	}
	l := &loaded{pipe: pipe, plugin: pipe.Plugins()[0], rec: rec}
	c.closers = append(c.closers, func() { pipe.Close(); host.Close() })
	return l, nil
}

func (c *checker) noteHost(rec *recorder) {
	if c.hostFns == nil {
		c.hostFns = rec.hostFunctions()
	}
}

// services answers the host calls of the repository's plugins as a
// permissive gateway would (a valid key, no limits, no budget), so that a
// plugin that calls them lets the battery through to its later phases.
type services struct{}

func (services) Call(r *wasmhost.Request, name string, _ []byte) ([]byte, error) {
	switch name {
	case "tenant.resolve":
		r.Tenant = &wasmhost.Tenant{ID: "t_conformance", KeyID: "k_conformance", Plan: "conformance", Status: "active",
			RPM: -1, TPM: -1, BudgetMicros: -1, MaxTokens: -1, PlanRPM: -1, PlanTPM: -1, KeyRPM: -1, KeyTPM: -1}
		return []byte("ok\n"), nil
	case "ratelimit.admit":
		return []byte("unlimited"), nil
	case "budget.reserve", "budget.extend":
		return []byte("unlimited"), nil
	}
	return nil, wasmhost.ErrNoService
}

// Check implements wasmhost.Dispatcher: every service Call serves, and
// `http` to any URL, may be dispatched.
func (s services) Check(r *wasmhost.Request, _, name string, _ []byte) error {
	switch name {
	case "http", "tenant.resolve", "ratelimit.admit", "budget.reserve", "budget.extend":
		return nil
	}
	return wasmhost.ErrNoService
}

// Start implements wasmhost.Dispatcher: an `http` call gets a 200 with
// the body {} (a module must cope with an answer it does not expect:
// FAIL, not a trap), a host service its Call result.
func (s services) Start(r *wasmhost.Request, c *wasmhost.Call) {
	if c.Service == "http" {
		c.Finish(wasmhost.CallResult{Status: 200, Body: []byte("{}"),
			Header: []wasmhost.Header{{Name: []byte("Content-Type"), Value: []byte("application/json")}}})
		return
	}
	res, err := s.Call(r, c.Service, c.Request)
	if err != nil {
		c.Finish(wasmhost.CallResult{Status: wasmhost.StatusUnavailable})
		return
	}
	c.Finish(wasmhost.CallResult{Body: res})
}

// newRequest is the host's view of p, as the gateway fills it.
func newRequest(p probe) *wasmhost.Request {
	r := wasmhost.AcquireRequest()
	// The model, stream, max_tokens and counts as the gateway reads them
	// from the body; a probe's stream and message count where it has no
	// such body.
	if f, ok := wasmhost.ReadRequestFacts([]byte(p.body), p.endpoint); ok {
		r.SetFacts(f)
	}
	if len(r.Model) == 0 {
		r.Model = []byte("conformance-model")
	}
	r.Stream = r.Stream || p.stream
	r.Messages = max(r.Messages, p.messages)
	r.Endpoint, r.Body = []byte(p.endpoint), []byte(p.body)
	r.RequestID = []byte(fmt.Sprintf("req_conformance_%d", r.ID()))
	r.Upstream = []byte("conformance-upstream")
	// Headers given by a case come first: the first match wins.
	var h wasmhost.Headers
	for k, v := range p.headers {
		h = append(h, wasmhost.Header{Name: []byte(k), Value: []byte(v)})
	}
	for _, kv := range [][2]string{
		{"Content-Type", "application/json"},
		{"Authorization", "Bearer tg-conformance-key"},
		{"X-Request-Id", string(r.RequestID)},
	} {
		h = append(h, wasmhost.Header{Name: []byte(kv[0]), Value: []byte(kv[1])})
	}
	r.ClientHeader = h
	r.Services = services{}
	return r
}

// answered sets the upstream's response headers, as the gateway does
// before the response_headers phase.
func answered(r *wasmhost.Request) {
	ct := "application/json"
	if r.Stream {
		ct = "text/event-stream"
	}
	r.UpstreamHeader = wasmhost.Headers{
		{Name: []byte("Content-Type"), Value: []byte(ct)},
		{Name: []byte("X-Ratelimit-Remaining-Requests"), Value: []byte("99")},
	}
}

// outcome is what one callback, request or stream came to, in a form
// compared across runs.
type outcome struct {
	trace   strings.Builder // verdicts and texts, in order
	text    strings.Builder // the text the client received
	stopped bool
	finish  string
	err     error
}

func (o *outcome) String() string {
	s := fmt.Sprintf("%s text=%q finish=%s", o.trace.String(), o.text.String(), o.finish)
	if o.err != nil {
		s += " error: " + o.err.Error()
	}
	return s
}

// failure classifies a pipeline error: a deadline overrun (stopped by the
// watchdog), or another plugin failure (trap, bad verdict). wasmhost says
// "callback ran past its D deadline and was stopped" for the first and
// has no error type for it; TestBadGuestsFailTheirCheck/spin fails if the
// words change.
func failure(err error) (deadline bool) {
	return err != nil && strings.Contains(err.Error(), "past its") && strings.Contains(err.Error(), "deadline")
}

// failVerdict reports a callback the plugin itself failed (FAIL): a
// verdict every phase allows, which leaves the outcome to the policy's
// on_error.
func failVerdict(err error) bool { return errors.Is(err, wasmhost.ErrFailVerdict) }

// streamRun runs one stream of the battery, event by event, applying the
// verdicts as the gateway's stream does (HOLD queues events; CONTINUE,
// RELEASE and REPLACE send the held ones first; STOP drops them and ends
// the reply). The request phase runs first, and a rejected request gets no
// reply, as in the gateway.
type streamRun struct {
	s    stream
	req  probe
	r    *wasmhost.Request
	next int // the next event; len(events) is DONE
	held []string
	out  outcome
	over bool
	// rejected is the request phase's REJECT, if it said so
	rejected *wasmhost.RejectError
	// chunk callbacks: their number, times and the longest
	chunks  int
	times   []time.Duration
	slowest time.Duration
	// on_end failures (end results are not returned, only counted)
	endFailures int
	endOverran  bool
}

func newStreamRun(s stream, req probe) *streamRun {
	if !s.whole {
		req.stream = true
	}
	return &streamRun{s: s, req: req}
}

// step runs the next callback on pl; it reports false when the stream is
// over (the end phase has run).
func (sr *streamRun) step(pl *wasmhost.Pipeline) bool {
	if sr.over {
		return false
	}
	if sr.r == nil {
		sr.r = newRequest(sr.req)
		if err := pl.Request(sr.r); err != nil {
			var rej *wasmhost.RejectError
			if errors.As(err, &rej) {
				sr.rejected = rej
				fmt.Fprintf(&sr.out.trace, "request rejected %d %s;", rej.Status, rej.Code)
			} else {
				sr.out.err = err
			}
			sr.finish(pl, wasmhost.EndRejected)
			return false
		}
		answered(sr.r)
		if err := pl.ResponseHeaders(sr.r, 200); err != nil {
			sr.out.err = err
			sr.finish(pl, wasmhost.EndRejected)
			return false
		}
		return true
	}
	if sr.s.whole {
		ev := sr.s.events[0]
		flags := wasmhost.ChunkWhole | ev.flags
		if ev.text != "" {
			flags |= wasmhost.ChunkText
		}
		sr.chunk(pl, ev, flags)
		if !sr.over {
			sr.finish(pl, wasmhost.EndCompleted)
		}
		return false
	}
	if sr.next < len(sr.s.events) {
		ev := sr.s.events[sr.next]
		flags := ev.flags
		if ev.text != "" {
			flags |= wasmhost.ChunkText
		}
		if sr.next == 0 {
			flags |= wasmhost.ChunkRole
		}
		sr.next++
		sr.chunk(pl, ev, flags)
		return !sr.over
	}
	sr.chunk(pl, event{}, wasmhost.ChunkDone)
	if !sr.over {
		sr.finish(pl, wasmhost.EndCompleted)
	}
	return false
}

func (sr *streamRun) chunk(pl *wasmhost.Pipeline, ev event, flags uint32) {
	r := sr.r
	r.ToolCalls = ev.toolCalls
	if ev.usage {
		r.PromptTokensUsed, r.CompletionTokensUsed, r.UsageReported = 12, 7, true
	}
	start := time.Now()
	res, err := pl.Chunk(r, []byte(ev.text), flags)
	d := time.Since(start)
	sr.times = append(sr.times, d)
	sr.slowest = max(sr.slowest, d)
	sr.chunks++
	r.ToolCalls = nil
	o := &sr.out
	if err != nil {
		o.err = err
		sr.finish(pl, wasmhost.EndUpstreamError)
		return
	}
	fmt.Fprintf(&o.trace, "%s", res.Verdict)
	switch res.Verdict {
	case wasmhost.Hold:
		if flags&(wasmhost.ChunkDone|wasmhost.ChunkWhole) == 0 {
			sr.held = append(sr.held, ev.text)
			break
		}
		sr.flush(ev.text)
	case wasmhost.Replace:
		sr.flush(string(res.Text))
		fmt.Fprintf(&o.trace, "(%q)", res.Text)
	case wasmhost.Stop:
		sr.held = sr.held[:0]
		o.text.Write(res.Text)
		o.stopped, o.finish = true, string(res.FinishReason)
		if o.finish == "" {
			o.finish = "content_filter"
		}
		fmt.Fprintf(&o.trace, "(%q %s)", res.Text, o.finish)
		sr.finish(pl, wasmhost.EndStopped|wasmhost.EndCompleted)
		return
	default:
		sr.flush(ev.text)
	}
	o.trace.WriteByte(';')
}

func (sr *streamRun) flush(text string) {
	for _, h := range sr.held {
		sr.out.text.WriteString(h)
	}
	sr.held = sr.held[:0]
	sr.out.text.WriteString(text)
}

// finish runs the end phase and releases the request.
func (sr *streamRun) finish(pl *wasmhost.Pipeline, flags uint32) {
	if sr.r == nil || sr.over {
		return
	}
	sr.over = true
	sr.r.TextBytesSent = int64(sr.out.text.Len())
	sr.r.Status = 200
	stats := pl.Plugins()[0].Stats()
	traps, timeouts := stats.Traps.Load(), stats.Timeouts.Load()
	pl.End(sr.r, flags)
	if stats.Timeouts.Load() != timeouts {
		sr.endOverran = true
	} else if stats.Traps.Load() != traps {
		sr.endFailures++
	}
	if !sr.out.stopped && sr.out.err == nil {
		sr.out.finish = "stop"
	}
	wasmhost.ReleaseRequest(sr.r)
	sr.r = nil
}
