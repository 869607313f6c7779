package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The whole plugin, built to wasm and run by the gateway's plugin host.

var wasmPath string

func load(t *testing.T, config string) *plugintest.Plugin {
	t.Helper()
	if wasmPath == "" {
		wasmPath = plugintest.Build(t, ".")
	}
	return plugintest.Load(t, wasmPath, config)
}

const email = "john.doe@example.com"

func chatBody(text string) string {
	return `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"` + text + `"}]}`
}

func TestPluginRefusesBadConfig(t *testing.T) {
	wasmPath = plugintest.Build(t, ".")
	for _, c := range []struct{ config, want string }{
		{`{"mode":"later"}`, `"mode" is "later"`},
		{`{"detectors":["dna"]}`, `detectors[0] is "dna"`},
		{`{"reply":"restore"}`, `needs mode "mask-and-restore"`},
		{`{"placeholder":"X"}`, `must contain {KIND} and {N}`},
	} {
		if _, err := plugintest.LoadErr(t, wasmPath, c.config); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.config, err, c.want)
		}
	}
}

func TestPluginRedact(t *testing.T) {
	p := load(t, `{"mode":"redact"}`)
	res := p.Request(plugintest.Request{Body: chatBody("Mail " + email + " or call +44 20 7946 0958.")})
	if res.Err != nil || res.Rejected || !res.Rewritten {
		t.Fatalf("%+v\nlogs: %s", res, p.Logs())
	}
	if want := chatBody("Mail [EMAIL_1] or call [PHONE_1]."); res.Body != want {
		t.Fatalf("body %s\nwant %s", res.Body, want)
	}
	if p.Metric("redacted") != 1 || p.Metric("found_email") != 1 || p.Metric("found_phone") != 1 {
		t.Errorf("metrics redacted %d, found_email %d", p.Metric("redacted"), p.Metric("found_email"))
	}
	if logs := p.Logs(); !strings.Contains(logs, "found email, phone") || strings.Contains(logs, email) {
		t.Errorf("logs: %s", logs)
	}
	// Nothing found: the body is left alone.
	if res := p.Request(plugintest.Request{Body: chatBody("Release 1.2.3 on 2024-01-15.")}); res.Rewritten || res.Rejected {
		t.Fatalf("clean request: %+v", res)
	}
}

func TestPluginReject(t *testing.T) {
	p := load(t, `{"mode":"reject","detectors":["card","secret"]}`)
	res := p.Request(plugintest.Request{Body: chatBody("card 4111 1111 1111 1111, key AKIAIOSFODNN7EXAMPLE, " + email)})
	if !res.Rejected || res.Status != 400 || res.Type != "invalid_request_error" || res.Code != "pii_detected" {
		t.Fatalf("%+v", res)
	}
	if !strings.Contains(res.Message, "(card, secret)") || strings.Contains(res.Message, "4111") {
		t.Fatalf("message %q", res.Message)
	}
	if res := p.Request(plugintest.Request{Body: chatBody("only " + email)}); res.Rejected {
		t.Fatalf("an e-mail with the email detector off: %+v", res)
	}
}

// An Anthropic request: the system prompt is not scanned by default, the
// text block is rewritten; a tool_use input (raw JSON) cannot be, so a
// finding there refuses the request.
func TestPluginAnthropic(t *testing.T) {
	p := load(t, `{"mode":"mask-and-restore"}`)
	body := `{"model":"m","system":"Escalate to boss@example.com","messages":[{"role":"user","content":[{"type":"text","text":"I am ` + email + `"}]}]}`
	res := p.Request(plugintest.Request{Endpoint: "messages", Body: body})
	if want := strings.Replace(body, "I am "+email, "I am [EMAIL_1]", 1); res.Body != want {
		t.Fatalf("body %s\nwant %s\nlogs %s", res.Body, want, p.Logs())
	}
	tool := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"mail","input":{"to":"` + email + `"}}]}]}`
	res = p.Request(plugintest.Request{Endpoint: "messages", Body: tool})
	if !res.Rejected || res.Code != "pii_detected" {
		t.Fatalf("tool_use input: %+v", res)
	}
}

// An MCP tool call: the strings of its arguments are redacted in place,
// each e-mail and key counted once, and the call goes on; a finding
// outside any string (a card number written as a number) refuses it.
func TestPluginMCPToolCall(t *testing.T) {
	p := load(t, `{"mode":"redact"}`)
	const key = "AKIAIOSFODNN7EXAMPLE"
	call := func(args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send","arguments":` + args + `}}`
	}
	body := call(`{"to":"` + email + `","cc":["` + email + `"],"opts":{"auth":"key ` + key + `","limit":5}}`)
	res := p.Request(plugintest.Request{Endpoint: "mcp", Model: "mcp:mail/send", Body: body})
	if res.Err != nil || res.Rejected || !res.Rewritten {
		t.Fatalf("%+v\nlogs: %s", res, p.Logs())
	}
	if want := call(`{"to":"[EMAIL_1]","cc":["[EMAIL_1]"],"opts":{"auth":"key [SECRET_1]","limit":5}}`); res.Body != want {
		t.Fatalf("body %s\nwant %s", res.Body, want)
	}
	if p.Metric("found_email") != 2 || p.Metric("found_secret") != 1 || p.Metric("redacted") != 1 {
		t.Errorf("found_email %d, found_secret %d, redacted %d", p.Metric("found_email"), p.Metric("found_secret"), p.Metric("redacted"))
	}
	res = p.Request(plugintest.Request{Endpoint: "mcp", Model: "mcp:pay/charge", Body: call(`{"card":4111111111111111}`)})
	if !res.Rejected || res.Code != "pii_detected" {
		t.Fatalf("a card in a number: %+v", res)
	}
	// Other methods carry no arguments to scan.
	list := `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"mailto:` + email + `"}}`
	if res := p.Request(plugintest.Request{Endpoint: "mcp", Model: "mcp:mail", Body: list}); res.Rejected || res.Rewritten {
		t.Fatalf("resources/read: %+v", res)
	}
}

