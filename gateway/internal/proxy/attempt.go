package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// The attempt loop. A request goes to one upstream of its route, chosen by
// weight among those whose breaker lets it through and that have a free
// slot (balance.Set). When the attempt fails before anything reached the
// client — no connection, no response headers in time, a 429 or a 5xx —
// and the route's retry.attempts allow, the request goes again: to an
// upstream of the route it has not tried, then to the route's fallback
// models in order (their upstreams, the body's model replaced), and once
// every candidate was tried, around again from the route's own upstreams
// (except to an upstream that timed out: a request that found no answer
// there in time is not sent there again). Going back to an upstream
// already tried waits an exponential backoff
// with jitter, or the upstream's Retry-After when it is longer and within
// retry.max_backoff (a longer one ends the retries). The decision is made
// on the response status, before the reply's first byte is written to the
// client; a reply that has started is never retried. Only the final
// attempt's reply goes through the response_headers phase and to the
// client; earlier replies are discarded. When no attempt succeeds the
// client gets the last one's failure: the upstream's own 429/5xx reply, or
// the gateway's 502/504. Why these choices: docs/adr/0005-upstream-routing.md.

// attemptState is one request's progress through its route.
type attemptState struct {
	// ticket holds the serving attempt's slot until the reply ends.
	ticket   balance.Ticket
	attempts int
	tried    [config.MaxAttempts]*balance.Upstream
	// timedOut: tried[i] gave no reply in time, or all its connections
	// stayed busy for as long; either way, not worth another wait.
	timedOut [config.MaxAttempts]bool
	// prefer is the member of the route chosen before the plugins ran (so
	// they could read its name); the first attempt goes there if it can.
	prefer int
	// fallback is the fallback model of the attempt that served ("": the
	// request's own model).
	fallback string
	// name is the name of x.client once an attempt was made.
	name []byte
	// hdrFor is the header filter x.header was last built with.
	hdrFor *headerFilter
	// fbBody is the request body for fallback model fbFor.
	fbBody []byte
	fbFor  string
	// fbName is fbFor as bytes, for the model_ids lookup.
	fbName []byte
}

// fbModel is fallback model fb as bytes.
func (a *attemptState) fbModel(fb string) []byte {
	if string(a.fbName) != fb {
		a.fbName = append(a.fbName[:0], fb...)
	}
	return a.fbName
}

func (a *attemptState) reset() {
	a.ticket.Release()
	a.ticket = balance.Ticket{}
	a.tried, a.timedOut = [config.MaxAttempts]*balance.Upstream{}, [config.MaxAttempts]bool{}
	a.attempts, a.prefer, a.fallback, a.name, a.hdrFor, a.fbFor = 0, 0, "", nil, nil, ""
	if cap(a.fbBody) > 1<<20 {
		a.fbBody = nil
	}
	a.fbBody = a.fbBody[:0]
}

// releaseUpstream frees the serving attempt's slot once the reply is over.
func (x *exchange) releaseUpstream() { x.try.ticket.Release() }

// healthConfig is the balance configuration of upstream u.
func healthConfig(u *config.Upstream) balance.Config {
	c := balance.Config{MaxConcurrent: u.MaxConcurrent}
	if b := u.Breaker; b != nil {
		c.BreakerFailures, c.BreakerOpenFor = b.Failures, b.OpenFor
	}
	return c
}

// choose picks the upstream the request will most likely go to, before
// the plugins run: they read its name.
func (x *exchange) choose() *target {
	rt := x.route
	i := 0
	if len(rt.targets) > 1 {
		i = rt.set.Peek()
		if x.ep == endpointMessages && !x.accepts(&rt.targets[i]) {
			for j := range rt.targets {
				if x.accepts(&rt.targets[j]) {
					i = j
					break
				}
			}
		}
	}
	x.try.prefer = i
	return &rt.targets[i]
}

// unservable is the mask of rt's members that cannot serve the request's
// endpoint at all.
func (x *exchange) unservable(rt *route) uint64 {
	if x.ep != endpointMessages {
		return 0
	}
	var m uint64
	for i := range rt.targets {
		if !x.accepts(&rt.targets[i]) {
			m |= 1 << i
		}
	}
	return m
}

// requestError is a request that cannot be expressed for any upstream of
// its route (the provider's translation refused it): the client's error.
type requestError struct{ e *openai.Error }

func (e *requestError) Error() string { return e.e.Error() }

// attemptResult is the last attempt's failure, kept until the next attempt
// starts in case it is the final one.
type attemptResult struct {
	ex         *upstream.Exchange // a 429/5xx reply (nil for err)
	err        error
	client     *upstream.Client
	bind       *binding
	name       []byte
	up         *balance.Upstream
	fallback   string
	retryAfter time.Duration
}

func (r *attemptResult) discard() {
	if r.ex != nil {
		r.ex.Release()
	}
	*r = attemptResult{}
}

