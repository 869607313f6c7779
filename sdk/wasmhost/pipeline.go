package wasmhost

import (
	"context"
	"errors"
	"fmt"
)

// Pipeline is the ordered plugins of one policy. Each phase runs the
// plugins that take part in it, in policy order. A Pipeline is immutable;
// a reload builds a new one.
type Pipeline struct {
	plugins                           []*Plugin
	request, respHeaders, chunk, ends []*Plugin
	// instruments are per plugin, by slot (see Instrument).
	instruments []Instruments
	// all is the chain of a request the gateway set none for; vars the
	// plugins' other configs (chain.go).
	all  *Chain
	vars *variants
}

// RejectError is a plugin's REJECT: the error the client gets.
type RejectError struct {
	Plugin              string
	Status              int
	Type, Code, Message string
}

func (e *RejectError) Error() string {
	return fmt.Sprintf("rejected by plugin %q: %d %s", e.Plugin, e.Status, e.Message)
}

// FailureError is a plugin failure under fail_closed.
type FailureError struct {
	Plugin string
	Phase  Phase
	Err    error
}

func (e *FailureError) Error() string {
	return fmt.Sprintf("plugin %q failed in phase %s: %v", e.Plugin, e.Phase, e.Err)
}

func (e *FailureError) Unwrap() error { return e.Err }

// NewPipeline loads specs in order. On error, plugins already loaded are
// closed and the error names the failing plugin.
func NewPipeline(ctx context.Context, h *Host, specs []Spec) (*Pipeline, error) {
	if len(specs) > MaxPlugins {
		return nil, fmt.Errorf("%d plugins: at most %d are supported", len(specs), MaxPlugins)
	}
	pl := &Pipeline{}
	for i, s := range specs {
		s.Slot = i
		p, err := h.Load(ctx, s)
		if err != nil {
			pl.Close()
			return nil, err
		}
		pl.plugins = append(pl.plugins, p)
		if p.phases&PhaseRequest != 0 {
			pl.request = append(pl.request, p)
		}
		if p.phases&PhaseResponseHeaders != 0 {
			pl.respHeaders = append(pl.respHeaders, p)
		}
		if p.phases&PhaseChunk != 0 {
			pl.chunk = append(pl.chunk, p)
		}
		if p.phases&PhaseEnd != 0 {
			pl.ends = append(pl.ends, p)
		}
	}
	pl.instruments = make([]Instruments, len(pl.plugins))
	pl.initChains(h, specs)
	return pl, nil
}

// Close closes every plugin.
func (pl *Pipeline) Close() {
	if pl == nil {
		return
	}
	pl.closeVariants()
	for _, p := range pl.plugins {
		p.Close()
	}
}

// Plugins returns the plugins in policy order.
func (pl *Pipeline) Plugins() []*Plugin {
	if pl == nil {
		return nil
	}
	return pl.plugins
}

// Has reports whether any plugin takes part in phase ph.
func (pl *Pipeline) Has(ph Phase) bool {
	if pl == nil {
		return false
	}
	switch ph {
	case PhaseRequest:
		return len(pl.request) > 0
	case PhaseResponseHeaders:
		return len(pl.respHeaders) > 0
	case PhaseChunk:
		return len(pl.chunk) > 0
	case PhaseEnd:
		return len(pl.ends) > 0
	}
	return false
}

// Wants reports whether any plugin still takes part in phase ph for r:
// one that has the phase, is in r's chain and did not opt out of it with
// skip_phases.
func (pl *Pipeline) Wants(r *Request, ph Phase) bool {
	if pl == nil || r == nil {
		return false
	}
	var ps []*Plugin
	switch ph {
	case PhaseRequest:
		ps = pl.request
	case PhaseResponseHeaders:
		ps = pl.respHeaders
	case PhaseChunk:
		ps = pl.chunk
	case PhaseEnd:
		ps = pl.ends
	}
	for _, p := range ps {
		if !r.skipped(p.spec.Slot, ph) && pl.chosen(r, p) != nil {
			return true
		}
	}
	return false
}

// Request runs the request phase: nil to forward, a *RejectError or a
// *FailureError to answer the client instead, or an *Answered when a
// plugin answered the request itself (r.Answer). A plugin answering DEFER
// lets the next ones run before its calls are answered (defer.go).
func (pl *Pipeline) Request(r *Request) error {
	r.clock = 0
	for _, p := range pl.request {
		if p = pl.pick(r, p); p == nil {
			continue
		}
		r.stack[0] = uint64(r.id)
		if err := pl.request1(p, r); err != nil {
			// Calls deferred and not started are never started.
			r.calls.deferred.abandon(0)
			return err
		}
	}
	return pl.serveDeferred(r)
}

// ResponseHeaders runs the response_headers phase for the upstream status.
func (pl *Pipeline) ResponseHeaders(r *Request, status int) error {
	r.clock = 0
	for _, p := range pl.respHeaders {
		if p = pl.pick(r, p); p == nil || r.skipped(p.spec.Slot, PhaseResponseHeaders) {
			continue
		}
		r.stack[0], r.stack[1] = uint64(r.id), uint64(uint32(status))
		if err := pl.gate(p, r, PhaseResponseHeaders, "on_response_headers"); err != nil {
			return err
		}
	}
	return nil
}