// session runs the request phase of a masked request and returns the
// session for its reply.
func session(t *testing.T, p *plugintest.Plugin, text string) *plugintest.Session {
	t.Helper()
	s := p.Session(plugintest.Request{Body: chatBody(text)})
	if res := s.Request(); res.Err != nil || res.Rejected {
		t.Fatalf("request: %+v\nlogs: %s", res, p.Logs())
	}
	return s
}

func finish(t *testing.T, s *plugintest.Session) string {
	t.Helper()
	if st := s.Send(plugintest.Event{Flags: sdk.ChunkFinish}); st.Err != nil {
		t.Fatal(st.Err)
	}
	if st := s.Done(); st.Err != nil {
		t.Fatal(st.Err)
	}
	return s.Text()
}

// TestPluginRestoreEverySplit: the model's reply, with two placeholders
// side by side, cut at every offset into two events and at every pair of
// offsets around them into three; the client always gets the originals.
func TestPluginRestoreEverySplit(t *testing.T) {
	p := load(t, `{"mode":"mask-and-restore"}`)
	prompt := "I am " + email + ", phone +1 415 555 0100"
	reply := "Hi [EMAIL_1][PHONE_1]!"
	want := "Hi " + email + "+1 415 555 0100!"
	for a := 0; a <= len(reply); a++ {
		s := session(t, p, prompt)
		s.Send(plugintest.Event{Flags: sdk.ChunkRole})
		for _, piece := range []string{reply[:a], reply[a:]} {
			if st := s.Send(plugintest.Event{Text: piece}); st.Err != nil {
				t.Fatal(st.Err)
			}
		}
		if got := finish(t, s); got != want {
			t.Fatalf("cut at %d: %q", a, got)
		}
	}
	start := strings.Index(reply, "[")
	for a := start; a <= len(reply)-1; a++ {
		for b := a + 1; b <= len(reply); b++ {
			s := session(t, p, prompt)
			for _, piece := range []string{reply[:a], reply[a:b], reply[b:]} {
				s.Send(plugintest.Event{Text: piece})
			}
			if got := finish(t, s); got != want {
				t.Fatalf("cuts at %d, %d: %q", a, b, got)
			}
		}
	}
	if n := p.Metric("restored"); n == 0 {
		t.Error("restored not counted")
	}
}

// Text that cannot be a placeholder goes out as the upstream sent it; the
// held tail of an unknown placeholder is released as it was.
func TestPluginRestorePassThrough(t *testing.T) {
	p := load(t, `{"mode":"mask-and-restore"}`)
	s := session(t, p, "I am "+email)
	for _, piece := range []string{"Hello", " there,", " friend."} {
		if st := s.Send(plugintest.Event{Text: piece}); st.Verdict != wasmhost.Continue || len(st.Out) != 1 || st.Out[0].Replaced {
			t.Fatalf("%q: %+v", piece, st)
		}
	}
	steps := []struct{ text, out string }{
		{" See [EMA", " See "},
		{"IL_", ""},
		{"9] and [EMAIL_1]", "[EMAIL_9] and " + email},
	}
	for _, st := range steps {
		res := s.Send(plugintest.Event{Text: st.text})
		if len(res.Out) != 1 || res.Out[0].Text != st.out {
			t.Fatalf("%q: %+v, want %q", st.text, res, st.out)
		}
	}
	if got := finish(t, s); got != "Hello there, friend. See [EMAIL_9] and "+email {
		t.Fatalf("%q", got)
	}
}

// A held prefix goes out before a tool call, in that event.
func TestPluginRestoreBeforeToolCall(t *testing.T) {
	p := load(t, `{"mode":"mask-and-restore"}`)
	s := session(t, p, "I am "+email)
	s.Send(plugintest.Event{Text: "Calling [EMAIL"})
	st := s.Send(plugintest.Event{ToolCalls: []plugintest.ToolCallDelta{{Name: "mail", Arguments: `{"to":"[EMAIL_1]"}`}}})
	if st.Verdict != wasmhost.Replace || len(st.Out) != 1 || st.Out[0].Text != "[EMAIL" {
		t.Fatalf("tool call: %+v", st)
	}
	if got := finish(t, s); got != "Calling [EMAIL" {
		t.Fatalf("%q", got)
	}
}

func TestPluginRestoreWhole(t *testing.T) {
	p := load(t, `{"mode":"mask-and-restore"}`)
	s := session(t, p, "I am "+email)
	st := s.Send(plugintest.Event{Text: "Dear [EMAIL_1], [EMAIL_2] is unknown.", Flags: sdk.ChunkWhole})
	if st.Err != nil || st.Verdict != wasmhost.Replace || s.Text() != "Dear "+email+", [EMAIL_2] is unknown." {
		t.Fatalf("%+v: %q", st, s.Text())
	}
}

// The reply of a policy with reply: redact is scanned, streamed.
func TestPluginReplyRedact(t *testing.T) {
	p := load(t, `{"mode":"redact","reply":"redact"}`)
	s := session(t, p, "hello")
	text := "Write to jane@example.org or call 020 7946 0958 today, please."
	for i := 0; i < len(text); i += 5 {
		if st := s.Send(plugintest.Event{Text: text[i:min(i+5, len(text))]}); st.Err != nil {
			t.Fatal(st.Err)
		}
	}
	if got, want := finish(t, s), "Write to [EMAIL_1] or call [PHONE_1] today, please."; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
