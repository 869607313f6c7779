package wasmhost

import (
	"errors"
	"fmt"
	"time"
)

// ErrFailVerdict is in the error of a callback whose plugin answered FAIL
// (with ErrPluginFailed): the plugin's own verdict, not a trap or a
// deadline.
var ErrFailVerdict = errors.New("the plugin answered FAIL")

// callback runs the phase callback export of p for r and, while the guest
// answers PAUSE, the calls it dispatched and on_call_response for each
// response: the final verdict is left in r.stack[0]. flags are the
// dispatching callback's chunk or end flags (0 in other phases). A FAIL is
// returned as a plugin failure, so the plugin's on_error applies.
//
// Between guest calls no instance is checked out: the wait for the calls
// holds none of the pool, and is not counted against the deadline, which
// bounds each guest call alone (docs/adr/0016).
func (pl *Pipeline) callback(p *Plugin, r *Request, ph Phase, export string, flags uint32) error {
	return pl.serve(p, r, ph, flags, pl.timedCall(p, r, ph, export), 0)
}

// serve finishes a callback whose guest call returned err with the
// verdict in r.stack[0]: a PAUSE waits on its calls (rounds of them
// already started, see suspend), and a verdict other than PAUSE abandons
// the calls left. A DEFER that reaches it is a failure: the request phase
// takes a DEFER with calls to defer before (Pipeline.request).
func (pl *Pipeline) serve(p *Plugin, r *Request, ph Phase, flags uint32, err error, rounds int) error {
	if err != nil {
		r.calls.abandon()
		return err // the instance was discarded, and that logged
	}
	switch Verdict(r.stack[0]) {
	case Defer:
		err = deferFailure(p, r, ph)
	case Pause:
		err = pl.suspend(p, r, ph, flags, rounds)
	}
	if r.calls.outstanding() > 0 {
		// A verdict other than PAUSE abandons the calls: those queued
		// are never started, those started are cancelled.
		r.calls.abandon()
	}
	if err == nil && Verdict(r.stack[0]) == Fail {
		err = fmt.Errorf("%w: %s: %w in phase %s", ErrPluginFailed, p.spec.Name, ErrFailVerdict, ph)
	}
	if err != nil && ph == PhaseEnd {
		p.log.Warn("plugin failed", "phase", ph.String(), "err", err)
	}
	return err
}

// deferFailure is the failure of a DEFER the host cannot serve.
func deferFailure(p *Plugin, r *Request, ph Phase) error {
	switch {
	case ph != PhaseRequest:
		return fmt.Errorf("%w: %s: verdict %d (%s) is not allowed in phase %s", ErrPluginFailed, p.spec.Name, uint32(Defer), Defer, ph)
	case len(r.calls.queued) == 0:
		return fmt.Errorf("%w: %s: DEFER with no dispatched call outstanding in phase %s", ErrPluginFailed, p.spec.Name, ph)
	default:
		return fmt.Errorf("%w: %s: DEFER, but the plugin does not export on_call_response", ErrPluginFailed, p.spec.Name)
	}
}

// suspend serves a callback that answered PAUSE: it starts the calls the
// guest queued, waits for each response in dispatch order and hands it to
// on_call_response, until a verdict other than PAUSE, a failure, or no
// call left to wait on (a failure, except in end, whose verdicts are
// ignored). Each PAUSE that queued new calls starts a round; at most
// maxPauseRounds per callback, rounds of them already started (a request
// phase's deferred calls, started in a batch: Pipeline.serveDeferred).
//
// In the request phase, a DEFER from on_call_response waits as PAUSE: its
// calls start alone, now.
func (pl *Pipeline) suspend(p *Plugin, r *Request, ph Phase, flags uint32, rounds int) error {
	q := &r.calls
	for Verdict(r.stack[0]) == Pause {
		if len(q.queued) > 0 {
			if rounds++; rounds > maxPauseRounds {
				return fmt.Errorf("%w: %s: more than %d rounds of dispatched calls in one callback", ErrPluginFailed, p.spec.Name, maxPauseRounds)
			}
			r.startCalls()
		}
		if len(q.waiting) == 0 {
			if ph == PhaseEnd {
				return nil // end's verdicts are ignored: PAUSE only waits
			}
			return fmt.Errorf("%w: %s: PAUSE with no dispatched call outstanding in phase %s", ErrPluginFailed, p.spec.Name, ph)
		}
		if !p.callResponse {
			return fmt.Errorf("%w: %s: PAUSE, but the plugin does not export on_call_response", ErrPluginFailed, p.spec.Name)
		}
		c := r.awaitNext()
		if t, ok := r.Tracer.(DispatchTracer); ok {
			t.DispatchedCall(p.spec.Name, p.spec.Slot, ph, c.Service, c.start, time.Since(c.start), q.result)
		}
		if c.expectedAnswer(&q.result) {
			// As if on_call_response answered PAUSE while calls remain,
			// CONTINUE after the last (expect_response).
			q.current, q.result = nil, CallResult{}
			r.stack[0] = uint64(Continue)
			if len(q.waiting) > 0 {
				r.stack[0] = uint64(Pause)
			}
			continue
		}
		body := 0
		if q.result.Status >= 0 {
			body = len(q.result.Body)
		}
		r.stack = [6]uint64{uint64(r.id), uint64(uint32(c.id)), uint64(uint32(int32(q.result.Status))),
			uint64(body), uint64(ph), uint64(flags)}
		r.clock = 0 // the wait is not the guest's time
		err := pl.timedCall(p, r, ph, "on_call_response")
		q.current, q.result = nil, CallResult{}
		if err != nil {
			return err
		}
		if Verdict(r.stack[0]) == Defer {
			if ph != PhaseRequest {
				return deferFailure(p, r, ph)
			}
			r.stack[0] = uint64(Pause) // on_call_response may not defer again
		}
	}
	return nil
}
