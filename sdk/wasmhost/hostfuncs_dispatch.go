package wasmhost

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero/api"
)

// The imports of dispatched calls (sdk/ABI.md, "Dispatched calls").
func (p *Plugin) dispatchFuncs() []hostFunc {
	return []hostFunc{
		{"dispatch", 4, nil, i32, p.hostDispatch},
		{"expect_response", 3, nil, i32, hostExpectResponse},
		{"call_response", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			if r.calls.current == nil {
				read(m, uint32(s[0]), uint32(s[1]), "output buffer")
				s[0] = code(codeNotAllowed)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.calls.result.Body)
		}},
		{"call_response_header", 4, nil, i32, getHeader(func(r *Request, name []byte) []byte {
			if r.calls.current == nil {
				return nil
			}
			return Headers(r.calls.result.Header).PeekBytes(name)
		})},
	}
}

// hostDispatch queues a call: dispatch(svc_ptr, svc_len, req_ptr, req_len)
// → call id, or INVALID, NOT_ALLOWED, UNAVAILABLE, BUSY. Nothing starts
// here; see Pipeline.suspend.
func (p *Plugin) hostDispatch(ctx context.Context, m api.Module, s []uint64) {
	inst, r := current(ctx)
	svc := read(m, uint32(s[0]), uint32(s[1]), "service name")
	req := read(m, uint32(s[2]), uint32(s[3]), "service request")
	switch {
	case r.configuring || inst.phase == 0:
		s[0] = code(codeNotAllowed)
		return
	case r.Services == nil:
		s[0] = code(codeUnavailable)
		return
	case r.calls.outstanding() >= maxOutstandingCalls:
		s[0] = code(codeBusy)
		return
	}
	name := inst.serviceName(svc)
	body := append([]byte(nil), req...)
	if d, ok := r.Services.(Dispatcher); ok {
		if err := d.Check(r, p.spec.Name, name, body); err != nil {
			p.log.Debug("dispatch refused", "service", name, "err", err)
			switch {
			case errors.Is(err, ErrNotAllowed):
				s[0] = code(codeNotAllowed)
			case errors.Is(err, ErrBadServiceRequest):
				s[0] = code(codeInvalid)
			default:
				s[0] = code(codeUnavailable)
			}
			return
		}
	}
	c := &Call{Plugin: p.spec.Name, Service: name, Request: body, id: r.calls.next, done: make(chan struct{})}
	r.calls.next++
	r.calls.queued = append(r.calls.queued, c)
	s[0] = uint64(uint32(c.id))
}

// hostExpectResponse adds a prefix to a queued call's expected answers:
// expect_response(call, prefix_ptr, prefix_len) → 0, or INVALID for a call
// this callback did not queue (or already started), a prefix over
// maxExpectPrefix bytes, or past maxExpectPrefixes of them. A host
// service's answer that starts with one is consumed without
// on_call_response (Pipeline.suspend).
func hostExpectResponse(ctx context.Context, m api.Module, s []uint64) {
	_, r := current(ctx)
	prefix := read(m, uint32(s[1]), uint32(s[2]), "expected prefix")
	id := int32(uint32(s[0]))
	for _, c := range r.calls.queued {
		if c.id == id {
			if !c.expect(prefix) {
				break
			}
			s[0] = 0
			return
		}
	}
	s[0] = code(codeInvalid)
}
