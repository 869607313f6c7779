package rustsdk

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

// buildProbe builds testdata/probe.rs against the crate, as the plugin
// build does.
func buildProbe(t *testing.T) string {
	t.Helper()
	rc := rustc(t)
	dir := t.TempDir()
	rlib := filepath.Join(dir, "libtollgate.rlib")
	out := filepath.Join(dir, "probe.wasm")
	common := []string{"--edition", "2021", "--target", "wasm32-unknown-unknown", "-O", "-C", "panic=abort", "-C", "codegen-units=1"}
	for _, args := range [][]string{
		append([]string{"--crate-type=rlib", "--crate-name", "tollgate", "src/lib.rs", "-o", rlib}, common...),
		append([]string{"--crate-type=cdylib", "-C", "lto", "-C", "strip=symbols", "--extern", "tollgate=" + rlib, "-L", dir, "testdata/probe.rs", "-o", out}, common...),
	} {
		if b, err := exec.Command(rc, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
	}
	return out
}

// TestProbe runs a plugin using every part of the SDK in the real host
// runtime.
func TestProbe(t *testing.T) {
	wasm := buildProbe(t)

	if _, err := plugintest.LoadErr(t, wasm, `{"refuse": "no, because"}`); err == nil || !strings.Contains(err.Error(), "no, because") {
		t.Errorf("refused config: %v", err)
	}
	p := plugintest.Load(t, wasm, `{"tag": "t1"}`)
	if !strings.Contains(p.Logs(), "probe configured with tag t1") {
		t.Errorf("the configure log is missing:\n%s", p.Logs())
	}
	big := strings.Repeat("b", 1000) // longer than the SDK's first buffer
	p.Services.Handle("svc", func(req []byte) ([]byte, error) {
		return bytes.Repeat([]byte("r"), 5000), nil // longer than call's first buffer
	})
	p.Services.AnswerHTTP("https://probe.test/", func(c *plugintest.HTTPCall) plugintest.Answer {
		if c.Method != "POST" || c.Header["X-A"] != "1" || c.Body != "ping" || c.CacheKey != "k" || c.CacheTTL != time.Minute {
			return plugintest.Answer{Status: 400}
		}
		return plugintest.Answer{Body: "pong", Header: map[string]string{"X-B": "2"}}
	})
	p.Services.AnswerService("svc2", func(req []byte) plugintest.Answer { return plugintest.Answer{Body: "r2"} })

	t.Run("imports", func(t *testing.T) { checkImports(t, wasm) })

	tests := []struct {
		action  string
		req     plugintest.Request
		up      string            // x-up sent upstream
		client  map[string]string // headers set on the client's response
		rejectd bool
		log     string // a line the host's log must hold
	}{
		{action: "headers", req: plugintest.Request{Headers: map[string]string{"X-In": "v1"}}, up: "v1", client: map[string]string{"x-client": "t1", "x-missing": "none"}},
		{action: "facts", up: "test-model|chat/completions|req_test", client: map[string]string{"x-state": "s1", "x-nofact": "None"}},
		{action: "body", req: plugintest.Request{Body: `{"model":"m"}`, MaxTokens: 7}, up: `13|13|false|Some(7)`},
		{action: "messages", req: plugintest.Request{Body: `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b\nc"}]},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`, Messages: 4},
			up: "0:text:system::Be brief.;1:text:user::a;1:text:user::b\\nc;2:tool_call:assistant:get:{};3:tool_result:tool:c1:ok;", client: map[string]string{"x-counts": `4|19|15|""`}},
		{action: "rewrite", req: plugintest.Request{Body: `{"model":"m","messages":[{"role":"user","content":"secret"},{"role":"user","content":"keep"}]}`},
			up: "Ok(())|Err(Absent)", client: map[string]string{"x-body": `{"model":"m","messages":[{"role":"user","content":"[x]"},{"role":"user","content":"keep"}]}`, "x-chars": "7"}},
		{action: "bigheader", req: plugintest.Request{Headers: map[string]string{"x-big": big}}, up: "1000"},
		{action: "tenant", up: "None"},
		{action: "call", up: "5000", client: map[string]string{"x-nosuch": "Err(Unavailable)"}},
		{action: "errors", up: "Invalid|tollgate: invalid argument"},
		{action: "dispatch", up: "0:200:pong:2;1:0:r2:none;", client: map[string]string{"x-dispatch": "0|1|Err(NotAllowed)"}},
		{action: "defer", up: "0:200:pong:2;1:0:r2:none;", client: map[string]string{"x-dispatch": "0|1|Err(NotAllowed)"}},
		{action: "expect", up: "", client: map[string]string{"x-expect": "Err(Invalid)|Err(Invalid)"}},
		{action: "reject", rejectd: true},
		{action: "panic", log: "probe panic"},
		{action: "fail", log: "probe failing"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			req := tt.req
			if req.Headers == nil {
				req.Headers = map[string]string{}
			}
			req.Headers["x-action"] = tt.action
			res := p.Request(req)
			switch {
			case tt.log != "":
				if res.Err == nil || !strings.Contains(p.Logs(), tt.log) {
					t.Errorf("got %+v, want a failure logging %q", res, tt.log)
				}
				return
			case tt.rejectd:
				if !res.Rejected || res.Status != 451 || res.Code != "probe_code" || res.Message != "probe message" {
					t.Errorf("got %+v", res)
				}
				return
			}
			if res.Err != nil || res.Rejected || res.UpstreamHeaders["x-up"] != tt.up {
				t.Errorf("got %+v, want x-up %q", res, tt.up)
			}
			for k, v := range tt.client {
				if res.ClientHeaders[k] != v {
					t.Errorf("client header %s = %q, want %q", k, res.ClientHeaders[k], v)
				}
			}
		})
	}
	if calls := p.Services.Calls(); len(calls) != 2 || calls[0].Service != "svc" || calls[0].Request != "req" {
		t.Errorf("service calls: %+v", calls)
	}

	t.Run("respond", func(t *testing.T) { checkRespond(t, p) })

	t.Run("chunk", func(t *testing.T) {
		if got := p.Stream(plugintest.Request{}, []string{"a", "upper", "b"}); got.Text != "aUPPERb" || got.Stopped {
			t.Errorf("replace: %+v", got)
		}
		got := p.Stream(plugintest.Request{}, []string{"a", "stop", "b"})
		if got.Text != "abye" || !got.Stopped || got.FinishReason != "length" {
			t.Errorf("stop: %+v", got)
		}
		if got := p.Stream(plugintest.Request{}, []string{"count", "count", "count"}); got.Text != "123" {
			t.Errorf("state across events: %+v", got)
		}
		if got := p.Whole(plugintest.Request{}, "upper"); got.Text != "UPPER" {
			t.Errorf("whole: %+v", got)
		}
		if n := p.Metric("ends"); n != 2 {
			t.Errorf("ends = %d, want 2 (the streams not stopped)", n)
		}
		if n := p.Metric("end_text_bytes"); n != int64(len("aUPPERb")+len("123")) {
			t.Errorf("end_text_bytes = %d, want the text sent by the two streams", n)
		}
	})

	t.Run("tool calls", func(t *testing.T) {
		s := p.Session(plugintest.Request{})
		step := s.Send(plugintest.Event{ToolCalls: []plugintest.ToolCallDelta{
			{Index: 0, Name: "get", Arguments: `{"a":`},
			{Index: 1, Name: "put", Arguments: "x\ny"},
		}})
		if step.Err != nil || len(step.Out) != 1 || step.Out[0].Text != "0:get:{\"a\":;1:put:x\ny;" {
			t.Errorf("got %+v", step)
		}
	})
}

