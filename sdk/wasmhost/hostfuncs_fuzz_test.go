package wasmhost

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// fuzzMemory is a guest's linear memory as the host functions see it:
// Read has wazero's semantics (a range past the end is refused, the slice
// is capped at the range). Host functions use nothing else of api.Memory;
// a call to another method panics, and the fuzzer reports it.
type fuzzMemory struct {
	api.Memory
	buf []byte
}

func (m *fuzzMemory) Size() uint32 { return uint32(len(m.buf)) }

func (m *fuzzMemory) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.buf)) {
		return nil, false
	}
	return m.buf[off : off+n : off+n], true
}

type fuzzModule struct {
	api.Module
	mem *fuzzMemory
}

func (m fuzzModule) Memory() api.Memory { return m.mem }

// fuzzServices answers `call`: echo returns the request, bad and down the
// two kinds of failure, anything else is no service.
type fuzzServices struct{}

func (fuzzServices) Call(_ *Request, name string, req []byte) ([]byte, error) {
	switch name {
	case "echo":
		return req, nil
	case "bad":
		return nil, ErrBadServiceRequest
	case "down":
		return nil, errors.New("down")
	}
	return nil, ErrNoService
}

// outWindow is, per host function that writes guest memory, the indexes of
// its (buf, cap) parameters; the others never write.
var outWindow = map[string][2]int{
	"config": {0, 1}, "request_header": {2, 3}, "response_header": {2, 3}, "request_field": {1, 2},
	"tenant_field": {1, 2}, "fact": {2, 3}, "state_get": {0, 1}, "chunk_text": {0, 1},
	"chunk_tool_calls": {0, 1}, "call": {4, 5}, "call_result": {0, 1}, "request_messages": {0, 1},
	"call_response": {0, 1}, "call_response_header": {2, 3},
}

// fuzzPhases are the phases a fuzzed call runs in; 0 is on_configure.
var fuzzPhases = [...]Phase{0, PhaseRequest, PhaseResponseHeaders, PhaseChunk, PhaseEnd}

// FuzzHostFunctions calls the ABI's host functions the way a hostile guest
// could: a program of calls, each naming a function and its raw i32/i64
// arguments (pointers, lengths, field ids, header names and values, verdict
// payloads), over a fuzzed guest memory, on one request. The host must
// never panic except with its guest fault (which traps the guest), never
// write guest memory outside the output buffer a call names, and never
// keep what its limits refuse: plugin-set headers stay injection-free and
// a plugin's rejection renders as valid JSON.
func FuzzHostFunctions(f *testing.F) {
	p := &Plugin{spec: Spec{Name: "fuzz"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), stats: &Stats{}}
	funcs := append(p.hostFuncs(), p.dispatchFuncs()...)
	index := map[string]byte{}
	for i, h := range funcs {
		index[h.name] = byte(i)
	}
	// A call is the function's index and 4 bytes per parameter.
	call := func(name string, params ...uint32) []byte {
		b := []byte{index[name]}
		for _, v := range params {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		return b
	}
	mem := []byte("X-Tenant\x00x-good\x00value\x00a\r\nInjected: 1\x00echo\x00model\x00\xff\xff\xff\xff")
	mem = append(mem, make([]byte, 256)...)
	seeds := []struct {
		phase byte
		prog  [][]byte
	}{
		{0, [][]byte{call("config", 100, 64)}},
		{1, [][]byte{call("request_header", 0, 8, 100, 32), call("request_field", fieldModel, 100, 16), call("request_int", intMaxTokens)}},
		{1, [][]byte{call("set_request_header", 9, 6, 16, 5), call("set_request_header", 9, 6, 22, 15), call("set_response_header", 0, 8, 16, 5)}},
		{1, [][]byte{call("set_fact", 9, 6, 16, 5), call("fact", 9, 6, 100, 8), call("state_set", 16, 5), call("state_get", 100, 2)}},
		{1, [][]byte{call("reject", 429, 9, 6, 16, 5, 22, 15), call("fail", 22, 15), call("tenant_field", tenantID, 100, 8), call("tenant_int", tenantRPM)}},
		{1, [][]byte{call("call", 38, 4, 16, 5, 100, 2), call("call_result", 100, 16), call("skip_phases", 12)}},
		{2, [][]byte{call("response_header", 0, 8, 100, 16), call("set_response_header", 9, 6, 0xFFFFFF00, 4096)}},
		{3, [][]byte{call("chunk_text", 100, 8), call("emit", 16, 5), call("set_finish_reason", 43, 5), call("chunk_tool_calls", 100, 8)}},
		{4, [][]byte{call("usage", usagePrompt), call("metric_add", 9, 6), call("log", 1, 22, 15)}},
		{0, [][]byte{call("request_messages", 100, 64)}},
		{1, [][]byte{call("request_messages", 100, 8), call("request_messages", 100, 128)}},
		{3, [][]byte{call("request_messages", 0xFFFFFF00, 4096)}},
		{1, [][]byte{call("dispatch", 38, 4, 16, 5), call("dispatch", 38, 4, 0xFFFFFF00, 4096), call("call_response", 100, 8)}},
		// Phases from len(fuzzPhases) on run inside on_call_response.
		{6, [][]byte{call("call_response", 100, 2), call("call_response", 100, 16), call("call_response_header", 0, 8, 100, 16)}},
		{8, [][]byte{call("call_response_header", 9, 6, 0xFFFFFF00, 4096), call("dispatch", 38, 4, 16, 5)}},
	}
	for _, s := range seeds {
		f.Add(s.phase, bytes.Join(s.prog, nil), mem)
	}
	f.Fuzz(func(t *testing.T, phase byte, prog []byte, guest []byte) {
		if len(guest) > 1<<16 {
			guest = guest[:1<<16]
		}
		m := fuzzModule{mem: &fuzzMemory{buf: bytes.Clone(guest)}}
		r := fuzzRequest()
		defer ReleaseRequest(r)
		inst := &instance{p: p, req: r, phase: fuzzPhases[int(phase)%len(fuzzPhases)]}
		r.configuring = inst.phase == 0
		if int(phase)/len(fuzzPhases)%2 == 1 && inst.phase != 0 {
			r.calls.current = &Call{Service: "echo"}
			r.calls.result = CallResult{Status: 200, Body: []byte("response body"),
				Header: []Header{{Name: []byte("X-Tenant"), Value: []byte("resp")}}}
		}
		ctx := context.WithValue(context.Background(), instanceKey{}, inst)
		before := make([]byte, len(m.mem.buf))
		for calls := 0; len(prog) > 0 && calls < 16; calls++ {
			h := funcs[int(prog[0])%len(funcs)]
			prog = prog[1:]
			stack := make([]uint64, max(h.params, len(h.results)))
			for i := 0; i < h.params; i++ {
				var b [4]byte
				prog = prog[copy(b[:], prog):]
				stack[i] = uint64(binary.LittleEndian.Uint32(b[:]))
			}
			for _, i := range h.i64s { // an i64: sign-extend for negative values
				stack[i] = uint64(int64(int32(stack[i])))
			}
			args := append([]uint64(nil), stack...)
			copy(before, m.mem.buf)
			if trapped := callHost(t, h, ctx, m, stack); trapped {
				return // the guest is trapped and its instance discarded
			}
			checkWrites(t, h.name, args, before, m.mem.buf)
			checkRequest(t, p, r)
			if n := r.calls.outstanding(); n > maxOutstandingCalls {
				t.Fatalf("%d calls outstanding, over the cap", n)
			}
		}
	})
}

// fuzzRequest is a request as the gateway fills it, with a tenant, headers
// both ways, a chunk and its tool calls.
func fuzzRequest() *Request {
	r := AcquireRequest()
	r.Model, r.Endpoint, r.RequestID = []byte("mock-1"), []byte("chat/completions"), []byte("req-1")
	r.Body, r.Upstream = []byte(`{"model":"mock-1","system":"s","messages":[{"role":"user","content":"hi"}]}`), []byte("up")
	r.ClientHeader = Headers{{Name: []byte("X-Tenant"), Value: []byte("acme")}, {Name: []byte("Authorization"), Value: []byte("Bearer k")}}
	r.UpstreamHeader = Headers{{Name: []byte("X-Tenant"), Value: []byte("up")}}
	r.Tenant = &Tenant{ID: "acme", KeyID: "k1", Plan: "p", Status: "active", RPM: 60}
	r.Services = fuzzServices{}
	r.chunkText = append(r.chunkText[:0], "hello"...)
	r.ToolCalls = []byte(`[{"index":0}]`)
	return r
}

// callHost runs one host function and reports whether it trapped the
// guest; any other panic fails the test.
func callHost(t *testing.T, h hostFunc, ctx context.Context, m fuzzModule, stack []uint64) (trapped bool) {
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(guestFault); !ok {
				t.Fatalf("%s panicked: %v", h.name, v)
			}
			trapped = true
		}
	}()
	h.fn(ctx, m, stack)
	return false
}

