//go:build !wasip1

// The SDK's logic against a fake host; on wasip1 the real imports stand
// in its place, so these tests build only off wasm.

package sdk

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// fakeHost is an in-memory host for the SDK's logic. It follows the ABI's
// buffer protocol and counts calls.
type fakeHost struct {
	calls      int
	logs       []string
	cfg        string
	failed     string
	reqHeaders map[string]string
	setUp      map[string]string
	setClient  map[string]string
	respHdrs   map[string]string
	fields     map[int32]string
	ints       map[int32]int64
	tenant     map[int32]string
	tenantInts map[int32]int64
	skipped    Phases
	facts      map[string]string
	state      []byte
	hasState   bool
	text       string
	toolCalls  string
	messages   string
	emitted    []byte
	finish     string
	rejected   string
	answer     string   // respond's status and body
	events     []string // respond_event's
	usages     map[int32]int64
	metrics    map[string]int64
	services   map[string]string
	result     string
	notAllowed bool // every getter answers NOT_ALLOWED
}

func newFake() *fakeHost {
	return &fakeHost{reqHeaders: map[string]string{}, setUp: map[string]string{}, setClient: map[string]string{},
		respHdrs: map[string]string{}, fields: map[int32]string{}, ints: map[int32]int64{}, facts: map[string]string{},
		usages: map[int32]int64{}, metrics: map[string]int64{}, services: map[string]string{}}
}

func install(t testing.TB) *fakeHost {
	h := newFake()
	testHost = h
	saved := handlers
	t.Cleanup(func() { testHost, handlers = nil, saved })
	return h
}

func (h *fakeHost) out(buf []byte, v string, ok bool) int32 {
	h.calls++
	if h.notAllowed {
		return int32(ErrNotAllowed)
	}
	if !ok {
		return int32(ErrAbsent)
	}
	if len(v) > len(buf) {
		return int32(len(v))
	}
	return int32(copy(buf, v))
}

func (h *fakeHost) log(level int32, msg string) {
	h.logs = append(h.logs, Level(level).name()+" "+msg)
}
func (h *fakeHost) config(buf []byte) int32 { return h.out(buf, h.cfg, true) }
func (h *fakeHost) fail(msg string)         { h.failed = msg }
func (h *fakeHost) requestHeader(name string, buf []byte) int32 {
	v, ok := h.reqHeaders[strings.ToLower(name)]
	return h.out(buf, v, ok)
}
func (h *fakeHost) setRequestHeader(name, value string) int32 {
	if strings.ContainsAny(name+value, "\r\n\x00") || strings.EqualFold(name, "host") {
		return int32(ErrInvalid)
	}
	h.setUp[name] = value
	return 0
}
func (h *fakeHost) responseHeader(name string, buf []byte) int32 {
	v, ok := h.respHdrs[strings.ToLower(name)]
	return h.out(buf, v, ok)
}
func (h *fakeHost) setResponseHeader(name, value string) int32 { h.setClient[name] = value; return 0 }
func (h *fakeHost) requestField(field int32, buf []byte) int32 {
	v, ok := h.fields[field]
	return h.out(buf, v, ok)
}
func (h *fakeHost) requestInt(field int32) int64 {
	if v, ok := h.ints[field]; ok {
		return v
	}
	return -1
}
func (h *fakeHost) tenantField(field int32, buf []byte) int32 {
	v, ok := h.tenant[field]
	return h.out(buf, v, ok)
}
func (h *fakeHost) tenantInt(field int32) int64 {
	if v, ok := h.tenantInts[field]; ok {
		return v
	}
	return -1
}
func (h *fakeHost) fact(key string, buf []byte) int32 {
	v, ok := h.facts[key]
	return h.out(buf, v, ok)
}
func (h *fakeHost) setFact(key, value string) int32 {
	if len(key) == 0 || len(key) > 64 {
		return int32(ErrInvalid)
	}
	h.facts[key] = value
	return 0
}
func (h *fakeHost) stateGet(buf []byte) int32 { return h.out(buf, string(h.state), h.hasState) }
func (h *fakeHost) stateSet(b []byte) int32 {
	h.state, h.hasState = append([]byte(nil), b...), true
	return 0
}
func (h *fakeHost) chunkText(buf []byte) int32 { return h.out(buf, h.text, true) }
func (h *fakeHost) chunkToolCalls(buf []byte) int32 {
	return h.out(buf, h.toolCalls, true)
}
func (h *fakeHost) requestMessages(buf []byte) int32 { return h.out(buf, h.messages, true) }
func (h *fakeHost) emit(text string) int32 {
	if len(h.emitted)+len(text) > 1<<20 {
		return int32(ErrInvalid)
	}
	h.emitted = append(h.emitted, text...)
	return 0
}
func (h *fakeHost) setFinishReason(reason string) int32 { h.finish = reason; return 0 }
func (h *fakeHost) reject(status int32, typ, code, msg string) int32 {
	if status < 400 || status > 599 {
		return int32(ErrInvalid)
	}
	h.rejected = itoa(int64(status)) + " " + typ + " " + code + " " + msg
	return 0
}
func (h *fakeHost) respond(status int32, body []byte) int32 {
	if status < 200 || status > 599 {
		return int32(ErrInvalid)
	}
	if h.notAllowed {
		return int32(ErrNotAllowed)
	}
	h.answer = itoa(int64(status)) + " " + string(body)
	return 0
}
func (h *fakeHost) respondEvent(data []byte) int32 {
	if len(data) == 0 || string(data) == "[DONE]" {
		return int32(ErrInvalid)
	}
	h.events = append(h.events, string(data))
	return 0
}
func (h *fakeHost) usage(field int32) int64 {
	if v, ok := h.usages[field]; ok {
		return v
	}
	return -1
}
func (h *fakeHost) metricAdd(name string, v int64) int32 { h.metrics[name] += v; return 0 }
func (h *fakeHost) call(service string, req, buf []byte) int32 {
	res, ok := h.services[service]
	if !ok {
		h.calls++
		return int32(ErrUnavailable)
	}
	h.result = strings.ReplaceAll(res, "$REQ", string(req))
	return h.out(buf, h.result, true)
}
func (h *fakeHost) callResult(buf []byte) int32 { return h.out(buf, h.result, true) }

