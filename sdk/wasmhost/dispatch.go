package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Dispatched calls (sdk/ABI.md, "Dispatched calls"): a guest queues calls
// with the dispatch import and answers PAUSE; the host starts them once the
// guest returned, waits with no instance checked out, and hands each
// response to on_call_response on a freshly checked out instance. A network
// wait then holds no instance of the pool (docs/adr/0016).

// ErrNotAllowed is returned by Dispatcher.Check for a call the plugin may
// not make (no grant, a URL outside it); dispatch then returns NOT_ALLOWED.
var ErrNotAllowed = errors.New("call not allowed")

// Dispatcher is an optional interface of Services: services that start
// dispatched calls themselves, typically asynchronously (the `http`
// call-out). Services without it get the calls through Services.Call,
// one after the other, after the guest returned.
type Dispatcher interface {
	// Check runs inside the guest's dispatch import: no I/O, no blocking.
	// It returns nil, ErrNotAllowed, ErrBadServiceRequest or
	// ErrNoService (any other error counts as ErrNoService). A refusal
	// is logged by the Dispatcher, which knows what was refused.
	Check(r *Request, plugin string, service string, req []byte) error
	// Start starts the call after the guest returned; it may do the work
	// inline (a host text service) or asynchronously; it calls c.Finish
	// exactly once, from any goroutine. Work done asynchronously must
	// not touch r.
	Start(r *Request, c *Call)
}

// BatchDispatcher is an optional interface of a Dispatcher: it starts
// several calls of one request at once, so that the services may serve
// them together (the rate limiter's admission and the budget's hold in
// one Redis script call). The pipeline hands it the calls of the request
// phase's deferring plugins (verdict DEFER) together with those of the
// callback that waits, in policy order and, within a plugin, dispatch
// order. It calls Finish on each call exactly once, from any goroutine;
// work done asynchronously must not touch r.
//
// A batch may skip a call whose answer an earlier call of the batch made
// moot (a budget hold after the rate limiter refused the request): it
// finishes it with StatusSkipped. The pipeline never delivers that status
// to a guest: if the response is still wanted (the earlier plugin went on
// anyway), the call is started again on its own, with Start.
//
// calls is the batch's own: the pipeline does not change it afterwards.
type BatchDispatcher interface {
	Dispatcher
	StartBatch(r *Request, calls []*Call)
}

// StatusSkipped is the CallResult.Status of a call a BatchDispatcher
// skipped; it is host-internal and never reaches a guest.
const StatusSkipped = -1000

// Call is one dispatched call.
type Call struct {
	Plugin, Service string
	Request         []byte          // the guest's bytes, copied
	Ctx             context.Context // cancelled when the host abandons the call or the request ends

	id       int32
	cancel   context.CancelFunc
	done     chan struct{}
	finished atomic.Bool
	res      CallResult
	start    time.Time // when it was started, for tracing

	// The answers the guest needs no on_call_response for: prefixes
	// (expect_response) stored end to end in expected (in inline while
	// they fit), the i-th ending at expectEnds[i].
	expected   []byte
	expectEnds [maxExpectPrefixes]uint8
	expects    uint8
	inline     [16]byte
}

// expect adds prefix to c's expected answers; false when it is too long
// or c has maxExpectPrefixes already.
func (c *Call) expect(prefix []byte) bool {
	if len(prefix) > maxExpectPrefix || int(c.expects) >= maxExpectPrefixes {
		return false
	}
	if c.expected == nil {
		c.expected = c.inline[:0]
	}
	c.expected = append(c.expected, prefix...)
	c.expectEnds[c.expects] = uint8(len(c.expected))
	c.expects++
	return true
}

// expectedAnswer reports whether res is an answer c's guest said it needs no
// on_call_response for: a host service's (status 0) whose body starts
// with one of c's prefixes.
func (c *Call) expectedAnswer(res *CallResult) bool {
	if c.expects == 0 || res.Status != 0 {
		return false
	}
	from := 0
	for _, end := range c.expectEnds[:c.expects] {
		if bytes.HasPrefix(res.Body, c.expected[from:end]) {
			return true
		}
		from = int(end)
	}
	return false
}

// CallResult is a dispatched call's response.
type CallResult struct {
	// Status is the HTTP status for `http`, 0 for a host service's
	// result, or a negative Status* code on failure.
	Status int
	Body   []byte
	Header []Header
	// Cached reports an answer served from the host's cache.
	Cached bool
}