// checkWrites fails when a call changed guest memory outside the output
// buffer it named.
func checkWrites(t *testing.T, name string, args []uint64, before, after []byte) {
	lo, hi := uint64(0), uint64(0)
	if w, ok := outWindow[name]; ok {
		lo = uint64(uint32(args[w[0]]))
		hi = lo + uint64(uint32(args[w[1]]))
	}
	for i := range after {
		if before[i] != after[i] && (uint64(i) < lo || uint64(i) >= hi) {
			t.Fatalf("%s(%v) wrote guest memory at %#x, outside its output buffer [%#x, %#x)", name, args, i, lo, hi)
		}
	}
}

// checkRequest checks what the guest left in the request against the
// limits the host promises.
func checkRequest(t *testing.T, p *Plugin, r *Request) {
	for _, hs := range [][]Header{r.SetUpstreamHeaders, r.SetClientHeaders} {
		for _, h := range hs {
			if !validHeader(h.Name, h.Value) || bytes.ContainsAny(h.Value, "\r\n\x00") || bytes.ContainsAny(h.Name, "\r\n\x00: ") {
				t.Fatalf("the host kept header %q: %q", h.Name, h.Value)
			}
		}
	}
	if len(r.facts) > maxFacts || len(r.emitted) > maxEmit || len(r.state(0)) > maxState {
		t.Fatalf("limits passed: %d facts, %d bytes emitted, %d bytes of state", len(r.facts), len(r.emitted), len(r.state(0)))
	}
	if r.RejectStatus != 0 && (r.RejectStatus < 400 || r.RejectStatus > 599) {
		t.Fatalf("reject status %d", r.RejectStatus)
	}
	if len(r.finishReason) > 64 {
		t.Fatalf("finish reason of %d bytes", len(r.finishReason))
	}
	// The gateway renders a rejection as an OpenAI-style error body; its
	// fields must be within the ABI's limits for that (reject in ABI.md).
	rej := rejection(p, r)
	if len(rej.Type) > 64 || len(rej.Code) > 64 || len(rej.Message) > 4<<10 {
		t.Fatalf("a rejection over the limits: type %d, code %d, message %d bytes", len(rej.Type), len(rej.Code), len(rej.Message))
	}
}