func (h *fakeHost) skipPhases(mask uint32) int32 {
	h.skipped |= Phases(mask)
	return 0
}

func (l Level) name() string { return [...]string{"debug", "info", "warn", "error"}[l] }

func TestPhases(t *testing.T) {
	install(t)
	handlers = struct {
		configure       func(cfg []byte) error
		request         func(*Request) Verdict
		responseHeaders func(*Response) Verdict
		chunk           func(*Chunk) Verdict
		end             func(*End)
		callResponse    func(*CallResponse) Verdict
	}{}
	if p := registeredPhases(); p != 0 {
		t.Fatal(p)
	}
	OnRequest(func(*Request) Verdict { return Continue })
	OnEnd(func(*End) {})
	if p := registeredPhases(); p != PhaseRequest|PhaseEnd {
		t.Fatal(p)
	}
	OnRequest(nil)
	OnChunk(func(*Chunk) Verdict { return Hold })
	OnResponseHeaders(func(*Response) Verdict { return Reject })
	if p := registeredPhases(); p != PhaseResponseHeaders|PhaseChunk|PhaseEnd {
		t.Fatal(p)
	}
	// A phase without a handler continues.
	if v := dispatchRequest(1); v != Continue {
		t.Fatal(v)
	}
	if v := dispatchChunk(1, 0, 0); v != Hold {
		t.Fatal(v)
	}
}

func TestConfigure(t *testing.T) {
	h := install(t)
	handlers.configure = nil
	if dispatchConfigure(2) != 0 {
		t.Fatal("no handler must accept")
	}
	var got []byte
	OnConfigure(func(cfg []byte) error { got = cfg; return nil })
	h.cfg = `{"deny":["x"]}` + strings.Repeat(" ", 1000)
	if r := dispatchConfigure(int32(len(h.cfg))); r != 0 || string(got) != h.cfg || h.calls != 1 {
		t.Fatalf("%d %q %d calls", r, got, h.calls)
	}
	// A config_len that is too small is fixed by the retry.
	if r := dispatchConfigure(3); r != 0 || string(got) != h.cfg {
		t.Fatal(r)
	}
	OnConfigure(func(cfg []byte) error { return errors.New(`deny[1]: bad regexp`) })
	if r := dispatchConfigure(int32(len(h.cfg))); r != 1 || h.failed != "deny[1]: bad regexp" {
		t.Fatal(r, h.failed)
	}
}

