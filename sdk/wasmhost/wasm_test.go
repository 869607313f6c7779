package wasmhost

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// testPlugin returns the built test plugin (testdata/testplugin, built
// once per source change with the standard toolchain).
func testPlugin(t testing.TB) []byte {
	t.Helper()
	return builtModule(t, "testdata/testplugin")
}

// builtModule returns the plugin in dir built with the standard toolchain
// (once per source change).
func builtModule(t testing.TB, dir string) []byte {
	t.Helper()
	path, err := wasmbuild.Cached(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logSink collects log lines.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

var (
	hostOnce sync.Once
	host     *Host
	logs     = &logSink{}
)

// testHost is the host the tests share. It caches compiled code where the
// gateway does by default (the user cache dir), so the test plugin is
// compiled once per machine and wazero version rather than once per test
// process: under -race one compile of it takes about 20 s of CPU. Entries
// are keyed by the module's bytes, wazero's version and the CPU, and
// written by rename, so concurrent test processes share them safely.
func testHost(t testing.TB) *Host {
	hostOnce.Do(func() {
		var err error
		host, err = NewHost("", slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatal(err)
		}
	})
	return host
}

// pipeline loads the test plugin once per config, in order.
func pipeline(t testing.TB, configs ...string) *Pipeline {
	t.Helper()
	specs := make([]Spec, len(configs))
	for i, c := range configs {
		specs[i] = Spec{Name: "p" + string(rune('0'+i)), Module: testPlugin(t), Config: []byte(c), Deadline: 200 * time.Millisecond}
	}
	pl, err := NewPipeline(context.Background(), testHost(t), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl
}

func request(body string) *Request {
	r := AcquireRequest()
	r.Model, r.Endpoint, r.RequestID, r.Body = []byte("mock-1"), []byte("chat/completions"), []byte("req-1"), []byte(body)
	r.ClientHeader = Headers{{Name: []byte("Authorization"), Value: []byte("Bearer sk-client")}}
	return r
}

func TestRequestVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		configs []string
		check   func(t *testing.T, r *Request, err error)
	}{
		{"continue", []string{`{"request":"continue"}`}, func(t *testing.T, r *Request, err error) {
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"reject with the plugin's error", []string{`{"request":"reject","reject_status":429,"reject_code":"too_many","reject_message":"slow down"}`},
			func(t *testing.T, r *Request, err error) {
				var rej *RejectError
				if !errors.As(err, &rej) || rej.Status != 429 || rej.Code != "too_many" || rej.Message != "slow down" || rej.Plugin != "p0" {
					t.Fatalf("got %#v", err)
				}
			}},
		{"reject stops later plugins", []string{`{"request":"reject"}`, `{"request":"set_header:X-Late=1"}`},
			func(t *testing.T, r *Request, err error) {
				if err == nil || len(r.SetUpstreamHeaders) != 0 {
					t.Fatalf("err %v, headers %v", err, r.SetUpstreamHeaders)
				}
			}},
		{"headers and facts flow between plugins in order", []string{
			`{"request":["set_header:X-Up=1","fact_set:tier=gold"]}`,
			`{"request":["fact_copy:tier","set_response_header:X-Seen=yes"]}`},
			func(t *testing.T, r *Request, err error) {
				if err != nil {
					t.Fatal(err)
				}
				if got := headers(r.SetUpstreamHeaders); got != "X-Up=1" {
					t.Errorf("upstream headers %q", got)
				}
				if got := headers(r.SetClientHeaders); got != "X-Fact-tier=gold;X-Seen=yes" {
					t.Errorf("client headers %q", got)
				}
			}},
		{"a verdict not allowed in the phase fails the plugin", []string{`{"request":"verdict:4"}`},
			func(t *testing.T, r *Request, err error) {
				var f *FailureError
				if !errors.As(err, &f) || !strings.Contains(err.Error(), "not allowed in phase request") {
					t.Fatalf("got %v", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl := pipeline(t, tt.configs...)
			r := request(`{}`)
			defer ReleaseRequest(r)
			tt.check(t, r, pl.Request(r))
		})
	}
}

func headers(hs []Header) string {
	var parts []string
	for _, h := range hs {
		parts = append(parts, string(h.Name)+"="+string(h.Value))
	}
	return strings.Join(parts, ";")
}

func TestChunkVerdicts(t *testing.T) {
	tests := []struct {
		config     string
		text       string
		want       Verdict
		wantText   string
		wantFinish string
	}{
		{`{"chunk":"continue"}`, "hello", Continue, "", ""},
		{`{"chunk":"hold"}`, "hello", Hold, "", ""},
		{`{"chunk":"release"}`, "hello", Release, "", ""},
		{`{"chunk":"replace:bye"}`, "hello", Replace, "bye", ""},
		{`{"chunk":"replace_upper"}`, "hello", Replace, "HELLO", ""},
		{`{"chunk":"stop:[removed]","finish_reason":"content_filter"}`, "hello", Stop, "[removed]", "content_filter"},
	}
	for _, tt := range tests {
		t.Run(tt.config, func(t *testing.T) {
			pl := pipeline(t, tt.config)
			r := request(`{}`)
			defer ReleaseRequest(r)
			res, err := pl.Chunk(r, []byte(tt.text), ChunkText)
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tt.want || string(res.Text) != tt.wantText && tt.want >= Replace || string(res.FinishReason) != tt.wantFinish {
				t.Errorf("got %v %q %q, want %v %q %q", res.Verdict, res.Text, res.FinishReason, tt.want, tt.wantText, tt.wantFinish)
			}
		})
	}
}

// chunk_tool_calls hands the plugin the event's tool-call deltas exactly,
// and nothing for an event without them.
func TestChunkToolCalls(t *testing.T) {
	pl := pipeline(t, `{"chunk":"replace_tool_calls"}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	tests := []struct {
		name  string
		calls []byte
		flags uint32
		want  string
	}{
		{"none", nil, ChunkText, ""},
		{"two", AppendToolCallDelta(AppendToolCallDelta(nil, 0, []byte("get"), []byte("{\"u\":\"https://h")),
			1, nil, []byte("x\n\ty")), ChunkToolCalls, "0|get|{\"u\":\"https://h;1||x\n\ty;"},
		{"empty arguments", AppendToolCallDelta(nil, 3, []byte("f"), nil), ChunkToolCalls, "3|f|;"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.ToolCalls = tt.calls
			res, err := pl.Chunk(r, []byte("text"), tt.flags|ChunkText)
			r.ToolCalls = nil
			if err != nil || res.Verdict != Replace || string(res.Text) != tt.want {
				t.Fatalf("got %v %q %v, want Replace %q", res.Verdict, res.Text, err, tt.want)
			}
		})
	}
	if got := string(AppendToolCallDelta(nil, 12, []byte("ab"), []byte("c\nd"))); got != "12 2 3\nabc\nd\n" {
		t.Errorf("AppendToolCallDelta = %q", got)
	}
}

// request_messages hands every phase the request's conversation, rendered
// from the body once per request; configure may not call it.
func TestRequestMessages(t *testing.T) {
	pl := pipeline(t, `{"request":"messages","response_headers":"messages","chunk":"messages","end":"messages"}`)
	body := `{"system":"Be brief.","messages":[{"role":"user","content":"Hi"},` +
		`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"a":1}}]}]}`
	want := "0|text|system||Be brief.;1|text|user||Hi;2|tool_call|assistant|f|{\"a\":1};"
	r := request(body)
	defer ReleaseRequest(r)
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Fact("messages"); string(got) != want {
		t.Fatalf("request phase: %q, want %q", got, want)
	}
	// Rendered once: a body changed afterwards does not change the value.
	r.Body = []byte(`{"messages":[]}`)
	r.facts = r.facts[:0]
	if err := pl.ResponseHeaders(r, 200); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Fact("messages"); string(got) != want {
		t.Fatalf("response_headers phase: %q", got)
	}
	res, err := pl.Chunk(r, []byte("x"), ChunkText)
	if err != nil || res.Verdict != Replace || string(res.Text) != want {
		t.Fatalf("chunk phase: %v %q %v", res.Verdict, res.Text, err)
	}
	pl.End(r, EndCompleted)
	// (The log line quotes the message: compare up to the first quote.)
	if !strings.Contains(logs.String(), "messages "+want[:strings.IndexByte(want, '"')]) {
		t.Fatalf("end phase logs: %s", logs.String())
	}

	// A released Request renders its next body afresh.
	r2 := request(`{"input":["a"]}`)
	defer ReleaseRequest(r2)
	if err := pl.Request(r2); err != nil {
		t.Fatal(err)
	}
	if got, _ := r2.Fact("messages"); string(got) != "0|text|user||a;" {
		t.Fatalf("next request: %q", got)
	}

	_, err = NewPipeline(context.Background(), testHost(t), []Spec{{Name: "x", Module: testPlugin(t), Config: []byte(`{"configure":"messages"}`)}})
	if err == nil || !strings.Contains(err.Error(), "request_messages: -3") {
		t.Fatalf("configure: %v", err)
	}
}

// Each plugin sees the text as the one before it left it.
func TestChunkChain(t *testing.T) {
	pl := pipeline(t, `{"chunk":"replace_upper"}`, `{"chunk":["emit:<","replace:x"]}`)
	r := request(`{}`)
	defer ReleaseRequest(r)
	res, err := pl.Chunk(r, []byte("abc"), ChunkText)
	if err != nil || res.Verdict != Replace || string(res.Text) != "<x" {
		t.Fatalf("got %v %q %v", res.Verdict, res.Text, err)
	}
}

// Per-request state lives in the host: the count survives callbacks served
// by different instances, and requests do not share it.
func TestStateAndEndMetrics(t *testing.T) {
	pl := pipeline(t, `{"chunk":"count","end":"count","metric":"chunks"}`)
	p := pl.Plugins()[0]
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := request(`{}`)
			defer ReleaseRequest(r)
			for j := 0; j < 10; j++ {
				if _, err := pl.Chunk(r, []byte("x"), ChunkText); err != nil {
					t.Error(err)
				}
			}
			pl.End(r, EndCompleted)
		}()
	}
	wg.Wait()
	c, ok := p.Stats().Events.Load("chunks")
	// count adds one per chunk (10 per request); end reports the sum.
	if !ok || c.(*atomic.Int64).Load() != 8*10 {
		t.Fatalf("metric chunks = %v, want %d", c, 8*10)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		spec    func(*Spec)
		want    string
		maxTook time.Duration
	}{
		// The host's error carries the first line of the guest's stderr.
		{"trap", `{"request":"trap"}`, nil, "trapped: wasm error: unreachable (guest: panic: testplugin: trap", 3 * time.Second},
		// Stopped at the deadline (+ a tick) when it gets the CPU, at 10× when starved.
		{"runaway loop", `{"request":"loop"}`, func(s *Spec) { s.Deadline = 50 * time.Millisecond }, "deadline", 3 * time.Second},
		// Allocating 32 MiB in 1 MiB steps is slow under the race detector.
		{"memory bomb", `{"request":"membomb"}`, func(s *Spec) { s.MemoryBytes = 32 << 20; s.Deadline = 10 * time.Second }, "out of memory", 30 * time.Second},
		{"wild pointer to a host function", `{"request":"wildptr"}`, nil, "outside memory", 3 * time.Second},
		{"wild output buffer", `{"request":"wildbuf"}`, nil, "outside memory", 3 * time.Second},
	}
	for _, tt := range tests {
		for _, mode := range []FailMode{FailClosed, FailOpen} {
			t.Run(tt.name+map[FailMode]string{FailClosed: "/fail_closed", FailOpen: "/fail_open"}[mode], func(t *testing.T) {
				spec := Spec{Name: "bad", Module: testPlugin(t), Config: []byte(tt.config), OnError: mode, Deadline: time.Second}
				if tt.spec != nil {
					tt.spec(&spec)
				}
				pl, err := NewPipeline(context.Background(), testHost(t), []Spec{spec})
				if err != nil {
					t.Fatal(err)
				}
				defer pl.Close()
				p := pl.Plugins()[0]
				for i := 0; i < 2; i++ { // a second call gets a fresh instance and fails the same way
					r := request(`{}`)
					start := time.Now()
					err := pl.Request(r)
					ReleaseRequest(r)
					if took := time.Since(start); took > tt.maxTook {
						t.Errorf("failure took %v", took)
					}
					if mode == FailOpen {
						if err != nil {
							t.Fatalf("fail_open returned %v", err)
						}
						continue
					}
					var f *FailureError
					if !errors.As(err, &f) || !strings.Contains(err.Error(), tt.want) {
						t.Fatalf("call %d: got %v, want a FailureError mentioning %q", i, err, tt.want)
					}
				}
				if d := p.Stats().InstancesDiscarded.Load(); d != 2 {
					t.Errorf("instances discarded = %d, want 2", d)
				}
			})
		}
	}
}

// An uninterruptible plugin's overdue callback is reported, not stopped.
func TestUninterruptibleOverdue(t *testing.T) {
	spec := Spec{Name: "slow", Module: testPlugin(t), Config: []byte(`{"request":"log:x","chunk":"replace_upper"}`),
		Deadline: 20 * time.Millisecond, Uninterruptible: true}
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := request(`{}`)
	defer ReleaseRequest(r)
	if res, err := pl.Chunk(r, []byte("ab"), ChunkText); err != nil || string(res.Text) != "AB" {
		t.Fatalf("got %q %v", res.Text, err)
	}
	if p := pl.Plugins()[0]; p.Stats().Overdue.Load() != 0 || p.Stats().Timeouts.Load() != 0 {
		t.Fatal("a fast callback was reported overdue")
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name   string
		module []byte
		config string
		want   string
	}{
		{"configuration refused", nil, `{"configure":"fail","fail_message":"deny[2] is not a valid regex"}`, "configuration refused: deny[2] is not a valid regex"},
		{"ABI version mismatch", abiModule(2, true), `{}`, "plugin ABI version 2, but this gateway implements version 1"},
		{"a command, not a reactor", abiModule(1, false), `{}`, "build Go plugins with -buildmode=c-shared"},
		{"not a plugin", notAPlugin, `{}`, "does not export tollgate_abi_version"},
		{"not wasm", []byte("hello"), `{}`, "compiling"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := tt.module
			if mod == nil {
				mod = testPlugin(t)
			}
			_, err := NewPipeline(context.Background(), testHost(t), []Spec{{Name: "x", Module: mod, Config: []byte(tt.config)}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `plugin "x"`) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// abiModule is a minimal module exporting memory, tollgate_abi_version
// returning v and, with reactor, an empty _initialize.
func abiModule(v byte, reactor bool) []byte {
	if !reactor {
		return []byte{
			0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
			0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
			0x03, 0x02, 0x01, 0x00, // func 0: type 0
			0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
			0x07, 0x21, 0x02, // exports: 2
			0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
			0x14, 't', 'o', 'l', 'l', 'g', 'a', 't', 'e', '_', 'a', 'b', 'i', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x00, 0x00,
			0x0a, 0x06, 0x01, 0x04, 0x00, 0x41, v, 0x0b, // code: i32.const v
		}
	}
	return []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x08, 0x02, 0x60, 0x00, 0x01, 0x7f, 0x60, 0x00, 0x00, // types: () -> i32, () -> ()
		0x03, 0x03, 0x02, 0x00, 0x01, // funcs: type 0, type 1
		0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
		0x07, 0x2f, 0x03, // exports: 3
		0x06, 'm', 'e', 'm', 'o', 'r', 'y', 0x02, 0x00,
		0x14, 't', 'o', 'l', 'l', 'g', 'a', 't', 'e', '_', 'a', 'b', 'i', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n', 0x00, 0x00,
		0x0b, '_', 'i', 'n', 'i', 't', 'i', 'a', 'l', 'i', 'z', 'e', 0x00, 0x01,
		0x0a, 0x09, 0x02, 0x04, 0x00, 0x41, v, 0x0b, 0x02, 0x00, 0x0b, // code: i32.const v; nothing
	}
}

// notAPlugin is an empty valid module.
var notAPlugin = []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}

// The pool is bounded, yet many concurrent callers are served (they wait
// for an instance) and nothing fails.
func TestPoolUnderConcurrency(t *testing.T) {
	spec := Spec{Name: "p", Module: testPlugin(t), Config: []byte(`{"chunk":"replace_upper"}`), Instances: 2, Deadline: time.Second}
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := request(`{}`)
			defer ReleaseRequest(r)
			for j := 0; j < 50; j++ {
				res, err := pl.Chunk(r, []byte("ab"), ChunkText)
				if err != nil || string(res.Text) != "AB" {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	p := pl.Plugins()[0]
	if bad.Load() != 0 || p.Stats().InstancesCreated.Load() > 2 {
		t.Fatalf("bad=%d instances=%d", bad.Load(), p.Stats().InstancesCreated.Load())
	}
}

func TestPhasesReported(t *testing.T) {
	pl := pipeline(t, `{"phases":["chunk"]}`)
	if got := pl.Plugins()[0].Phases(); got != PhaseChunk {
		t.Fatalf("phases %v, want chunk only", got)
	}
	if pl.Has(PhaseRequest) || !pl.Has(PhaseChunk) {
		t.Fatal("pipeline phases wrong")
	}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }

func TestResponseHeadersPhase(t *testing.T) {
	pl := pipeline(t, `{"response_headers":["set_header:X-Upstream-Checked=yes"],"phases":["response_headers"]}`,
		`{"response_headers":"reject","reject_status":502,"reject_code":"bad_upstream","reject_message":"upstream refused by policy","phases":["response_headers"]}`)
	if pl.Has(PhaseRequest) || !pl.Has(PhaseResponseHeaders) {
		t.Fatal("phases wrong")
	}
	r := request(`{}`)
	defer ReleaseRequest(r)
	r.UpstreamHeader = Headers{{Name: []byte("X-Upstream"), Value: []byte("mock")}}
	err := pl.ResponseHeaders(r, 200)
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Status != 502 || rej.Code != "bad_upstream" || rej.Plugin != "p1" {
		t.Fatalf("got %v", err)
	}
	if got := headers(r.SetClientHeaders); got != "X-Upstream-Checked=yes" {
		t.Errorf("client headers %q", got)
	}
}

// slowServices answers every call after a delay, like a service waiting on
// the network.
type slowServices struct{ delay time.Duration }

func (s slowServices) Call(_ *Request, name string, _ []byte) ([]byte, error) {
	time.Sleep(s.delay)
	return []byte("ok:" + name), nil
}

// Time a callback spends waiting in a host service is not the guest's: a
// service slower than ten deadlines (the watchdog's unconditional limit)
// does not get the callback stopped.
func TestServiceTimeNotCharged(t *testing.T) {
	spec := Spec{Name: "slow", Module: testPlugin(t), Config: []byte(`{"request":"call:svc"}`), Deadline: 20 * time.Millisecond}
	pl, err := NewPipeline(context.Background(), testHost(t), []Spec{spec})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	r := request(`{}`)
	defer ReleaseRequest(r)
	r.Services = slowServices{delay: 300 * time.Millisecond}
	if err := pl.Request(r); err != nil {
		t.Fatalf("a slow service got the callback stopped: %v", err)
	}
	if got := headers(r.SetClientHeaders); got != "X-Call-Result=ok:svc" {
		t.Fatalf("headers %q", got)
	}
}

// A plugin that opts out of later phases (skip_phases) is not called there
// for that request, and only that request.
func TestSkipPhases(t *testing.T) {
	pl := pipeline(t, `{"request":"skip:12","chunk":"replace_upper"}`, `{"request":"continue","phases":["request","end"]}`)
	p := pl.Plugins()[0]
	r := request(`{}`)
	defer ReleaseRequest(r)
	if !pl.Wants(r, PhaseChunk) || !pl.Wants(r, PhaseEnd) {
		t.Fatal("before the request phase the plugins want chunk and end")
	}
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if pl.Wants(r, PhaseChunk) {
		t.Error("chunk still wanted: the first plugin skipped it and the second has no chunk phase")
	}
	if !pl.Wants(r, PhaseEnd) {
		t.Error("end is still wanted by the second plugin")
	}
	calls := p.Stats().Calls.Load()
	res, err := pl.Chunk(r, []byte("abc"), ChunkText)
	if err != nil || res.Verdict != Continue {
		t.Fatalf("chunk after skip: %v %v", res, err)
	}
	pl.End(r, EndCompleted)
	if d := p.Stats().Calls.Load() - calls; d != 0 {
		t.Errorf("the skipping plugin was called %d times after skip_phases", d)
	}
	// A new request starts with every phase.
	r2 := request(`{}`)
	defer ReleaseRequest(r2)
	if !pl.Wants(r2, PhaseChunk) {
		t.Error("a skip leaked into the next request")
	}
}
