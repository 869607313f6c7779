package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
)

// ErrNoService is returned by Services.Call for a name it does not serve.
var ErrNoService = errors.New("no such service")

// ErrBadServiceRequest is returned by Services.Call for a request it cannot
// parse; `call` then returns INVALID.
var ErrBadServiceRequest = errors.New("malformed service request")

// guestFault is the panic value of a host function that rejects a guest's
// arguments; wazero turns it into the callback's error, and the instance
// is discarded.
type guestFault struct{ msg string }

func (g guestFault) Error() string { return "bad call from the guest: " + g.msg }

func fault(format string, args ...any) { panic(guestFault{fmt.Sprintf(format, args...)}) }

// read returns guest memory [ptr, ptr+n), trapping the guest when the range
// is outside its memory. The slice aliases guest memory: copy before
// keeping it past the host function.
func read(m api.Module, ptr, n uint32, what string) []byte {
	b, ok := m.Memory().Read(ptr, n)
	if !ok {
		fault("%s: range [%#x, +%d) is outside memory (%d bytes)", what, ptr, n, m.Memory().Size())
	}
	return b
}

// out writes v into the guest buffer (buf, cap) following the ABI's value
// protocol and returns the result code.
func out(m api.Module, buf, cap uint32, v []byte) uint64 {
	dst := read(m, buf, cap, "output buffer")
	if uint64(len(v)) > uint64(cap) {
		return uint64(uint32(int32(len(v))))
	}
	copy(dst, v)
	return uint64(len(v))
}

func code(c int32) uint64 { return uint64(uint32(c)) }

// current returns the calling instance and its request.
func current(ctx context.Context) (*instance, *Request) {
	inst, _ := ctx.Value(instanceKey{}).(*instance)
	if inst == nil || inst.req == nil {
		fault("host function called outside a callback")
	}
	return inst, inst.req
}

type hostFunc struct {
	name    string
	params  int // i32 params, except where i64s lists
	i64s    []int
	results []api.ValueType
	fn      api.GoModuleFunc
}

var (
	i32 = []api.ValueType{api.ValueTypeI32}
	i64 = []api.ValueType{api.ValueTypeI64}
)