// walk is where a request's attempts stand in its route and fallbacks.
type walk struct {
	primary, rt *route
	level       int    // 0: the route itself; i: primary.fallbacks[i-1]
	fb          string // rt's fallback model ("": the request's own)
	excluded    uint64 // members of rt tried (or unusable) in this pass
	prefer      int    // member of the first pick, -1 after it
	// progress: an attempt was made since the pass began.
	progress bool
}

// next admits the next attempt on w's way through the route: the ticket,
// or ok false when no candidate is left (err: the request ended while it
// waited for a slot).
func (x *exchange) next(w *walk, rctx context.Context) (tk balance.Ticket, ok bool, err error) {
	for {
		tk, res := w.rt.set.Pick(w.excluded, w.prefer)
		w.prefer = -1
		if res == balance.Saturated {
			switch tk, err = w.rt.set.Wait(rctx, w.excluded, w.rt.wait); {
			case err == nil:
				res = balance.Picked
			case errors.Is(err, balance.ErrUnavailable):
				res = balance.Unavailable
			case rctx.Err() != nil:
				return tk, false, fmt.Errorf("%w: waiting for a free upstream: %w", upstream.ErrCanceled, err)
			default:
				return tk, false, nil // ErrSaturated: the bounded wait is over
			}
		}
		if res == balance.Picked {
			return tk, true, nil
		}
		switch {
		case w.level < len(w.primary.fallbacks):
			f := w.primary.fallbacks[w.level]
			w.level++
			if f.model == string(x.req.Model) {
				continue
			}
			w.rt, w.fb = f.route, f.model
		case w.progress && x.try.attempts < w.primary.retry.Attempts:
			// Every candidate was tried: around again.
			w.rt, w.level, w.fb, w.progress = w.primary, 0, "", false
		default:
			return tk, false, nil
		}
		w.excluded = x.unservable(w.rt)
	}
}

// send runs the request's attempts (see the top of this file) and returns
// the final reply, its slot in x.try.ticket; on return x.client is the
// upstream that served, or whose failure the error reports. body is the
// request body for the request's own model.
func (x *exchange) send(ctx *fasthttp.RequestCtx, rctx context.Context, path string, body []byte) (*upstream.Exchange, error) {
	a := &x.try
	w := walk{primary: x.route, rt: x.route, excluded: x.unservable(x.route), prefer: a.prefer}
	limit := w.primary.retry.Attempts
	var last attemptResult
	var reqErr error
	for {
		tk, ok, err := x.next(&w, rctx)
		if err != nil {
			last.discard()
			return nil, err
		}
		if !ok {
			return x.lastFailure(ctx, &last, reqErr)
		}
		t := &w.rt.targets[tk.Index()]
		bit := uint64(1) << tk.Index()
		tried, timedOut := a.triedBefore(tk.Upstream())
		if timedOut {
			tk.Cancel()
			w.excluded |= bit
			continue
		}
		req, err := x.attemptRequest(ctx, t, path, body, w.fb)
		if err != nil {
			tk.Cancel()
			reqErr = cmp.Or(reqErr, err)
			w.excluded |= bit
			continue
		}
		if tried {
			d := backoff(w.primary.retry, a.attempts)
			if last.up == tk.Upstream() && last.retryAfter > 0 {
				if last.retryAfter > w.primary.retry.MaxBackoff {
					tk.Cancel() // it asked for a longer pause than the policy waits
					return x.lastFailure(ctx, &last, reqErr)
				}
				d = max(d, last.retryAfter)
			}
			last.discard()
			if !sleepCtx(rctx, d) {
				tk.Cancel()
				return nil, fmt.Errorf("%w: during the retry backoff: %w", upstream.ErrCanceled, context.Cause(rctx))
			}
		}
		last.discard()
		x.client, x.bind, a.name = t.client, t.bind, t.name
		ex, err := t.client.Do(rctx, req)
		a.tried[a.attempts] = tk.Upstream()
		a.timedOut[a.attempts] = err != nil && (errors.Is(err, upstream.ErrTimeout) || errors.Is(err, upstream.ErrPoolFull))
		a.attempts++
		retry := a.attempts > 1
		if err != nil {
			o := errOutcome(err)
			tk.Done(o, retry)
			tk.Release()
			if o == balance.Cancelled || a.attempts >= limit {
				return nil, err
			}
			last = attemptResult{err: err, client: t.client, bind: t.bind, name: t.name, up: tk.Upstream(), fallback: w.fb}
		} else {
			o := balance.StatusOutcome(ex.StatusCode())
			tk.Done(o, retry)
			if !o.Retryable() || a.attempts >= limit {
				a.ticket, a.fallback = tk, w.fb
				return ex, nil
			}
			tk.Release()
			last = attemptResult{ex: ex, client: t.client, bind: t.bind, name: t.name, up: tk.Upstream(), fallback: w.fb, retryAfter: retryAfter(ex)}
		}
		w.excluded |= bit
		w.progress = true
	}
}