// Finish records the result and wakes the waiting pipeline. Calls after
// the first are ignored. res belongs to the host from then on.
func (c *Call) Finish(res CallResult) {
	if c.finished.Swap(true) {
		return
	}
	c.res = res
	close(c.done)
}

// DispatchTracer is an optional interface of a CallTracer: told about each
// dispatched call whose response reached the guest, so that the gateway
// can make it a child span of the plugin's callback.
type DispatchTracer interface {
	DispatchedCall(plugin string, slot int, ph Phase, service string, start time.Time, d time.Duration, res CallResult)
}

// callQueue is a request's dispatched calls. Those queued and waiting
// belong to the callback being served: they never outlive it. Those
// deferred belong to request-phase callbacks that answered DEFER
// (defer.go).
type callQueue struct {
	queued   []*Call // dispatched in the current guest call, not started
	waiting  []*Call // started, responses not yet delivered, in dispatch order
	deferred deferredCalls
	next     int32 // the next call id
	// current is the response on_call_response is handling (result);
	// nil outside on_call_response.
	current *Call
	result  CallResult
}

// outstanding is the number of calls dispatched and not yet answered.
func (q *callQueue) outstanding() int { return len(q.queued) + len(q.waiting) }

// dropQueued abandons the calls the guest dispatched and never waited on.
func (q *callQueue) dropQueued() {
	clear(q.queued)
	q.queued = q.queued[:0]
}

// abandon cancels every call still outstanding.
func (q *callQueue) abandon() {
	q.dropQueued()
	for i, c := range q.waiting {
		c.cancel()
		q.waiting[i] = nil
	}
	q.waiting = q.waiting[:0]
	q.current = nil
	q.result = CallResult{}
}

// reset abandons every call and empties q for the next request, keeping
// its slices.
func (q *callQueue) reset() callQueue {
	q.abandon()
	q.deferred.abandon(0)
	return callQueue{queued: q.queued[:0], waiting: q.waiting[:0],
		deferred: deferredCalls{calls: q.deferred.calls[:0], plugins: q.deferred.plugins[:0]}}
}

// startCalls starts the queued calls, each on its own.
func (r *Request) startCalls() {
	q := &r.calls
	for i, c := range q.queued {
		q.queued[i] = nil
		r.prepareCall(c)
		q.waiting = append(q.waiting, c)
		r.startCall(c)
	}
	q.queued = q.queued[:0]
}

// prepareCall gives c its context, a child of the request's.
func (r *Request) prepareCall(c *Call) {
	parent := r.Context
	if parent == nil {
		parent = context.Background()
	}
	c.Ctx, c.cancel = context.WithCancel(parent)
	if r.Tracer != nil {
		c.start = time.Now()
	}
}

// startCall starts a prepared call: through the Dispatcher, or else with
// Services.Call.
func (r *Request) startCall(c *Call) {
	if d, ok := r.Services.(Dispatcher); ok {
		d.Start(r, c)
		return
	}
	res, err := r.Services.Call(r, c.Service, c.Request)
	switch {
	case errors.Is(err, ErrBadServiceRequest):
		c.Finish(CallResult{Status: StatusInvalid})
	case err != nil:
		c.Finish(CallResult{Status: StatusUnavailable})
	default:
		// A service may reuse its result's buffer.
		c.Finish(CallResult{Body: append([]byte(nil), res...)})
	}
}

// awaitNext waits for the first waiting call's response and makes it the
// current one. The request's Context ending abandons the wait: the call
// then answers UNAVAILABLE. A call a batch skipped is wanted after all:
// it is started again, alone (a second skip answers UNAVAILABLE).
func (r *Request) awaitNext() *Call {
	q := &r.calls
	c := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	var done <-chan struct{}
	if r.Context != nil {
		done = r.Context.Done()
	}
	for restarted := false; ; restarted = true {
		select {
		case <-c.done:
			q.result = c.res
		case <-done:
			q.result = CallResult{Status: StatusUnavailable}
		}
		c.cancel() // the call is over: release its context
		if q.result.Status != StatusSkipped {
			break
		}
		if restarted {
			q.result = CallResult{Status: StatusUnavailable}
			break
		}
		c = r.restartCall(c)
	}
	q.current = c
	return c
}

// restartCall starts c's request again as a new call, alone, with the
// same id.
func (r *Request) restartCall(c *Call) *Call {
	n := &Call{Plugin: c.Plugin, Service: c.Service, Request: c.Request, id: c.id, done: make(chan struct{}),
		expectEnds: c.expectEnds, expects: c.expects}
	n.expected = append(n.inline[:0], c.expected...)
	r.prepareCall(n)
	r.startCall(n)
	return n
}