func TestRequest(t *testing.T) {
	h := install(t)
	h.fields[fieldModel] = "gpt-4o"
	h.fields[fieldEndpoint] = "chat/completions"
	h.fields[fieldRequestID] = "req-1"
	h.fields[fieldUpstream] = "openai"
	h.fields[fieldBody] = `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
	h.ints[intStream] = 1
	h.ints[intMaxTokens] = 100
	h.ints[intMessages] = 1
	h.ints[intPromptTokens] = 1250
	h.reqHeaders["authorization"] = "Bearer k"
	h.facts["tenant.plan"] = "pro"
	var verdict Verdict
	OnRequest(func(r *Request) Verdict {
		if r.Model() != "gpt-4o" || r.Endpoint() != "chat/completions" || r.RequestID() != "req-1" || r.Upstream() != "openai" {
			t.Error("fields")
		}
		if !r.Stream() || r.MessageCount() != 1 || r.PromptTokensEstimate() != 1250 {
			t.Error("ints")
		}
		if n, ok := r.MaxTokens(); n != 100 || !ok {
			t.Error("max tokens")
		}
		if v, ok := r.Header("Authorization"); v != "Bearer k" || !ok {
			t.Error("header", v, ok)
		}
		if _, ok := r.Header("X-Missing"); ok {
			t.Error("absent header")
		}
		before := h.calls
		if b := r.Body(); string(b) != h.fields[fieldBody] {
			t.Error("body")
		}
		r.Body()
		if h.calls-before != 2 { // one too-small try, one read; the second Body is cached
			t.Error("body calls", h.calls-before)
		}
		if v, ok := r.Fact("tenant.plan"); v != "pro" || !ok {
			t.Error("fact")
		}
		if err := r.SetFact("", "x"); err != ErrInvalid {
			t.Error("set fact", err)
		}
		if err := r.SetHeader("Host", "x"); !errors.Is(err, ErrInvalid) {
			t.Error("set header", err)
		}
		if err := r.SetHeader("X-Up", "1"); err != nil {
			t.Error(err)
		}
		r.SetResponseHeader("X-Guard", "checked")
		if _, ok := r.Tenant(); ok {
			t.Error("tenant")
		}
		return r.Reject(429, "", "rate_limited", "slow down")
	})
	verdict = dispatchRequest(7)
	if verdict != Reject || h.rejected != "429  rate_limited slow down" || h.setUp["X-Up"] != "1" || h.setClient["X-Guard"] != "checked" {
		t.Fatalf("%v %q %v", verdict, h.rejected, h.setUp)
	}
	// A bad status is logged, and the request still rejected.
	OnRequest(func(r *Request) Verdict { return r.Reject(200, "", "", "") })
	if v := dispatchRequest(7); v != Reject || len(h.logs) != 1 || !strings.Contains(h.logs[0], "reject(200)") {
		t.Fatal(v, h.logs)
	}
	h.tenant = map[int32]string{tenantID: "t1", tenantPlan: "pro"}
	h.tenantInts = map[int32]int64{tenantRPM: 60}
	OnRequest(func(r *Request) Verdict {
		tn, ok := r.Tenant()
		if !ok || tn.ID != "t1" || tn.Plan != "pro" || tn.KeyID != "" || tn.RPM != 60 || tn.TPM != -1 {
			t.Errorf("%+v", tn)
		}
		return Continue
	})
	dispatchRequest(7)
}

func TestBrokenHostPanics(t *testing.T) {
	h := install(t)
	h.notAllowed = true
	OnRequest(func(r *Request) Verdict { r.Body(); return Continue })
	defer func() {
		if e := recover(); e == nil || !strings.Contains(e.(string), "request_field(BODY): tollgate: not allowed") {
			t.Fatal(e)
		}
	}()
	dispatchRequest(1)
}

func TestChunk(t *testing.T) {
	h := install(t)
	h.text = "hello"
	OnChunk(func(c *Chunk) Verdict {
		if !c.HasText() || c.IsDone() || !c.Flags().Has(ChunkText|ChunkRole) || c.Len() != 5 {
			t.Error("flags")
		}
		if string(c.Bytes()) != "hello" || c.Text() != "hello" {
			t.Error("text")
		}
		return c.Replace(strings.ToUpper(c.Text()))
	})
	if v := dispatchChunk(1, 5, uint32(ChunkText|ChunkRole)); v != Replace || string(h.emitted) != "HELLO" {
		t.Fatal(v, h.emitted)
	}
	// Longer than the buffer: the text is read in one call, sized by text_len.
	h.text = strings.Repeat("y", 10000)
	before := h.calls
	OnChunk(func(c *Chunk) Verdict {
		if string(c.Bytes()) != h.text {
			t.Error("long text")
		}
		return c.Stop("[removed]", "stop")
	})
	h.emitted = h.emitted[:0]
	if v := dispatchChunk(1, int32(len(h.text)), uint32(ChunkText)); v != Stop || string(h.emitted) != "[removed]" || h.finish != "stop" || h.calls-before != 1 {
		t.Fatal(v, h.emitted, h.finish, h.calls-before)
	}
	// No text: no host call.
	before = h.calls
	OnChunk(func(c *Chunk) Verdict {
		if c.Bytes() != nil || c.Text() != "" {
			t.Error("empty")
		}
		return Continue
	})
	dispatchChunk(1, 0, uint32(ChunkDone))
	if h.calls != before {
		t.Fatal("host called for empty text")
	}
}

func TestChunkTextAllocs(t *testing.T) {
	h := install(t)
	h.text = "a streamed token or three"
	var n int
	OnChunk(func(c *Chunk) Verdict {
		n += len(c.Bytes())
		c.EmitBytes(c.Bytes())
		return Replace
	})
	allocs := testing.AllocsPerRun(1000, func() {
		h.emitted = h.emitted[:0]
		dispatchChunk(1, int32(len(h.text)), uint32(ChunkText))
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per chunk", allocs)
	}
}

func TestStateAndEnd(t *testing.T) {
	h := install(t)
	OnChunk(func(c *Chunk) Verdict {
		st := c.State()
		n := 0
		if st != nil {
			n = int(st[0])
		}
		c.SetState([]byte{byte(n + 1)})
		return Continue
	})
	for range 3 {
		dispatchChunk(1, 0, 0)
	}
	h.usages[usagePrompt] = 10
	h.usages[usageCompletion] = 20
	h.usages[usageStatus] = 200
	h.usages[usageReported] = 1
	OnEnd(func(e *End) {
		u := e.Usage()
		if u.PromptTokens != 10 || u.CompletionTokens != 20 || u.Status != 200 || u.TextBytes != -1 || !u.Reported {
			t.Errorf("%+v", u)
		}
		if !e.Completed() || e.Stopped() || !e.Flags().Has(EndCompleted) {
			t.Error("flags")
		}
		MetricAdd("chunks", int64(e.State()[0]))
	})
	dispatchEnd(1, uint32(EndCompleted))
	if h.metrics["chunks"] != 3 {
		t.Fatal(h.metrics)
	}
}

func TestCall(t *testing.T) {
	h := install(t)
	h.services["echo"] = `{"got":$REQ}`
	res, err := Call("echo", []byte(`{"a":1}`))
	if err != nil || string(res) != `{"got":{"a":1}}` {
		t.Fatal(string(res), err)
	}
	// A result bigger than the buffer is fetched with call_result; the call
	// is not repeated.
	big := `{"x":"` + strings.Repeat("z", 9000) + `"}`
	h.services["big"] = big
	before := h.calls
	res, err = Call("big", nil)
	if err != nil || string(res) != big || h.calls-before != 2 {
		t.Fatal(len(res), err, h.calls-before)
	}
	if _, err := Call("nope", nil); err != ErrUnavailable {
		t.Fatal(err)
	}
}

func TestAppendCall(t *testing.T) {
	h := install(t)
	h.services["echo"] = `{"got":$REQ}`
	buf := []byte("prefix:")
	res, err := AppendCall(buf, "echo", []byte(`1`))
	if err != nil || string(res) != `prefix:{"got":1}` {
		t.Fatal(string(res), err)
	}
	// Reused, the buffer takes any result that fits without an allocation
	// (the fake host allocates for a request: none here).
	h.services["const"] = `{"got":2}`
	if n := testing.AllocsPerRun(100, func() { res, err = AppendCall(res[:0], "const", nil) }); n != 0 || string(res) != `{"got":2}` {
		t.Fatalf("%v allocations, result %q", n, res)
	}
	// A result longer than the spare capacity: one call, then call_result.
	big := strings.Repeat("z", 9000)
	h.services["big"] = big
	before := h.calls
	res, err = AppendCall(res[:3], "big", nil)
	if err != nil || string(res) != `{"g`+big || h.calls-before != 2 {
		t.Fatal(len(res), err, h.calls-before)
	}
	if res, err = AppendCall(res[:0], "nope", nil); err != ErrUnavailable || len(res) != 0 {
		t.Fatal(string(res), err)
	}
}