// gate runs a phase whose verdicts are CONTINUE or REJECT.
func (pl *Pipeline) gate(p *Plugin, r *Request, ph Phase, export string) error {
	return pl.decide(p, r, ph, pl.callback(p, r, ph, export, 0))
}

// decide turns a gate callback's outcome (err, else the verdict in
// r.stack[0]) into the phase's: nil to go on, a *RejectError, or a
// *FailureError unless the plugin fails open.
func (pl *Pipeline) decide(p *Plugin, r *Request, ph Phase, err error) error {
	if err == nil {
		switch v := Verdict(r.stack[0]); v {
		case Continue:
			if r.Answer.Status != 0 && r.Answer.Source == p.spec.Name {
				r.Answer.Reset() // set, then not used: no later RESPOND serves it
			}
			return nil
		case Reject:
			if c := pl.instruments[p.spec.Slot].Rejections; c != nil {
				c.Inc()
			}
			return rejection(p, r)
		case Respond:
			err = pl.answered(p, r, ph)
			if _, ok := err.(*Answered); ok {
				return err
			}
		default:
			err = fmt.Errorf("%w: %s: verdict %d (%s) is not allowed in phase %s", ErrPluginFailed, p.spec.Name, uint32(r.stack[0]), v, ph)
		}
	}
	if p.spec.OnError == FailOpen {
		p.log.Warn("plugin failed; continuing (fail_open)", "phase", ph.String(), "err", err)
		r.clock = 0 // the log line is not the next plugin's time
		return nil
	}
	return &FailureError{Plugin: p.spec.Name, Phase: ph, Err: err}
}

func rejection(p *Plugin, r *Request) *RejectError {
	e := &RejectError{Plugin: p.spec.Name, Status: r.RejectStatus, Type: string(r.RejectType),
		Code: string(r.RejectCode), Message: string(r.RejectMessage)}
	if e.Status == 0 {
		e.Status = 403
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("The request was rejected by policy %q.", p.spec.Name)
	}
	return e
}

// ChunkResult is what the chunk phase decided for one event.
type ChunkResult struct {
	// Verdict is Continue, Hold, Release, Replace or Stop.
	Verdict Verdict
	// Text is the event's new text (Replace) or the final text (Stop).
	// Valid until the next chunk call on the same Request.
	Text []byte
	// FinishReason for Stop; empty means content_filter.
	FinishReason []byte
	// Plugin names the plugin that stopped the stream.
	Plugin string
}

// Chunk runs the chunk phase for one event whose text delta is text. Plugins
// run in order and each sees the text as the previous one left it. A STOP
// ends the chain. A failure under fail_closed returns a *FailureError.
func (pl *Pipeline) Chunk(r *Request, text []byte, flags uint32) (ChunkResult, error) {
	r.chunkText = append(r.chunkText[:0], text...)
	replaced, hold, release := false, false, false
	r.clock = 0
	for _, p := range pl.chunk {
		if p = pl.pick(r, p); p == nil || r.skipped(p.spec.Slot, PhaseChunk) {
			continue
		}
		r.emitted = r.emitted[:0]
		r.stack[0], r.stack[1], r.stack[2] = uint64(r.id), uint64(len(r.chunkText)), uint64(flags)
		err := pl.callback(p, r, PhaseChunk, "on_chunk", flags)
		if err == nil {
			switch v := Verdict(r.stack[0]); v {
			case Continue:
				continue
			case Hold:
				hold = true
				continue
			case Release:
				release = true
				continue
			case Replace:
				replaced = true
				r.chunkText = append(r.chunkText[:0], r.emitted...)
				continue
			case Stop:
				return ChunkResult{Verdict: Stop, Text: r.emitted, FinishReason: r.finishReason, Plugin: p.spec.Name}, nil
			default:
				err = fmt.Errorf("%w: %s: verdict %d (%s) is not allowed in phase chunk", ErrPluginFailed, p.spec.Name, uint32(r.stack[0]), v)
			}
		}
		if p.spec.OnError == FailOpen {
			p.log.Warn("plugin failed; continuing (fail_open)", "phase", "chunk", "err", err)
			r.clock = 0 // the log line is not the next plugin's time
			continue
		}
		return ChunkResult{}, &FailureError{Plugin: p.spec.Name, Phase: PhaseChunk, Err: err}
	}
	switch {
	case replaced:
		return ChunkResult{Verdict: Replace, Text: r.chunkText}, nil
	case hold && !release:
		return ChunkResult{Verdict: Hold}, nil
	case release:
		return ChunkResult{Verdict: Release}, nil
	}
	return ChunkResult{Verdict: Continue}, nil
}

// End runs the end phase. Failures are logged and counted, never returned:
// the reply is over.
func (pl *Pipeline) End(r *Request, flags uint32) {
	r.clock = 0
	for _, p := range pl.ends {
		if p = pl.pick(r, p); p == nil || r.skipped(p.spec.Slot, PhaseEnd) {
			continue
		}
		r.stack[0], r.stack[1] = uint64(r.id), uint64(flags)
		if err := pl.callback(p, r, PhaseEnd, "on_end", flags); err != nil && !errors.Is(err, ErrPluginFailed) {
			p.log.Warn("plugin end phase failed", "err", err)
		}
	}
}