func (p *Plugin) instantiateHostModule(ctx context.Context) error {
	b := p.rt.NewHostModuleBuilder("tollgate")
	for _, h := range append(p.hostFuncs(), p.dispatchFuncs()...) {
		params := make([]api.ValueType, h.params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		for _, i := range h.i64s {
			params[i] = api.ValueTypeI64
		}
		b.NewFunctionBuilder().WithGoModuleFunction(h.fn, params, h.results).Export(h.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func (p *Plugin) hostFuncs() []hostFunc {
	return append(append(p.baseFuncs(), p.rewriteFuncs()...), p.answerFuncs()...)
}

func (p *Plugin) baseFuncs() []hostFunc {
	return []hostFunc{
		{"log", 3, nil, nil, p.hostLog},
		{"config", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			if !r.configuring {
				s[0] = code(codeNotAllowed)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.Body)
		}},
		{"fail", 2, nil, nil, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			r.RejectMessage = append(r.RejectMessage[:0], read(m, uint32(s[0]), min(uint32(s[1]), maxLogLine), "fail")...)
		}},
		{"request_header", 4, nil, i32, getHeader(func(r *Request, name []byte) []byte {
			if r.ClientHeader == nil {
				return nil
			}
			return r.ClientHeader.PeekBytes(name)
		})},
		{"set_request_header", 4, nil, i32, p.setHeader(PhaseRequest, func(r *Request) *[]Header { return &r.SetUpstreamHeaders })},
		{"response_header", 4, nil, i32, getHeader(func(r *Request, name []byte) []byte {
			if r.UpstreamHeader == nil {
				return nil
			}
			return r.UpstreamHeader.PeekBytes(name)
		})},
		{"set_response_header", 4, nil, i32, p.setHeader(PhaseRequest|PhaseResponseHeaders, func(r *Request) *[]Header { return &r.SetClientHeaders })},
		{"request_field", 3, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			var v []byte
			switch uint32(s[0]) {
			case fieldModel:
				v = r.Model
			case fieldEndpoint:
				v = r.Endpoint
			case fieldRequestID:
				v = r.RequestID
			case fieldBody:
				v = r.Body
			case fieldUpstream:
				v = r.Upstream
			default:
				s[0] = code(codeAbsent)
				return
			}
			s[0] = out(m, uint32(s[1]), uint32(s[2]), v)
		}},
		{"request_int", 1, nil, i64, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			v := int64(-1)
			switch uint32(s[0]) {
			case intStream:
				v = 0
				if r.Stream {
					v = 1
				}
			case intMaxTokens:
				v = r.MaxTokens
			case intMessages:
				v = r.Messages
			case intPromptTokens:
				v = r.PromptTokens
			case intBodyBytes:
				v = int64(len(r.Body))
			case intPromptChars:
				v = r.PromptChars
			default:
				v = r.boundInt(uint32(s[0]))
			}
			s[0] = uint64(v)
		}},
		{"tenant_field", 3, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			t := r.Tenant
			if t == nil {
				s[0] = code(codeAbsent)
				return
			}
			var v string
			switch uint32(s[0]) {
			case tenantID:
				v = t.ID
			case tenantKeyID:
				v = t.KeyID
			case tenantPlan:
				v = t.Plan
			case tenantStatus:
				v = t.Status
			default:
				s[0] = code(codeAbsent)
				return
			}
			s[0] = out(m, uint32(s[1]), uint32(s[2]), []byte(v))
		}},
		{"tenant_int", 1, nil, i64, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			t := r.Tenant
			v := int64(-1)
			if t != nil {
				switch uint32(s[0]) {
				case tenantRPM:
					v = t.RPM
				case tenantTPM:
					v = t.TPM
				case tenantBudgetMicros:
					v = t.BudgetMicros
				case tenantMaxTokens:
					v = t.MaxTokens
				case tenantPlanRPM:
					v = t.PlanRPM
				case tenantPlanTPM:
					v = t.PlanTPM
				case tenantKeyRPM:
					v = t.KeyRPM
				case tenantKeyTPM:
					v = t.KeyTPM
				}
			}
			s[0] = uint64(v)
		}},
		{"fact", 4, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			k := read(m, uint32(s[0]), uint32(s[1]), "fact key")
			for _, f := range r.facts {
				if bytes.Equal(f.Name, k) {
					s[0] = out(m, uint32(s[2]), uint32(s[3]), f.Value)
					return
				}
			}
			read(m, uint32(s[2]), uint32(s[3]), "output buffer")
			s[0] = code(codeAbsent)
		}},
		{"set_fact", 4, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			k := read(m, uint32(s[0]), uint32(s[1]), "fact key")
			v := read(m, uint32(s[2]), uint32(s[3]), "fact value")
			if len(k) == 0 || len(k) > maxFactKey || len(v) > maxFactValue {
				s[0] = code(codeInvalid)
				return
			}
			s[0] = code(r.setFact(k, v))
		}},
		{"state_get", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			st := r.state(inst.p.spec.Slot)
			if st == nil {
				read(m, uint32(s[0]), uint32(s[1]), "output buffer")
				s[0] = code(codeAbsent)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), st)
		}},
		{"state_set", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			v := read(m, uint32(s[0]), uint32(s[1]), "state")
			if len(v) > maxState {
				s[0] = code(codeInvalid)
				return
			}
			r.setState(inst.p.spec.Slot, v)
			s[0] = 0
		}},
		{"chunk_text", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			if inst.phase != PhaseChunk {
				s[0] = code(codeNotAllowed)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.chunkText)
		}},
		{"chunk_tool_calls", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			if inst.phase != PhaseChunk {
				s[0] = code(codeNotAllowed)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.ToolCalls)
		}},
		{"emit", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			v := read(m, uint32(s[0]), uint32(s[1]), "emit")
			if inst.phase != PhaseChunk {
				s[0] = code(codeNotAllowed)
				return
			}
			if len(r.emitted)+len(v) > maxEmit {
				s[0] = code(codeInvalid)
				return
			}
			r.emitted = append(r.emitted, v...)
			s[0] = 0
		}},
		{"set_finish_reason", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			v := read(m, uint32(s[0]), uint32(s[1]), "finish reason")
			if len(v) > 64 || !printable(v) {
				s[0] = code(codeInvalid)
				return
			}
			r.finishReason = append(r.finishReason[:0], v...)
			s[0] = 0
		}},
		{"reject", 7, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			status := int32(s[0])
			typ := read(m, uint32(s[1]), uint32(s[2]), "error type")
			cd := read(m, uint32(s[3]), uint32(s[4]), "error code")
			msg := read(m, uint32(s[5]), uint32(s[6]), "error message")
			if inst.phase&(PhaseRequest|PhaseResponseHeaders) == 0 {
				s[0] = code(codeNotAllowed)
				return
			}
			if status < 400 || status > 599 || len(typ) > 64 || len(cd) > 64 || len(msg) > maxLogLine {
				s[0] = code(codeInvalid)
				return
			}
			r.RejectStatus = int(status)
			r.RejectType = append(r.RejectType[:0], typ...)
			r.RejectCode = append(r.RejectCode[:0], cd...)
			r.RejectMessage = append(r.RejectMessage[:0], msg...)
			s[0] = 0
		}},
		{"usage", 1, nil, i64, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			v := int64(-1)
			switch uint32(s[0]) {
			case usagePrompt:
				v = r.PromptTokensUsed
			case usageCompletion:
				v = r.CompletionTokensUsed
			case usageStatus:
				v = int64(r.Status)
			case usageTextBytes:
				v = r.TextBytesSent
			case usageReported:
				v = 0
				if r.UsageReported {
					v = 1
				}
			}
			s[0] = uint64(v)
		}},
		{"metric_add", 3, []int{2}, i32, p.hostMetricAdd},
		{"call", 6, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			name := read(m, uint32(s[0]), uint32(s[1]), "service name")
			req := read(m, uint32(s[2]), uint32(s[3]), "service request")
			read(m, uint32(s[4]), uint32(s[5]), "output buffer")
			r.callResult = r.callResult[:0]
			if r.Services == nil {
				s[0] = code(codeUnavailable)
				return
			}
			// The guest's bytes are copied: a service must not keep
			// pointers into guest memory.
			// A service may wait on the network (Redis has its own
			// timeout): that time is not the guest's, so its deadline
			// clock stops meanwhile.
			paused, pausedAt := inst.pauseClock()
			res, err := r.Services.Call(r, inst.serviceName(name), append([]byte(nil), req...))
			inst.resumeClock(paused, pausedAt)
			if err != nil {
				p.log.Debug("service call failed", "service", string(name), "err", err)
				if errors.Is(err, ErrBadServiceRequest) {
					s[0] = code(codeInvalid)
				} else {
					s[0] = code(codeUnavailable)
				}
				return
			}
			r.callResult = append(r.callResult, res...)
			s[0] = out(m, uint32(s[4]), uint32(s[5]), r.callResult)
		}},
		{"skip_phases", 1, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			mask := Phase(uint32(s[0]))
			if mask&^(PhaseResponseHeaders|PhaseChunk|PhaseEnd) != 0 {
				s[0] = code(codeInvalid)
				return
			}
			if inst.phase == 0 || inst.phase == PhaseEnd {
				s[0] = code(codeNotAllowed)
				return
			}
			r.skip(inst.p.spec.Slot, mask)
			s[0] = 0
		}},
		{"call_result", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			_, r := current(ctx)
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.callResult)
		}},
		{"request_messages", 2, nil, i32, func(ctx context.Context, m api.Module, s []uint64) {
			inst, r := current(ctx)
			if r.configuring || inst.phase == 0 {
				s[0] = code(codeNotAllowed)
				return
			}
			s[0] = out(m, uint32(s[0]), uint32(s[1]), r.conversation())
		}},
	}
}