func TestAppendHeader(t *testing.T) {
	h := install(t)
	h.reqHeaders["authorization"] = "Bearer k1"
	h.reqHeaders["x-long"] = strings.Repeat("v", 600)
	OnRequest(func(r *Request) Verdict {
		b, ok := r.AppendHeader([]byte("a="), "Authorization")
		if !ok || string(b) != "a=Bearer k1" {
			t.Errorf("%q %v", b, ok)
		}
		if b, ok := r.AppendHeader(b[:0], "X-Missing"); ok || len(b) != 0 {
			t.Errorf("absent: %q %v", b, ok)
		}
		if b, ok = r.AppendHeader(nil, "X-Long"); !ok || string(b) != h.reqHeaders["x-long"] {
			t.Errorf("long: %d %v", len(b), ok)
		}
		// (Lower case: the fake host lowers a name with an allocation.)
		if n := testing.AllocsPerRun(100, func() { b, _ = r.AppendHeader(b[:0], "authorization") }); n != 0 {
			t.Errorf("%v allocations", n)
		}
		return Continue
	})
	dispatchRequest(1)
}

func TestHasTenant(t *testing.T) {
	h := install(t)
	OnRequest(func(r *Request) Verdict {
		if r.HasTenant() {
			t.Error("no tenant yet")
		}
		h.tenant = map[int32]string{tenantID: "t1"}
		if !r.HasTenant() {
			t.Error("tenant t1 not seen")
		}
		return Continue
	})
	dispatchRequest(1)
}

