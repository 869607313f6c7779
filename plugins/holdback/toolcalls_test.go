package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
)

// appendDelta renders a tool-call delta as chunk_tool_calls does.
func appendDelta(b []byte, index int, name, args string) []byte {
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(append(strconv.AppendInt(append(b, ' '), int64(len(name)), 10), ' '), strconv.Itoa(len(args))...)
	return append(append(append(append(b, '\n'), name...), args...), '\n')
}

// sendCalls sends an event with tool-call deltas, each "INDEX:ARGUMENTS"
// (the name is left out: the guard does not read it).
func (s *sim) sendCalls(t testing.TB, text string, deltas ...string) decision {
	t.Helper()
	s.calls = nil
	for _, d := range deltas {
		i, args, _ := strings.Cut(d, ":")
		n, err := strconv.Atoi(i)
		if err != nil {
			t.Fatal(err)
		}
		s.calls = appendDelta(s.calls, n, "get_image", args)
	}
	return s.send(t, text, sdk.ChunkToolCalls)
}

// A URL in the arguments of a tool call of the reply is evidence for the
// same URL in the reply's text after it, however its fragments cut it.
func TestHoldbackReplyToolCall(t *testing.T) {
	g := mustGuard(t, cfg(""))
	other := "https://" + marker + "/private/other.png"
	args := `{"url":"` + strings.ReplaceAll(imgURL, "/", `\/`) + `","size":"1024x1024"}`
	tests := []struct {
		name, text, want string
	}{
		{"the same URL", "Here: " + imgURL + " done", "Here: " + imgURL + " done"},
		{"in Markdown", "![x](" + imgURL + ")", "![x](" + imgURL + ")"},
		{"another URL on the host", "Here: " + other + " done", "Here: https://" + correction},
		{"the URL cut short", "Here: " + imgURL[:len(imgURL)-2] + " done", "Here: https://" + correction},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for cut := 1; cut < len(args); cut++ {
				s := newSim(g, `{"messages":[{"role":"user","content":"draw"}]}`)
				s.send(t, "", sdk.ChunkRole)
				if d := s.sendCalls(t, "", "0:"+args[:cut]); d.verdict != sdk.Continue {
					t.Fatalf("cut %d: first fragment: %v", cut, d.verdict)
				}
				s.sendCalls(t, "", "0:"+args[cut:])
				if got := s.stream(t, splitAt(tt.text, 9)); got != tt.want {
					t.Fatalf("cut %d: got %q, want %q", cut, got, tt.want)
				}
			}
		})
	}
}

// Fragments of parallel calls are kept per index; a fragment joins only
// its own call's arguments.
func TestHoldbackReplyToolCallsInterleaved(t *testing.T) {
	g := mustGuard(t, cfg(""))
	half := len(imgURL) / 2
	s := newSim(g, `{}`)
	s.sendCalls(t, "", `0:{"u":"`+imgURL[:half], `1:{"v":"https://`)
	s.sendCalls(t, "", "1:"+marker+`/other.png"}`, "0:"+imgURL[half:]+`"}`)
	if got := s.stream(t, []string{"A " + imgURL + " B"}); got != "A "+imgURL+" B" {
		t.Fatalf("call 0: got %q", got)
	}
	s = newSim(g, `{}`)
	s.sendCalls(t, "", `0:{"u":"`+imgURL[:half], `1:{"v":"https://`)
	s.sendCalls(t, "", "1:"+marker+`/other.png"}`, "0:"+imgURL[half:]+`"}`)
	if got := s.stream(t, []string{"A https://" + marker + "/other.png B"}); got != "A https://"+marker+"/other.png B" {
		t.Fatalf("call 1: got %q", got)
	}
	// Fragments of different calls do not make a URL together.
	s = newSim(g, `{}`)
	s.sendCalls(t, "", `0:{"u":"`+imgURL[:half], `1:`+imgURL[half:]+`"}`)
	if got := s.stream(t, []string{"A " + imgURL + " B"}); got != "A https://"+correction {
		t.Fatalf("across calls: got %q", got)
	}
}

