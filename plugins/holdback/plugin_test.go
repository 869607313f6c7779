package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The whole plugin, built to wasm and run by the gateway's plugin host.

func load(t *testing.T, config string) *plugintest.Plugin {
	t.Helper()
	return plugintest.Load(t, plugintest.Build(t, "."), config)
}

// reply streams pieces as the gateway would: the role event, one event per
// piece, the finish and [DONE].
func reply(t *testing.T, p *plugintest.Plugin, body string, pieces []string) *plugintest.Session {
	t.Helper()
	s := p.Session(plugintest.Request{Body: body})
	steps := []plugintest.Event{{Flags: sdk.ChunkRole}}
	for _, piece := range pieces {
		steps = append(steps, plugintest.Event{Text: piece})
	}
	steps = append(steps, plugintest.Event{Flags: sdk.ChunkFinish})
	for _, ev := range steps {
		if st := s.Send(ev); st.Err != nil {
			t.Fatalf("%q: %v\nlogs: %s", ev.Text, st.Err, p.Logs())
		}
	}
	if st := s.Done(); st.Err != nil {
		t.Fatal(st.Err)
	}
	return s
}

func TestHoldbackPluginRefusesBadConfig(t *testing.T) {
	wasmPath := plugintest.Build(t, ".")
	for _, c := range []struct{ config, want string }{
		{`{}`, `"markers" must list at least one marker`},
		{`{"markers": []}`, `"markers" must list at least one marker`},
		{`{"markers": ["x.net", ""]}`, `markers[1] is empty`},
		{`{"markers": ["x.net"], "mode": "later"}`, `"mode" is "later"; it must be "holdback" or "buffer"`},
		{`{"markers": ["x.net"], "correctoin": "x"}`, `unknown key "correctoin"`},
	} {
		if _, err := plugintest.LoadErr(t, wasmPath, c.config); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.config, err, c.want)
		}
	}
}

// TestHoldbackPluginSplitEverywhere cuts the reply at every offset: the client
// gets the text before the marker, then the correction as the final delta
// with finish_reason content_filter; the guard action is recorded.
func TestHoldbackPluginSplitEverywhere(t *testing.T) {
	p := load(t, cfg(""))
	text := "Here is your image: " + imgURL + " — enjoy!"
	before := text[:strings.Index(text, marker)]
	for cut := 0; cut <= len(text); cut++ {
		s := reply(t, p, `{"messages":[{"role":"user","content":"draw"}]}`, splitAt(text, cut))
		sent := s.Sent()
		last := sent[len(sent)-1]
		if s.Text() != before+correction || !s.Stopped() || last.FinishReason != "content_filter" || !strings.HasSuffix(last.Text, correction) {
			t.Fatalf("cut at %d: %q, last event %+v", cut, s.Text(), last)
		}
		if v, _ := s.Fact("guard_action"); v != "holdback:stopped" {
			t.Fatalf("cut at %d: guard_action %q", cut, v)
		}
	}
	if n := p.Metric("stopped"); n != int64(len(text)+1) {
		t.Errorf("stopped counter %d", n)
	}
	if logs := p.Logs(); !strings.Contains(logs, `stopped the reply: markers[0] \"`+marker+`\"`) || strings.Contains(logs, "enjoy") {
		t.Errorf("logs: %s", logs)
	}
}

// Markers over three chunks and more, and one byte per event.
func TestHoldbackPluginManyChunks(t *testing.T) {
	p := load(t, cfg(""))
	text := "a " + imgURL
	start := strings.Index(text, marker)
	for a := start; a < start+len(marker); a += 3 {
		for b := a + 1; b < start+len(marker); b += 5 {
			if s := reply(t, p, `{}`, splitAt(text, a, b)); s.Text() != "a https://"+correction {
				t.Fatalf("cuts %d,%d: %q", a, b, s.Text())
			}
		}
	}
	var bytewise []string
	for i := range len(text) {
		bytewise = append(bytewise, text[i:i+1])
	}
	if s := reply(t, p, toolBody(imgURL), bytewise); s.Text() != text || s.Stopped() {
		t.Fatalf("byte per event with evidence: %q", s.Text())
	}
}