// Strings read from the host are interned: a value equal to a recent one is
// the same string, and reading it allocates nothing.
func TestReadStringInterns(t *testing.T) {
	h := install(t)
	h.fields[fieldModel] = "gpt-4o"
	OnRequest(func(r *Request) Verdict {
		first := r.Model()
		if n := testing.AllocsPerRun(100, func() {
			if r.Model() != "gpt-4o" {
				t.Error("model changed")
			}
		}); n != 0 {
			t.Errorf("%v allocations reading a repeated value", n)
		}
		// Seventeen other values push it out; it is read right again.
		for i := range 17 {
			h.fields[fieldModel] = "m" + strconv.Itoa(i)
			if got := r.Model(); got != h.fields[fieldModel] {
				t.Errorf("got %q, want %q", got, h.fields[fieldModel])
			}
		}
		h.fields[fieldModel] = "gpt-4o"
		if r.Model() != first || r.Model() != "gpt-4o" {
			t.Error("model after eviction")
		}
		h.fields[fieldModel] = ""
		if r.Model() != "" {
			t.Error("empty model")
		}
		// A long value is copied, not kept.
		long := strings.Repeat("m", maxIntern+1)
		h.fields[fieldModel] = long
		if r.Model() != long {
			t.Error("long model")
		}
		for _, s := range recent.s {
			if len(s) > maxIntern {
				t.Errorf("a %d-byte value was interned", len(s))
			}
		}
		return Continue
	})
	dispatchRequest(1)
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		n    int32
		want error
	}{{0, nil}, {5, nil}, {-1, ErrAbsent}, {-2, ErrInvalid}, {-3, ErrNotAllowed}, {-4, ErrUnavailable}} {
		if got := status(c.n); got != c.want {
			t.Errorf("%d: %v", c.n, got)
		}
	}
	if err := status(-9); err.Error() != "tollgate: host error -9" || !errors.Is(err, Error(-9)) {
		t.Error(err)
	}
	if Verdict(10).String() != "verdict(10)" || Stop.String() != "stop" || Respond.String() != "respond" {
		t.Error("verdict names")
	}
}

