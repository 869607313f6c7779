package hostsvc

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// CalloutService is the ABI name of the `http` service: plugins' HTTP
// call-outs (package callout).
const CalloutService = "http"

var _ wasmhost.BatchDispatcher = (*Session)(nil)

// Check implements wasmhost.Dispatcher: whether plugin may dispatch req
// to service, without I/O. `http` asks the call-out service (the
// policy's grant for the plugin); the text services need only exist.
func (c *Session) Check(r *wasmhost.Request, plugin, service string, req []byte) error {
	if c.set == nil {
		return wasmhost.ErrNoService
	}
	if service == CalloutService {
		if c.set.callout == nil {
			c.set.log.Warn("call-out refused", "plugin", plugin, "service", service,
				"err", "no plugin of the policy has a callout grant")
			return wasmhost.ErrNotAllowed
		}
		switch err := c.set.callout.Check(plugin, req); {
		case err == nil:
			return nil
		case errors.Is(err, callout.ErrBadRequest):
			return wasmhost.ErrBadServiceRequest
		default:
			return wasmhost.ErrNotAllowed
		}
	}
	if c.set.byName[service] == nil {
		return wasmhost.ErrNoService
	}
	return nil
}

// Start implements wasmhost.Dispatcher. An `http` call runs on its own
// goroutine (it must not touch r); a text service answers inline, as
// Call would, its result copied since a service may reuse its buffer.
func (c *Session) Start(r *wasmhost.Request, call *wasmhost.Call) {
	if call.Service == CalloutService && c.set != nil && c.set.callout != nil {
		svc := c.set.callout
		go func() {
			res := svc.Do(call.Ctx, call.Plugin, call.Request)
			call.Finish(wasmhost.CallResult{Status: res.Status, Body: res.Body, Header: res.Header, Cached: res.Cached})
		}()
		return
	}
	if call.Service == CacheLookupService && c.set != nil && c.set.cache != nil {
		// Dispatched, a lookup may wait for an identical request's reply
		// (coalescing): no instance is held meanwhile.
		res, err := c.cacheLookup(call.Ctx, r, call.Request, true)
		call.Finish(textResult(res, err))
		return
	}
	res, err := c.Call(r, call.Service, call.Request)
	call.Finish(textResult(res, err))
}

// textResult is the response of a text service's call that answered res
// (copied: a service may reuse its buffer) or err.
func textResult(res []byte, err error) wasmhost.CallResult {
	switch {
	case errors.Is(err, wasmhost.ErrBadServiceRequest):
		return wasmhost.CallResult{Status: wasmhost.StatusInvalid}
	case err != nil:
		return wasmhost.CallResult{Status: wasmhost.StatusUnavailable}
	}
	return wasmhost.CallResult{Body: append([]byte(nil), res...)}
}

var skipped = wasmhost.CallResult{Status: wasmhost.StatusSkipped}

// StartBatch implements wasmhost.BatchDispatcher. A batch's first
// ratelimit.admit and first budget.reserve are served together, where
// the first of them comes: the admission and then, only if it admits the
// request, the hold, in one Redis script call
// (meterstore.Store.AdmitReserve); the hold of a request the admission
// refused is skipped (wasmhost.StatusSkipped, so the pipeline starts it
// again alone if a plugin before the rate limiter still wants it). The
// answers, headers and meter are those of the two calls made one after
// the other. Every other call is started as Start does.
func (c *Session) StartBatch(r *wasmhost.Request, calls []*wasmhost.Call) {
	ia, ir, ok := c.pair(calls)
	for i, call := range calls {
		switch {
		case ok && i == min(ia, ir):
			admit, reserve := c.admitReserve(r, calls[ia].Request, calls[ir].Request)
			calls[ia].Finish(admit)
			calls[ir].Finish(reserve)
		case ok && i == max(ia, ir):
		default:
			c.Start(r, call)
		}
	}
}

// The services StartBatch serves together.
const (
	admitService   = "ratelimit.admit"
	reserveService = "budget.reserve"
)

// pair returns the indices in calls of the first ratelimit.admit and the
// first budget.reserve, if there are both and the Set's own services
// serve them.
func (c *Session) pair(calls []*wasmhost.Call) (admit, reserve int, ok bool) {
	if c.set == nil || !c.set.together {
		return 0, 0, false
	}
	admit, reserve = -1, -1
	for i, call := range calls {
		switch {
		case call.Service == admitService && admit < 0:
			admit = i
		case call.Service == reserveService && reserve < 0:
			reserve = i
		}
	}
	return admit, reserve, admit >= 0 && reserve >= 0
}

// admitReserve serves ratelimit.admit's request admitReq and then, unless
// the admission refused r, budget.reserve's reserveReq: their responses,
// as the two calls would answer them one after the other, the second
// skipped when the admission refused.
func (c *Session) admitReserve(r *wasmhost.Request, admitReq, reserveReq []byte) (admit, reserve wasmhost.CallResult) {
	set := c.set
	lr, out, err := set.rate.prepare(c, r, admitReq)
	if out != nil || err != nil { // no admission to make
		if refused(out, err) {
			return textResult(out, err), skipped
		}
		admit = textResult(out, err)
		out, err = set.budget.Reserve(c, r, reserveReq) // runs the tenant's pending ends first
		return admit, textResult(out, err)
	}
	h, completion, rout, rerr := set.budget.prepareReserve(c, r, reserveReq)
	if rout != nil || rerr != nil { // no hold to make
		set.meter.Before(context.Background(), lr.Tenant)
		d, err := set.rate.limiter.Admit(context.Background(), &lr)
		out, err := set.rate.answer(c, r, &lr, d, err)
		if refused(out, err) {
			return textResult(out, err), skipped
		}
		return textResult(out, err), textResult(rout, rerr)
	}
	res := set.meter.AdmitReserve(context.Background(), &lr, &h)
	c.meter.seq = res.Seq
	out, err = set.rate.answer(c, r, &lr, res.Decision, res.AdmitErr)
	admit = textResult(out, err)
	if !res.Reserved {
		// As if budget.reserve had not been called: no scopes, no id.
		m := &c.meter
		clear(m.scopes)
		m.scopes, m.hold = m.scopes[:0], m.hold[:0]
		return admit, skipped
	}
	out, err = set.budget.reserved(c, r, &h, completion, res.Reservation, res.ReserveErr)
	return admit, textResult(out, err)
}

// refused reports whether ratelimit.admit's answer out (or err) lets the
// request go no further: anything but "allowed" and "unlimited". A
// plugin that goes on all the same (fail_open) gets the skipped call
// started again on its own.
func refused(out []byte, err error) bool {
	return err != nil || string(out) != "allowed" && string(out) != "unlimited"
}