// lastFailure ends the attempts when no further one can be made: the last
// attempt's reply or error, else why none was made.
func (x *exchange) lastFailure(ctx *fasthttp.RequestCtx, last *attemptResult, reqErr error) (*upstream.Exchange, error) {
	a := &x.try
	switch {
	case last.ex != nil || last.err != nil:
		x.client, x.bind, a.name, a.fallback = last.client, last.bind, last.name, last.fallback
		ex, err := last.ex, last.err
		*last = attemptResult{}
		return ex, err
	case reqErr != nil:
		return nil, &requestError{asOpenAIError(reqErr)}
	}
	return nil, x.unavailable(ctx)
}

// unavailable is the error for a request no upstream could take: every
// breaker of its route (and fallbacks) open, or every upstream at its
// max_concurrent for the whole wait.
func (x *exchange) unavailable(ctx *fasthttp.RequestCtx) *openai.Error {
	wait := x.route.set.RetryIn()
	for _, f := range x.route.fallbacks {
		wait = min(wait, f.route.set.RetryIn())
	}
	if wait > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		return &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: openai.TypeUpstream, Code: "upstream_unavailable",
			Message: fmt.Sprintf("Every upstream serving `%s` is failing; the gateway stopped sending requests to them for a while (circuit breaker open).", x.req.Model)}
	}
	return saturated(ctx, fmt.Sprintf("Every upstream serving `%s` is at its concurrency limit; retry the request.", x.req.Model))
}

// saturated is the 503 for a request the gateway's own limits kept from
// every upstream (max_concurrent, max_connections): retry in a second.
func saturated(ctx *fasthttp.RequestCtx, msg string) *openai.Error {
	ctx.Response.Header.Set("Retry-After", "1")
	return &openai.Error{Status: fasthttp.StatusServiceUnavailable, Type: openai.TypeUpstream, Code: "upstream_saturated", Message: msg}
}

// attemptRequest builds the request for target t: the header lines its
// filter allows, and the body for model fb ("": the client's own).
func (x *exchange) attemptRequest(ctx *fasthttp.RequestCtx, t *target, path string, body []byte, fb string) (*upstream.Request, error) {
	a := &x.try
	if a.hdrFor != t.filter {
		x.buildHeader(ctx, t.filter)
		a.hdrFor = t.filter
	}
	model := x.req.Model
	if fb != "" {
		model = a.fbModel(fb)
		if a.fbFor != fb {
			var err error
			if a.fbBody, err = openai.AppendWithModel(a.fbBody[:0], body, fb); err != nil {
				return nil, err
			}
			a.fbFor = fb
		}
		body = a.fbBody
	}
	return x.upstreamRequest(t, path, body, model)
}

// triedBefore reports whether this request already went to u, and
// whether u timed out on it.
func (a *attemptState) triedBefore(u *balance.Upstream) (tried, timedOut bool) {
	for i, t := range a.tried[:a.attempts] {
		if t == u {
			tried = true
			timedOut = timedOut || a.timedOut[i]
		}
	}
	return tried, timedOut
}

// errOutcome classifies a failed exchange.
func errOutcome(err error) balance.Outcome {
	switch {
	case errors.Is(err, upstream.ErrCanceled):
		return balance.Cancelled
	case errors.Is(err, upstream.ErrPoolFull):
		return balance.PoolFull
	case errors.Is(err, upstream.ErrTimeout):
		return balance.Timeout
	}
	return balance.Unreachable
}

// backoff is the wait before retry n (n >= 1) to an upstream already
// tried: base·2^(n-1), capped at max_backoff, with "equal jitter" (a
// uniform draw from the upper half) so that requests failing together do
// not come back together.
func backoff(r config.Retry, n int) time.Duration {
	d := r.Backoff << min(n-1, 20)
	if d <= 0 || d > r.MaxBackoff {
		d = r.MaxBackoff
	}
	half := d / 2
	return half + rand.N(half+1)
}

// retryAfter is a 429 or 503 reply's Retry-After (seconds or an HTTP
// date); 0 when absent, invalid, or for other statuses.
func retryAfter(ex *upstream.Exchange) time.Duration {
	if s := ex.StatusCode(); s != 429 && s != 503 {
		return 0
	}
	v := ex.Header().Peek("Retry-After")
	if len(v) == 0 {
		return 0
	}
	if n, err := strconv.ParseUint(string(v), 10, 32); err == nil {
		return time.Duration(n) * time.Second
	}
	if t, err := fasthttp.ParseHTTPDate(v); err == nil {
		return max(0, time.Until(t))
	}
	return 0
}

// sleepCtx waits d unless ctx ends first; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