// The common case: events with no marker prefix go out as the upstream
// sent them (CONTINUE); a prefix that turns out to be no marker is held,
// then released unchanged and in order.
func TestHoldbackPluginPassThrough(t *testing.T) {
	p := load(t, `{"markers":["oaidalleapiprodscus.blob.core.windows.net", "oaidalle.example"]}`)
	s := p.Session(plugintest.Request{Body: `{}`})
	for _, piece := range []string{"Hi", " world,", " no links here."} {
		if st := s.Send(plugintest.Event{Text: piece}); st.Verdict != wasmhost.Continue || len(st.Out) != 1 || st.Out[0].Replaced {
			t.Fatalf("%q: %+v", piece, st)
		}
	}
	steps := []struct{ text, out string }{
		{" see oai", " see "},
		{"dalle", ""},
		{".exa", ""},
		{"mpel", "oaidalle.exampel"},
		{"ed", "ed"},
	}
	for _, st := range steps {
		res := s.Send(plugintest.Event{Text: st.text})
		if len(res.Out) != 1 || res.Out[0].Text != st.out {
			t.Fatalf("%q: %+v, want %q", st.text, res, st.out)
		}
	}
	s.Done()
	if s.Text() != "Hi world, no links here. see oaidalle.exampeled" || s.Stopped() {
		t.Fatalf("%q", s.Text())
	}
}

// Held text goes out before a tool call, inside that event; events without
// text or tool calls are not delayed.
func TestHoldbackPluginOrdering(t *testing.T) {
	p := load(t, cfg(""))
	s := p.Session(plugintest.Request{Body: `{}`})
	s.Send(plugintest.Event{Flags: sdk.ChunkRole})
	s.Send(plugintest.Event{Text: "Calling: oaidalle"})
	if st := s.Send(plugintest.Event{Flags: sdk.ChunkUsage}); st.Verdict != wasmhost.Continue || len(st.Out) != 1 {
		t.Fatalf("usage: %+v", st)
	}
	st := s.Send(plugintest.Event{Flags: sdk.ChunkToolCalls})
	if st.Verdict != wasmhost.Replace || len(st.Out) != 1 || st.Out[0].Text != "oaidalle" || st.Out[0].Flags&sdk.ChunkToolCalls == 0 {
		t.Fatalf("tool call: %+v", st)
	}
	s.Send(plugintest.Event{Flags: sdk.ChunkFinish})
	s.Done()
	if s.Text() != "Calling: oaidalle" {
		t.Fatalf("%q", s.Text())
	}
}

func TestHoldbackPluginEvidence(t *testing.T) {
	p := load(t, cfg(""))
	text := "Here it is again: ![image](" + imgURL + ")"
	earlier := `{"model":"m","messages":[
		{"role":"user","content":"draw a cat"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"draw","arguments":"{\"prompt\":\"cat\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"{\"url\":\"` + imgURL + `\"}"},
		{"role":"assistant","content":"Here: ` + imgURL + `"},
		{"role":"user","content":"try again"}]}`
	for _, body := range []string{toolBody(imgURL), earlier} {
		for cut := 0; cut < len(text); cut += 11 {
			s := reply(t, p, body, splitAt(text, cut))
			if s.Text() != text || s.Stopped() {
				t.Fatalf("cut at %d: %q", cut, s.Text())
			}
			if _, ok := s.Fact("guard_action"); ok {
				t.Fatal("guard_action set on a passed reply")
			}
		}
	}
	if p.Metric("evidence_passed") == 0 {
		t.Error("evidence_passed not counted")
	}
	// Evidence for another URL on the same host does not count.
	if s := reply(t, p, toolBody("https://"+marker+"/other.png"), []string{text}); s.Text() != "Here it is again: ![image](https://"+correction {
		t.Fatalf("other URL: %q", s.Text())
	}
}

func TestHoldbackPluginCaseInsensitive(t *testing.T) {
	p := load(t, cfg(`, "case_insensitive": true`))
	if s := reply(t, p, `{}`, []string{"see https://OAIDALLEAPI", "PRODSCUS.BLOB.core.windows.NET/x"}); s.Text() != "see https://"+correction {
		t.Fatalf("%q", s.Text())
	}
}

func TestHoldbackPluginBufferMode(t *testing.T) {
	p := load(t, cfg(`, "mode": "buffer"`))
	text := "Look: " + imgURL + " done"
	s := p.Session(plugintest.Request{Body: toolBody(imgURL)})
	for i, piece := range splitAt(text, 4, 40, 80) {
		if st := s.Send(plugintest.Event{Text: piece}); st.Verdict != wasmhost.Hold || s.Text() != "" || s.HeldEvents() != i+1 {
			t.Fatalf("%q: %+v", piece, st)
		}
	}
	s.Send(plugintest.Event{Flags: sdk.ChunkFinish})
	if s.Done(); s.Text() != text {
		t.Fatalf("%q", s.Text())
	}
	if s := reply(t, p, `{}`, splitAt(text, 4, 40, 80)); s.Text() != correction || !s.Stopped() {
		t.Fatalf("no evidence: %q", s.Text())
	}
}