// getHeader is a header read: (name_ptr, name_len, buf, cap) → the value
// peek returns, or ABSENT. Both ranges are checked either way.
func getHeader(peek func(r *Request, name []byte) []byte) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		_, r := current(ctx)
		name := read(m, uint32(s[0]), uint32(s[1]), "header name")
		v := peek(r, name)
		if v == nil {
			read(m, uint32(s[2]), uint32(s[3]), "output buffer")
			s[0] = code(codeAbsent)
			return
		}
		s[0] = out(m, uint32(s[2]), uint32(s[3]), v)
	}
}

func (p *Plugin) hostLog(ctx context.Context, m api.Module, s []uint64) {
	inst, _ := current(ctx)
	msg := read(m, uint32(s[1]), min(uint32(s[2]), maxLogLine), "log message")
	level := slog.LevelInfo
	switch uint32(s[0]) {
	case 0:
		level = slog.LevelDebug
	case 2:
		level = slog.LevelWarn
	case 3:
		level = slog.LevelError
	}
	if p.log.Enabled(ctx, level) {
		p.log.Log(ctx, level, string(msg), "phase", inst.phase.String())
	}
}

func (p *Plugin) hostMetricAdd(ctx context.Context, m api.Module, s []uint64) {
	current(ctx)
	name := read(m, uint32(s[0]), uint32(s[1]), "metric name")
	if c, ok := p.stats.Events.Load(string(name)); ok {
		c.(*atomic.Int64).Add(int64(s[2]))
		s[0] = 0
		return
	}
	if !metricName(name) {
		s[0] = code(codeInvalid)
		return
	}
	n := 0
	p.stats.Events.Range(func(any, any) bool { n++; return true })
	if n >= maxMetrics {
		s[0] = code(codeInvalid)
		return
	}
	c, _ := p.stats.Events.LoadOrStore(string(name), new(atomic.Int64))
	c.(*atomic.Int64).Add(int64(s[2]))
	s[0] = 0
}

func (p *Plugin) setHeader(phases Phase, list func(*Request) *[]Header) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, s []uint64) {
		inst, r := current(ctx)
		name := read(m, uint32(s[0]), uint32(s[1]), "header name")
		val := read(m, uint32(s[2]), uint32(s[3]), "header value")
		if inst.phase&phases == 0 {
			s[0] = code(codeNotAllowed)
			return
		}
		if !validHeader(name, val) {
			s[0] = code(codeInvalid)
			return
		}
		addHeader(r, list(r), name, val)
		s[0] = 0
	}
}

// validHeader accepts RFC 9110 token names (except framing headers the
// gateway owns) and values without CR, LF or NUL, so a plugin cannot
// inject headers or split a response.
func validHeader(name, val []byte) bool {
	if len(name) == 0 || len(name)+len(val) > maxHeaderSize {
		return false
	}
	for _, c := range name {
		if !tokenChar(c) {
			return false
		}
	}
	switch string(bytes.ToLower(name)) {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer":
		return false
	}
	for _, c := range val {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}

func tokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

func metricName(b []byte) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
