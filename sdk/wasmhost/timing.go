package wasmhost

import "time"

// Observer takes one duration. The gateway's obs.Histogram satisfies it.
// It is called on the request path, from many goroutines at once: it must
// be safe for concurrent use and should neither block nor allocate. (A
// duration rather than float seconds: the conversion would be a float
// division per callback.)
type Observer interface{ ObserveDuration(time.Duration) }

// Counter counts events. A prometheus.Counter satisfies it; the same rules
// as for Observer apply.
type Counter interface{ Inc() }

// Instruments are what a pipeline reports about one of its plugins. Nil
// fields are not reported; the zero value reports nothing.
type Instruments struct {
	// Request, ResponseHeaders, Chunk and End observe the duration of each
	// callback of that phase: from asking the pool for an
	// instance to the guest's return, so a wait for a free instance
	// counts. Callbacks a plugin opted out of (skip_phases) are not
	// observed. An on_call_response is a callback of the phase that
	// dispatched the call; the wait for dispatched calls is in none.
	Request, ResponseHeaders, Chunk, End Observer
	// Rejections counts the callbacks that answered REJECT.
	Rejections Counter
	// Answers counts the requests the plugin answered (RESPOND).
	Answers Counter
}

func (in *Instruments) observer(ph Phase) Observer {
	switch ph {
	case PhaseRequest:
		return in.Request
	case PhaseResponseHeaders:
		return in.ResponseHeaders
	case PhaseChunk:
		return in.Chunk
	case PhaseEnd:
		return in.End
	}
	return nil
}

// CallTracer is told about each plugin callback of one request, after it
// returned (and, if it is a DispatchTracer too, about each dispatched
// call). The gateway sets Request.Tracer only on requests it traces; a
// nil Tracer costs one comparison per callback.
type CallTracer interface {
	// PluginCall reports one callback of the plugin in slot (its index in
	// the pipeline) named plugin: when it started, how long it took, and
	// its verdict, or err when the callback failed (the verdict is then
	// meaningless).
	PluginCall(plugin string, slot int, ph Phase, start time.Time, d time.Duration, v Verdict, err error)
}

// clockBase anchors the monotonic clock readings of callback timing:
// time.Since on a time with a monotonic reading reads only the monotonic
// clock, about half the cost of time.Now, which also reads the wall clock.
var clockBase = time.Now()

// timedCall runs export on p for r and reports it to the plugin's
// instruments and r's tracer.
//
// Clock readings are the cost of timing (tens of nanoseconds each on a
// virtual machine's clock source), so the callbacks of one phase share
// them: the end of one timed callback is the start of the next (r.clock),
// and k timed callbacks in a row read the clock k+1 times, not 2k. What
// the loop does between two callbacks (a verdict's bookkeeping) is
// counted in the second.
func (pl *Pipeline) timedCall(p *Plugin, r *Request, ph Phase, export string) error {
	obs := pl.instruments[p.spec.Slot].observer(ph)
	if obs == nil && r.Tracer == nil {
		r.clock = 0
		return p.call(r, ph, export, r.stack[:])
	}
	t0 := r.clock
	if t0 == 0 {
		t0 = time.Since(clockBase)
	}
	err := p.call(r, ph, export, r.stack[:])
	r.clock = report(p, r, ph, obs, t0, err)
	return err
}

// report hands a callback that started at t0 (since clockBase) to obs and
// r's tracer, and returns when it ended; 0 after a failure, whose handling
// (a log line) is not to be counted in the next callback.
func report(p *Plugin, r *Request, ph Phase, obs Observer, t0 time.Duration, err error) time.Duration {
	end := time.Since(clockBase)
	d := end - t0
	if obs != nil {
		obs.ObserveDuration(d)
	}
	if r.Tracer != nil {
		// The span is placed by the wall clock read now, less the
		// callback's monotonic duration, not at clockBase.Add(t0): that
		// carries clockBase's wall reading, which goes stale when the wall
		// clock is stepped (NTP, a suspended and resumed VM), and the
		// plugin's spans would land outside their request's (seen: 41 s
		// before the root span). One wall-clock read per traced callback.
		r.Tracer.PluginCall(p.spec.Name, p.spec.Slot, ph, time.Now().Add(-d), d, Verdict(r.stack[0]), err)
	}
	if err != nil {
		return 0
	}
	return end
}

// Instrument sets the instruments of the plugin named name (no-op when the
// pipeline has none of that name). Call it before the pipeline serves
// requests: instruments are read without synchronization.
func (pl *Pipeline) Instrument(name string, in Instruments) {
	if pl == nil {
		return
	}
	for i, p := range pl.plugins {
		if p.spec.Name == name {
			pl.instruments[i] = in
		}
	}
}
