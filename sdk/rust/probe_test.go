package rustsdk

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
		{action: "bigheader", req: plugintest.Request{Headers: map[string]string{"x-big": big}}, up: "1000"},
		{action: "tenant", up: "None"},
		{action: "call", up: "5000", client: map[string]string{"x-nosuch": "Err(Unavailable)"}},
		{action: "errors", up: "Invalid|tollgate: invalid argument"},
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
