package hostsvc

import (
	"errors"

	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// CalloutService is the ABI name of the `http` service: plugins' HTTP
// call-outs (package callout).
const CalloutService = "http"

var _ wasmhost.Dispatcher = (*Session)(nil)

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
	switch {
	case errors.Is(err, wasmhost.ErrBadServiceRequest):
		call.Finish(wasmhost.CallResult{Status: wasmhost.StatusInvalid})
	case err != nil:
		call.Finish(wasmhost.CallResult{Status: wasmhost.StatusUnavailable})
	default:
		call.Finish(wasmhost.CallResult{Body: append([]byte(nil), res...)})
	}
}
