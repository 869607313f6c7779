package wasmhost

// Deferred calls (sdk/ABI.md, "Deferred calls"; docs/adr/0018): in the
// request phase a plugin may answer DEFER instead of PAUSE. Its queued
// calls are set aside and the next plugins' on_request run; when the
// phase must wait (a later plugin answers PAUSE, or every plugin has run),
// all the calls set aside, with the pausing plugin's, start as one batch
// (BatchDispatcher), and the responses are handed out in policy order.
// The services can then serve a request's counters in one round trip
// (the rate limiter's admission and the budget's hold in one script).

// deferredCalls are the request phase's calls set aside by DEFER and not
// yet handed to their plugins.
type deferredCalls struct {
	calls   []*Call    // in policy order, then dispatch order
	plugins []deferral // in policy order
}

// deferral is one plugin's part of deferredCalls.
type deferral struct {
	p        *Plugin
	from, to int // its calls are calls[from:to]
}

// add sets aside the calls q's callback (p's) queued.
func (d *deferredCalls) add(p *Plugin, q *callQueue) {
	from := len(d.calls)
	d.calls = append(d.calls, q.queued...)
	q.dropQueued()
	d.plugins = append(d.plugins, deferral{p: p, from: from, to: len(d.calls)})
}

// abandon cancels the calls of the plugins from the i-th on, if they were
// started (those not started are never started), and empties d.
func (d *deferredCalls) abandon(i int) {
	if i < len(d.plugins) {
		for _, c := range d.calls[d.plugins[i].from:] {
			if c != nil && c.cancel != nil {
				c.cancel()
			}
		}
	}
	clear(d.calls)
	d.calls = d.calls[:0]
	clear(d.plugins)
	d.plugins = d.plugins[:0]
}

// request1 runs p's on_request. A DEFER with calls queued sets them aside;
// a PAUSE while calls are set aside adds its calls to them and serves
// them all. Anything else is served as in the other gate phase.
func (pl *Pipeline) request1(p *Plugin, r *Request) error {
	err := pl.timedCall(p, r, PhaseRequest, "on_request")
	if err == nil && len(r.calls.queued) > 0 && p.callResponse {
		d := &r.calls.deferred
		switch Verdict(r.stack[0]) {
		case Defer:
			d.add(p, &r.calls)
			return nil
		case Pause:
			if len(d.plugins) > 0 {
				d.add(p, &r.calls)
				return pl.serveDeferred(r)
			}
		}
	}
	return pl.decide(p, r, PhaseRequest, pl.serve(p, r, PhaseRequest, 0, err, 0))
}

// serveDeferred starts the calls set aside, as one batch, and hands their
// responses to each plugin in policy order, each plugin's verdict decided
// as on_request's. The first that ends the phase (REJECT, a failure under
// fail_closed) cancels the calls of the plugins after it: their responses
// are never delivered.
func (pl *Pipeline) serveDeferred(r *Request) error {
	d := &r.calls.deferred
	if len(d.plugins) == 0 {
		return nil
	}
	r.startBatch(d.calls)
	q := &r.calls
	for i, e := range d.plugins {
		q.waiting = append(q.waiting, d.calls[e.from:e.to]...)
		clear(d.calls[e.from:e.to])
		r.stack[0] = uint64(Pause)
		// The batch was the callback's first round of calls.
		err := pl.decide(e.p, r, PhaseRequest, pl.serve(e.p, r, PhaseRequest, 0, nil, 1))
		if err != nil {
			d.abandon(i + 1)
			return err
		}
	}
	d.abandon(len(d.plugins))
	return nil
}

// startBatch starts calls at once: in one StartBatch if the services are
// a BatchDispatcher, else each as a call of its own.
func (r *Request) startBatch(calls []*Call) {
	for _, c := range calls {
		r.prepareCall(c)
	}
	if b, ok := r.Services.(BatchDispatcher); ok {
		// The batch gets a slice of its own, which it may keep: calls
		// is reused.
		b.StartBatch(r, append([]*Call(nil), calls...))
		return
	}
	for _, c := range calls {
		r.startCall(c)
	}
}