// checkImports checks that the probe links every import src/sys.rs
// declares, so that loading it checked each one's signature against the
// host's.
func checkImports(t *testing.T, wasm string) {
	src, err := os.ReadFile("src/sys.rs")
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, m := range regexp.MustCompile(`(?m)^    fn (\w+)\(\w+: .*;$`).FindAllSubmatch(src, -1) {
		declared = append(declared, string(m[1]))
	}
	mod, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	cm, err := rt.CompileModule(ctx, mod)
	if err != nil {
		t.Fatal(err)
	}
	var linked []string
	for _, f := range cm.ImportedFunctions() {
		if m, name, _ := f.Import(); m == "tollgate" {
			linked = append(linked, name)
		}
	}
	slices.Sort(declared)
	slices.Sort(linked)
	if len(declared) < 33 || !slices.Equal(declared, linked) {
		t.Errorf("declared %d imports %v,\nthe probe links %d: %v", len(declared), declared, len(linked), linked)
	}
}

// checkRespond runs the probe's answers (Request::respond,
// Request::respond_event), from on_request and from on_call_response, and
// the refusals that let the request go upstream.
func checkRespond(t *testing.T, p *plugintest.Plugin) {
	reply := func(content string) string {
		return `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + content + `"},"finish_reason":"stop"}]}`
	}
	events := []string{
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"streamed"}}]}`,
		`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
	}
	tests := []struct {
		action string
		stream bool
		status int      // the answer's status; 0: not answered
		body   string   // the answer's whole reply
		events []string // the answer's stream
		client map[string]string
		up     string // x-up sent upstream when not answered
		log    string
	}{
		{action: "respond", status: 200, body: reply("from the probe"), client: map[string]string{"x-answered": "whole"}},
		{action: "respond_events", stream: true, status: 201, events: events,
			client: map[string]string{"x-refused": "Err(Invalid)|Err(Invalid)|Err(Invalid)"}},
		{action: "respond_call", status: 200, body: reply("r2")},
		{action: "respond_refused", up: "Continue", log: "sdk: respond(101): tollgate: invalid argument"},
		{action: "respond_limits", up: "Err(Invalid)|Ok(())|Continue", log: "sdk: respond(200): tollgate: invalid argument"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			res := p.Request(plugintest.Request{Stream: tt.stream, Headers: map[string]string{"x-action": tt.action}})
			// An answer's bytes in a failure message, cut short (the
			// limits case sets a 1 MiB event).
			short := func(b string) string {
				if len(b) > 300 {
					return b[:300] + "…"
				}
				return b
			}
			if res.Err != nil || res.Rejected {
				t.Fatalf("got err %v, rejected %v", res.Err, res.Rejected)
			}
			if tt.status == 0 {
				if res.Answered || res.UpstreamHeaders["x-up"] != tt.up {
					t.Errorf("got answered %v (status %d, %d events), x-up %q; want no answer and x-up %q",
						res.Answered, res.Status, len(res.AnswerEvents), res.UpstreamHeaders["x-up"], tt.up)
				}
			} else if !res.Answered || res.Status != tt.status || res.AnswerBody != tt.body || !slices.Equal(res.AnswerEvents, tt.events) {
				t.Errorf("got answered %v, status %d, body %q, events %q;\nwant status %d, body %q, events %q",
					res.Answered, res.Status, short(res.AnswerBody), short(strings.Join(res.AnswerEvents, "\n")), tt.status, tt.body, tt.events)
			}
			for k, v := range tt.client {
				if res.ClientHeaders[k] != v {
					t.Errorf("client header %s = %q, want %q", k, res.ClientHeaders[k], v)
				}
			}
			if tt.log != "" && !strings.Contains(p.Logs(), tt.log) {
				t.Errorf("the log lacks %q:\n%s", tt.log, p.Logs())
			}
		})
	}
}