func TestLogf(t *testing.T) {
	h := install(t)
	Logf(LevelWarn, "%s=%d %q %v %x %t %v 100%% %v %d", "k", 42, "q", errors.New("e"), "hi", true, 1.5, Continue, -3)
	Logf(LevelInfo, "%d %s", 1)
	Logf(LevelInfo, "x", 1)
	Logf(LevelInfo, "%v", struct{}{})
	want := []string{
		`warn k=42 "q" e 6869 true 1.5 100% continue -3`,
		`info 1 %!s(MISSING)`,
		`info x%!(EXTRA)`,
		`info %!v(unsupported)`,
	}
	if strings.Join(h.logs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%q", h.logs)
	}
}

func TestNoHost(t *testing.T) {
	defer func() {
		if e := recover(); e != "sdk: only available in a wasm plugin" {
			t.Fatal(e)
		}
	}()
	Log(LevelInfo, "x")
}

func BenchmarkChunkBytes(b *testing.B) {
	h := install(b)
	h.text = "a streamed token"
	OnChunk(func(c *Chunk) Verdict {
		if len(c.Bytes()) == 0 {
			b.Fatal("empty")
		}
		return Continue
	})
	b.ReportAllocs()
	for b.Loop() {
		dispatchChunk(1, int32(len(h.text)), uint32(ChunkText))
	}
}

func TestChunkToolCalls(t *testing.T) {
	h := install(t)
	h.toolCalls = "0 7 8\nget_url{\"u\":\"ht\n1 0 10\n\ttp\\n\"}\n x\n"
	var got []ToolCallDelta
	var raw string
	calls := 0
	OnChunk(func(c *Chunk) Verdict {
		before := h.calls
		raw = string(c.ToolCalls())
		got = c.ToolCallDeltas(got[:0])
		calls = h.calls - before
		return Continue
	})
	dispatchChunk(1, 0, uint32(ChunkToolCalls))
	if raw != h.toolCalls || calls != 1 {
		t.Fatalf("ToolCalls = %q after %d host calls, want %q after 1", raw, calls, h.toolCalls)
	}
	want := []ToolCallDelta{{0, []byte("get_url"), []byte(`{"u":"ht`)}, {1, []byte{}, []byte("\ttp\\n\"}\n x")}}
	if len(got) != len(want) {
		t.Fatalf("got %d deltas, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Index != want[i].Index || string(got[i].Name) != string(want[i].Name) || string(got[i].Arguments) != string(want[i].Arguments) {
			t.Errorf("delta %d = {%d %q %q}, want {%d %q %q}", i, got[i].Index, got[i].Name, got[i].Arguments, want[i].Index, want[i].Name, want[i].Arguments)
		}
	}

	// Without the flag the host is not asked.
	before := h.calls
	dispatchChunk(1, 0, uint32(ChunkFinish))
	if raw != "" || len(got) != 0 || h.calls != before {
		t.Fatalf("without ChunkToolCalls: %q, %d deltas, %d host calls", raw, len(got), h.calls-before)
	}
}

