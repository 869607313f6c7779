package conformance

import (
	"errors"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// services is also a Dispatcher, so that a plugin that calls out (the
// repository's moderation plugin) gets an answer as it would from a
// permissive gateway: every `http` call is granted and answered 200 by a
// classifier that flags nothing (an OpenAI moderation result), and the
// host services are answered as through `call`.
var _ wasmhost.Dispatcher = services{}

// cleanVerdict is the permissive classifier's answer.
const cleanVerdict = `{"id":"modr-conformance","model":"conformance","results":[{"flagged":false,"categories":{},"category_scores":{}}]}`

// Check implements wasmhost.Dispatcher: every call is allowed.
func (services) Check(*wasmhost.Request, string, string, []byte) error { return nil }

// Start implements wasmhost.Dispatcher.
func (s services) Start(r *wasmhost.Request, c *wasmhost.Call) {
	if c.Service == "http" {
		c.Finish(wasmhost.CallResult{Status: 200, Body: []byte(cleanVerdict),
			Header: []wasmhost.Header{{Name: []byte("Content-Type"), Value: []byte("application/json")}}})
		return
	}
	res, err := s.Call(r, c.Service, c.Request)
	switch {
	case errors.Is(err, wasmhost.ErrBadServiceRequest):
		c.Finish(wasmhost.CallResult{Status: wasmhost.StatusInvalid})
	case err != nil:
		c.Finish(wasmhost.CallResult{Status: wasmhost.StatusUnavailable})
	default:
		c.Finish(wasmhost.CallResult{Body: res})
	}
}
