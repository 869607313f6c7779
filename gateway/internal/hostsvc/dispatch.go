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
	res, err := c.Call(r, call.Service, call.Request)
	finishText(call, res, err)
}

// finishText finishes a text service's call with its result res (copied)
// or error.
func finishText(call *wasmhost.Call, res []byte, err error) {
	switch {
	case errors.Is(err, wasmhost.ErrBadServiceRequest):
		call.Finish(wasmhost.CallResult{Status: wasmhost.StatusInvalid})
	case err != nil:
		call.Finish(wasmhost.CallResult{Status: wasmhost.StatusUnavailable})
	default:
		call.Finish(wasmhost.CallResult{Body: append([]byte(nil), res...)})
	}
}

// StartBatch implements wasmhost.BatchDispatcher. A ratelimit.admit call
// followed by a budget.reserve call is served together: the admission and
// then, only if it admits the request, the hold, in one Redis script call
// (meterstore.Store.AdmitReserve); the hold of a request the admission
// refused is skipped (wasmhost.StatusSkipped). The answers, headers and
// meter are those of the two calls started one after the other. Every
// other call is started as Start does.
func (c *Session) StartBatch(r *wasmhost.Request, calls []*wasmhost.Call) {
	for i := 0; i < len(calls); i++ {
		if i+1 < len(calls) && c.set != nil && c.set.together &&
			calls[i].Service == admitService && calls[i+1].Service == reserveService {
			c.admitReserve(r, calls[i], calls[i+1])
			i++
			continue
		}
		c.Start(r, calls[i])
	}
}

// The services StartBatch serves together.
const (
	admitService   = "ratelimit.admit"
	reserveService = "budget.reserve"
)

// admitReserve serves an admission and a budget hold of r together.
func (c *Session) admitReserve(r *wasmhost.Request, admit, reserve *wasmhost.Call) {
	set := c.set
	lr, out, err := set.rate.prepare(c, r, admit.Request)
	if out != nil || err != nil { // no admission to make
		finishText(admit, out, err)
		c.startUnlessRefused(r, reserve, out, err)
		return
	}
	h, completion, rout, rerr := set.budget.prepareReserve(c, r, reserve.Request)
	if rout != nil || rerr != nil { // no hold to make
		d, err := set.rate.limiter.Admit(context.Background(), &lr)
		out, err := set.rate.answer(c, r, &lr, d, err)
		finishText(admit, out, err)
		if refused(out, err) {
			reserve.Finish(wasmhost.CallResult{Status: wasmhost.StatusSkipped})
			return
		}
		finishText(reserve, rout, rerr)
		return
	}
	res := set.meter.AdmitReserve(context.Background(), &lr, &h)
	out, err = set.rate.answer(c, r, &lr, res.Decision, res.AdmitErr)
	finishText(admit, out, err)
	if !res.Reserved {
		reserve.Finish(wasmhost.CallResult{Status: wasmhost.StatusSkipped})
		return
	}
	out, err = set.budget.reserved(c, r, &h, completion, res.Reservation, res.ReserveErr)
	finishText(reserve, out, err)
}

// startUnlessRefused starts call unless the admission answered out (or
// err) refused the request, when it is skipped.
func (c *Session) startUnlessRefused(r *wasmhost.Request, call *wasmhost.Call, out []byte, err error) {
	if refused(out, err) {
		call.Finish(wasmhost.CallResult{Status: wasmhost.StatusSkipped})
		return
	}
	c.Start(r, call)
}

// refused reports whether ratelimit.admit's answer out (or err) lets the
// request go no further: anything but "allowed" and "unlimited". A
// plugin that goes on all the same (fail_open) gets the skipped call
// started again on its own.
func refused(out []byte, err error) bool {
	return err != nil || string(out) != "allowed" && string(out) != "unlimited"
}