func TestAppendToolCallDeltas(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		ok   bool
	}{
		{"empty", "", 0, true},
		{"one", "3 1 2\nfab\n", 1, true},
		{"negative index", "-1 0 0\n\n", 1, true},
		{"two", "0 0 1\na\n0 0 1\nb\n", 2, true},
		{"missing newline", "0 0 1\nab", 0, false},
		{"short", "0 0 5\nab\n", 0, false},
		{"no lengths", "0\n", 0, false},
		{"negative length", "0 -1 0\n\n", 0, false},
		{"garbage after", "0 0 0\n\nx", 1, false},
		{"huge", "0 99999999999 0\n\n", 0, false},
		{"leading zero", "0 01 0\na\n", 0, false},
		{"minus zero", "-0 0 0\n\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AppendToolCallDeltas(nil, []byte(tc.in))
			if len(got) != tc.n || ok != tc.ok {
				t.Fatalf("AppendToolCallDeltas(%q) = %d deltas, %v; want %d, %v", tc.in, len(got), ok, tc.n, tc.ok)
			}
		})
	}
}

func FuzzAppendToolCallDeltas(f *testing.F) {
	f.Add([]byte("0 7 9\nget_url{\"u\":\"ht\n1 0 2\nxy\n"))
	f.Add([]byte("0 0 0\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := AppendToolCallDeltas(nil, b)
		if !ok {
			return
		}
		// A well-formed value renders back to itself.
		var out []byte
		for _, d := range got {
			out = append(out, itoa(int64(d.Index))...)
			out = append(out, ' ')
			out = append(out, itoa(int64(len(d.Name)))...)
			out = append(out, ' ')
			out = append(out, itoa(int64(len(d.Arguments)))...)
			out = append(out, '\n')
			out = append(out, d.Name...)
			out = append(out, d.Arguments...)
			out = append(out, '\n')
		}
		if string(out) != string(b) {
			t.Fatalf("%q parsed and rendered is %q", b, out)
		}
	})
}

func TestRespond(t *testing.T) {
	h := install(t)
	OnRequest(func(r *Request) Verdict { return r.Respond(200, []byte(`{"object":"chat.completion"}`)) })
	if v := dispatchRequest(3); v != Respond || h.answer != `200 {"object":"chat.completion"}` {
		t.Fatal(v, h.answer)
	}
	// A refused answer is logged and the request goes upstream.
	OnRequest(func(r *Request) Verdict { return r.Respond(101, nil) })
	if v := dispatchRequest(3); v != Continue || len(h.logs) != 1 || !strings.Contains(h.logs[0], "respond(101)") {
		t.Fatal(v, h.logs)
	}
	OnRequest(func(r *Request) Verdict {
		for _, e := range []string{`{"a":1}`, `{"b":2}`} {
			if err := r.RespondEvent([]byte(e)); err != nil {
				t.Error(err)
			}
		}
		if err := r.RespondEvent([]byte("[DONE]")); !errors.Is(err, ErrInvalid) {
			t.Error("DONE accepted:", err)
		}
		return Respond
	})
	if v := dispatchRequest(3); v != Respond || strings.Join(h.events, "|") != `{"a":1}|{"b":2}` {
		t.Fatal(v, h.events)
	}
}

func TestToolCall(t *testing.T) {
	tests := []struct {
		endpoint, model string
		server, tool    string
		ok              bool
	}{
		{"mcp", "mcp:files/read_file", "files", "read_file", true},
		{"mcp", "mcp:files/ns/tool", "files", "ns/tool", true},
		{"mcp", "mcp:files", "", "", false}, // not a tools/call
		{"mcp", "mcp:/tool", "", "", false},
		{"mcp", "mcp:files/", "", "", false},
		{"mcp", "gpt-4o", "", "", false},
		{"chat/completions", "mcp:files/read_file", "", "", false},
	}
	for _, tt := range tests {
		h := install(t)
		h.fields[fieldEndpoint], h.fields[fieldModel] = tt.endpoint, tt.model
		var server, tool string
		var ok bool
		OnRequest(func(r *Request) Verdict {
			server, tool, ok = r.ToolCall()
			return Continue
		})
		dispatchRequest(7)
		if server != tt.server || tool != tt.tool || ok != tt.ok {
			t.Errorf("%s %s: got %q %q %v, want %q %q %v", tt.endpoint, tt.model, server, tool, ok, tt.server, tt.tool, tt.ok)
		}
	}
}