func TestHoldbackPluginWhole(t *testing.T) {
	p := load(t, cfg(""))
	text := "Here: " + imgURL
	if got := p.Whole(plugintest.Request{Body: `{}`}, text); got.Text != correction || got.Err != nil {
		t.Fatalf("no evidence: %+v", got)
	}
	if got := p.Whole(plugintest.Request{Body: toolBody(imgURL)}, text); got.Text != text {
		t.Fatalf("evidence: %+v", got)
	}
	if got := p.Whole(plugintest.Request{Body: `{}`}, "no links"); got.Text != "no links" {
		t.Fatalf("no marker: %+v", got)
	}
	if p.Metric("replaced") != 1 {
		t.Errorf("replaced counter %d", p.Metric("replaced"))
	}
}

// TestHoldbackPluginProperty is TestHoldbackProperty against the built plugin.
func TestHoldbackPluginProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	wasmPath := plugintest.Build(t, ".")
	for range 12 {
		c := randomCase(r)
		p := plugintest.Load(t, wasmPath, c.config)
		for range 25 {
			c.text = randomText(r, c.markers)
			checkStream(t, c, &sessionStreamer{t: t, s: p.Session(plugintest.Request{Body: `{}`})}, r)
		}
	}
}

type sessionStreamer struct {
	t *testing.T
	s *plugintest.Session
}

func (x *sessionStreamer) send(text string) (string, bool) {
	if st := x.s.Send(plugintest.Event{Text: text}); st.Err != nil {
		x.t.Fatal(st.Err)
	}
	return x.s.Text(), x.s.Stopped()
}

// held is what the client lacks of the upstream text: the plugin's state
// is the host's.
func (x *sessionStreamer) held(fed, out string) string {
	if !strings.HasPrefix(fed, out) {
		return "\x00(the client's text is not a prefix of the upstream's)"
	}
	return fed[len(out):]
}

func (x *sessionStreamer) finish() string {
	x.s.Send(plugintest.Event{Flags: sdk.ChunkFinish})
	x.s.Done()
	return x.s.Text()
}

// A URL in the arguments of a tool call of the reply, cut across two
// fragments, lets the same URL through in the text after it; another URL
// on the host still stops.
func TestHoldbackPluginReplyToolCall(t *testing.T) {
	p := load(t, cfg(""))
	args := `{"url":"` + strings.ReplaceAll(imgURL, "/", `\/`) + `"}`
	other := "https://" + marker + "/private/other.png"
	tests := []struct {
		name, text, want string
		stopped          bool
	}{
		{"the same URL", "Here: " + imgURL + " done", "Here: " + imgURL + " done", false},
		{"another URL", "Here: " + other + " done", "Here: https://" + correction, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, cut := range []int{10, len(args) / 2, len(args) - 5} {
				s := p.Session(plugintest.Request{Body: `{"messages":[{"role":"user","content":"draw"}]}`})
				events := []plugintest.Event{
					{Flags: sdk.ChunkRole},
					{ToolCalls: []plugintest.ToolCallDelta{{Index: 0, Name: "get_image", Arguments: args[:cut]}}},
					{ToolCalls: []plugintest.ToolCallDelta{{Index: 0, Arguments: args[cut:]}}},
				}
				for _, piece := range splitAt(tt.text, 12, 30) {
					events = append(events, plugintest.Event{Text: piece})
				}
				events = append(events, plugintest.Event{Flags: sdk.ChunkFinish})
				for _, ev := range events {
					if st := s.Send(ev); st.Err != nil {
						t.Fatalf("cut %d: %v\nlogs: %s", cut, st.Err, p.Logs())
					}
				}
				s.Done()
				if s.Text() != tt.want || s.Stopped() != tt.stopped {
					t.Fatalf("cut %d: got %q (stopped %v), want %q", cut, s.Text(), s.Stopped(), tt.want)
				}
			}
		})
	}
	if n := p.Metric("evidence_passed"); n != 3 {
		t.Errorf("evidence_passed %d, want 3", n)
	}
}