// A URL still pending at a tool call is decided there, with the arguments
// the call has so far; a URL that is only cut in them is not evidence yet.
func TestHoldbackReplyToolCallPending(t *testing.T) {
	g := mustGuard(t, cfg(""))
	s := newSim(g, toolBody(imgURL+"x"))
	s.send(t, "A "+imgURL, 0)
	if d := s.sendCalls(t, "", `0:{"url":"`+imgURL+`"}`); d.verdict != sdk.Replace || d.passed != 1 || s.out.String() != "A "+imgURL {
		t.Fatalf("whole URL in the call: %v passed %d, out %q", d.verdict, d.passed, s.out.String())
	}
	s = newSim(g, toolBody(imgURL+"x"))
	s.send(t, "A "+imgURL, 0)
	if d := s.sendCalls(t, "", `0:{"url":"`+imgURL); d.verdict != sdk.Stop || s.out.String() != "A https://"+correction {
		t.Fatalf("URL at the end of the fragment: %v, out %q", d.verdict, s.out.String())
	}
	// Without any evidence in the body, a marker before the tool call
	// stops at once: the call comes after it.
	s = newSim(g, `{}`)
	if d := s.send(t, "A "+imgURL, 0); d.verdict != sdk.Stop {
		t.Fatalf("before the call: %v", d.verdict)
	}
}

// The state keeps the calls across events and is encoded as version 1
// while there are none.
func TestHoldbackStateCalls(t *testing.T) {
	st := reqState{ac: 3, held: []byte("oai")}
	v1 := st.encode(nil)
	if v1[0] != stateVersion || len(v1) != stateHeader+3 {
		t.Fatalf("without calls: %q", v1)
	}
	if !st.addToolCalls(appendDelta(appendDelta(nil, 0, "f", "ab"), 2, "", "x")) || !st.addToolCalls(appendDelta(nil, 0, "", "c")) {
		t.Fatal("addToolCalls refused a valid value")
	}
	if st.addToolCalls([]byte("0 1 1\nab")) {
		t.Fatal("addToolCalls accepted a malformed value")
	}
	v2 := st.encode(nil)
	var got reqState
	if err := decodeState(&got, v2); err != nil || v2[0] != stateVersionCalls {
		t.Fatalf("decode %q: %v", v2, err)
	}
	want := string(appendLE32(appendLE32(nil, 0), 3)) + "abc" + string(appendLE32(appendLE32(nil, 2), 1)) + "x"
	if string(got.calls) != want || string(got.held) != "oai" || got.ac != 3 {
		t.Fatalf("calls %q held %q ac %d", got.calls, got.held, got.ac)
	}
	if err := decodeState(&got, v2[:len(v2)-1]); err == nil {
		t.Fatal("a truncated state decoded")
	}
}

// A whole reply's text passes with the URL in its own message's tool
// calls, which the host hands over with the text.
func TestHoldbackWholeReplyToolCalls(t *testing.T) {
	g := mustGuard(t, cfg(""))
	args := `{"url":"` + strings.ReplaceAll(imgURL, "/", `\/`) + `"}`
	for _, tt := range []struct {
		name, url string
		want      sdk.Verdict
	}{
		{"the same URL", imgURL, sdk.Continue},
		{"another URL", "https://" + marker + "/private/other.png", sdk.Replace},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var st reqState
			if err := decodeState(&st, nil); err != nil || !st.addToolCalls(appendDelta(nil, 0, "draw", args)) {
				t.Fatal("state", err)
			}
			d := g.onEvent(&st, []byte("Here: "+tt.url+" done"), sdk.ChunkText|sdk.ChunkWhole|sdk.ChunkToolCalls, func() []byte { return []byte(`{}`) })
			if d.verdict != tt.want {
				t.Fatalf("verdict %v, want %v", d.verdict, tt.want)
			}
		})
	}
}
