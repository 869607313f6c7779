package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
)

// sim runs the guard's decisions natively over a stream and applies them as
// the gateway does. The state goes through encode/decode between events,
// as it goes through the host.
type sim struct {
	g       *guard
	body    string
	state   []byte
	out     strings.Builder
	held    []string // events the host holds (buffer mode)
	stopped bool
	fed     strings.Builder // the upstream text so far
	st      reqState
	calls   []byte // the next event's tool-call deltas (sendCalls)
}

func newSim(g *guard, body string) *sim { return &sim{g: g, body: body} }

func (s *sim) send(t testing.TB, text string, f sdk.ChunkFlags) decision {
	t.Helper()
	if s.stopped {
		t.Fatal("an event after STOP")
	}
	if text != "" {
		f |= sdk.ChunkText
	}
	s.fed.WriteString(text)
	if err := decodeState(&s.st, s.state); err != nil {
		t.Fatal(err)
	}
	if f.Has(sdk.ChunkToolCalls) && !s.st.addToolCalls(s.calls) {
		t.Fatalf("malformed tool calls %q", s.calls)
	}
	s.calls = nil
	d := s.g.onEvent(&s.st, []byte(text), f, func() []byte { return []byte(s.body) })
	if needsState(f, len(text)) {
		s.state = s.st.encode(nil)
	}
	switch d.verdict {
	case sdk.Continue, sdk.Release:
		s.flush()
		s.out.WriteString(text)
	case sdk.Hold:
		if f.Has(sdk.ChunkDone) {
			s.flush()
		} else {
			s.held = append(s.held, text)
		}
	case sdk.Replace:
		s.flush()
		s.out.Write(d.emit)
	case sdk.Stop:
		s.held = nil
		s.out.Write(d.emit)
		s.stopped = true
	default:
		t.Fatalf("verdict %v", d.verdict)
	}
	return d
}

func (s *sim) flush() {
	for _, h := range s.held {
		s.out.WriteString(h)
	}
	s.held = nil
}

// heldText is the text the guard holds in its state.
func (s *sim) heldText(t testing.TB) string {
	var st reqState
	if err := decodeState(&st, s.state); err != nil {
		t.Fatal(err)
	}
	return string(st.held)
}

// stream sends pieces as text events, then a finish event and [DONE].
func (s *sim) stream(t testing.TB, pieces []string) string {
	for _, p := range pieces {
		if s.stopped {
			break
		}
		s.send(t, p, 0)
	}
	if !s.stopped {
		s.send(t, "", sdk.ChunkFinish)
	}
	if !s.stopped {
		s.send(t, "", sdk.ChunkDone)
	}
	return s.out.String()
}

// splitAt cuts text at the given offsets.
func splitAt(text string, cuts ...int) []string {
	var out []string
	prev := 0
	for _, c := range cuts {
		out = append(out, text[prev:c])
		prev = c
	}
	return append(out, text[prev:])
}

const correction = "[cut]"

func cfg(extra string) string {
	return `{"markers":["` + marker + `"], "correction":"` + correction + `"` + extra + `}`
}

func toolBody(content string) string {
	return `{"model":"m","messages":[{"role":"user","content":"draw"},{"role":"tool","tool_call_id":"c","content":"` + content + `"}]}`
}

// TestHoldbackSplitEverywhere cuts a reply with a marker inside a URL at every
// byte offset (also inside "https://" and at the marker's first and last
// bytes): without evidence the client gets exactly the text before the
// marker and the correction; with evidence, the text unchanged.
func TestHoldbackSplitEverywhere(t *testing.T) {
	g := mustGuard(t, cfg(""))
	text := "Here is your image: " + imgURL + " — enjoy!"
	before := text[:strings.Index(text, marker)]
	for cut := 0; cut <= len(text); cut++ {
		if got := newSim(g, `{"messages":[]}`).stream(t, splitAt(text, cut)); got != before+correction {
			t.Fatalf("cut at %d, no evidence: got %q", cut, got)
		}
		if got := newSim(g, toolBody(imgURL)).stream(t, splitAt(text, cut)); got != text {
			t.Fatalf("cut at %d, evidence: got %q", cut, got)
		}
	}
	// Every pair of cuts: markers across three chunks and more.
	for a := 1; a < len(text); a++ {
		for b := a + 1; b < len(text); b++ {
			if got := newSim(g, `{}`).stream(t, splitAt(text, a, b)); got != before+correction {
				t.Fatalf("cuts %d,%d: got %q", a, b, got)
			}
		}
	}
	// One byte per event.
	var bytewise []string
	for i := range len(text) {
		bytewise = append(bytewise, text[i:i+1])
	}
	if got := newSim(g, toolBody(imgURL)).stream(t, bytewise); got != text {
		t.Fatalf("byte per event, evidence: got %q", got)
	}
	if got := newSim(g, `{}`).stream(t, bytewise); got != before+correction {
		t.Fatalf("byte per event: got %q", got)
	}
}

// TestHoldbackHeldTail checks what is held after each event: only the longest
// suffix that could still become a marker, released as soon as it cannot.
func TestHoldbackHeldTail(t *testing.T) {
	g := mustGuard(t, `{"markers":["oaidalle.blob", "dallex"], "correction":"`+correction+`"}`)
	s := newSim(g, `{}`)
	steps := []struct {
		text, verdict, out, held string
	}{
		{"Look: https://oai", "replace", "Look: https://", "oai"},
		{"dal", "replace", "", "oaidal"},
		{"le.b", "replace", "", "oaidalle.b"},
		{"x", "replace", "oaidalle.bx", ""}, // not a marker after all: released unchanged
		{" no ", "continue", " no ", ""},
		{"da", "replace", "", "da"},
		{"llexx", "stop", correction, ""},
	}
	for i, st := range steps {
		before := s.out.Len()
		d := s.send(t, st.text, 0)
		if d.verdict.String() != st.verdict || s.out.String()[before:] != st.out || (!s.stopped && s.heldText(t) != st.held) {
			t.Fatalf("step %d %q: verdict %v, out %q, held %q; want %s %q %q", i, st.text, d.verdict, s.out.String()[before:], s.heldText(t), st.verdict, st.out, st.held)
		}
	}
}

func TestHoldbackOverlappingMarkers(t *testing.T) {
	g := mustGuard(t, `{"markers":["abcd", "bcx", "cd"], "correction":"!"}`)
	tests := []struct{ text, want string }{
		{"zabcx", "za!"},   // "bcx" ends first; "a" was held as part of "abc…"
		{"zabcd", "z!"},    // "cd" and "abcd" end together: the longer one decides where the text stops
		{"zabce", "zabce"}, // a prefix of three markers that is none
		{"zab cd", "zab !"},
	}
	for _, tt := range tests {
		for cut := 0; cut <= len(tt.text); cut++ {
			if got := newSim(g, `{}`).stream(t, splitAt(tt.text, cut)); got != tt.want {
				t.Errorf("%q cut at %d: got %q, want %q", tt.text, cut, got, tt.want)
			}
		}
	}
}

func TestHoldbackCaseInsensitive(t *testing.T) {
	text := "see https://OaiDalleApiProdScus.Blob.Core.Windows.Net/x.png"
	if got := newSim(mustGuard(t, cfg("")), `{}`).stream(t, splitAt(text, 20)); got != text {
		t.Fatalf("case-sensitive: got %q", got)
	}
	if got := newSim(mustGuard(t, cfg(`, "case_insensitive": true`)), `{}`).stream(t, splitAt(text, 20)); got != "see https://"+correction {
		t.Fatalf("case-insensitive: got %q", got)
	}
}

func TestHoldbackEvidenceURLMustMatch(t *testing.T) {
	g := mustGuard(t, cfg(""))
	other := "https://" + marker + "/private/other.png"
	tests := []struct {
		name, text, want string
	}{
		{"the same URL", "A " + imgURL + ". B", "A " + imgURL + ". B"},
		{"in Markdown", "![img](" + imgURL + ")", "![img](" + imgURL + ")"},
		{"another URL on the host", "A " + other + " B", "A https://" + correction},
		{"the URL cut short", "A " + imgURL[:len(imgURL)-4] + " B", "A https://" + correction},
		{"the URL made longer", "A " + imgURL + "x B", "A https://" + correction},
		{"twice, then a bad one", imgURL + " " + imgURL + " " + other, imgURL + " " + imgURL + " https://" + correction},
		{"at the very end", "A " + imgURL, "A " + imgURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for cut := 0; cut <= len(tt.text); cut += 7 {
				if got := newSim(g, toolBody(imgURL)).stream(t, splitAt(tt.text, cut)); got != tt.want {
					t.Fatalf("cut at %d: got %q, want %q", cut, got, tt.want)
				}
			}
		})
	}
}

// A URL that can no longer match any evidence stops without waiting for
// its end.
func TestHoldbackEvidenceStopsEarly(t *testing.T) {
	g := mustGuard(t, cfg(""))
	s := newSim(g, toolBody(imgURL))
	s.send(t, "A https://"+marker+"/private/", 0)
	if s.stopped || s.out.String() != "A https://" {
		t.Fatalf("out %q", s.out.String())
	}
	if d := s.send(t, "zzz", 0); d.verdict != sdk.Stop || s.out.String() != "A https://"+correction {
		t.Fatalf("verdict %v, out %q", d.verdict, s.out.String())
	}
}

// Tool calls, the finish and the end release held text before them; other
// events without text pass at once and leave it held.
func TestHoldbackEventsWithoutText(t *testing.T) {
	g := mustGuard(t, cfg(""))
	s := newSim(g, `{}`)
	if d := s.send(t, "", sdk.ChunkRole); d.verdict != sdk.Continue {
		t.Fatalf("role: %v", d.verdict)
	}
	s.send(t, "see oaidalle", 0)
	if d := s.send(t, "", sdk.ChunkUsage); d.verdict != sdk.Continue || s.heldText(t) != "oaidalle" {
		t.Fatalf("usage: %v, held %q", d.verdict, s.heldText(t))
	}
	d := s.send(t, "", sdk.ChunkToolCalls)
	if d.verdict != sdk.Replace || string(d.emit) != "oaidalle" || s.heldText(t) != "" {
		t.Fatalf("tool call: %v %q, held %q", d.verdict, d.emit, s.heldText(t))
	}
	// The marker continues after the tool call: only its prefix was sent,
	// its last byte stops the reply.
	s.send(t, "apiprodscus.blob.core.windows.ne", 0)
	if d := s.send(t, "t/x.png", 0); d.verdict != sdk.Stop || string(d.emit) != correction {
		t.Fatalf("after the tool call: %v %q", d.verdict, d.emit)
	}
	if strings.Contains(s.out.String(), marker) {
		t.Fatalf("the marker reached the client: %q", s.out.String())
	}

	s = newSim(g, `{}`)
	s.send(t, "the end: oaidalleapi", 0)
	if d := s.send(t, "", sdk.ChunkFinish); d.verdict != sdk.Replace || string(d.emit) != "oaidalleapi" {
		t.Fatalf("finish: %v %q", d.verdict, d.emit)
	}
	if d := s.send(t, "", sdk.ChunkDone); d.verdict != sdk.Continue {
		t.Fatalf("done: %v", d.verdict)
	}
	s = newSim(g, `{}`)
	s.send(t, "no finish: oaidalle", 0)
	if d := s.send(t, "", sdk.ChunkDone); d.verdict != sdk.Replace || string(d.emit) != "oaidalle" || s.out.String() != "no finish: oaidalle" {
		t.Fatalf("done: %v %q", d.verdict, d.emit)
	}
	// Text and finish in one event.
	s = newSim(g, `{}`)
	s.send(t, "a oaid", 0)
	if d := s.send(t, "all", sdk.ChunkFinish); d.verdict != sdk.Replace || string(d.emit) != "oaidall" {
		t.Fatalf("text with finish: %v %q", d.verdict, d.emit)
	}
}

// A pending URL ends at a tool call or the finish and is decided there.
func TestHoldbackPendingAtBoundary(t *testing.T) {
	g := mustGuard(t, cfg(""))
	s := newSim(g, toolBody(imgURL))
	s.send(t, "A "+imgURL, 0)
	if s.out.String() != "A https://" {
		t.Fatalf("out %q", s.out.String())
	}
	if d := s.send(t, "", sdk.ChunkFinish); d.verdict != sdk.Replace || s.out.String() != "A "+imgURL {
		t.Fatalf("finish: %v, out %q", d.verdict, s.out.String())
	}
	s = newSim(g, toolBody(imgURL))
	s.send(t, "A "+imgURL[:len(imgURL)-3], 0)
	if d := s.send(t, "", sdk.ChunkToolCalls); d.verdict != sdk.Stop || s.out.String() != "A https://"+correction {
		t.Fatalf("tool call: %v, out %q", d.verdict, s.out.String())
	}
}

func TestHoldbackBufferMode(t *testing.T) {
	g := mustGuard(t, cfg(`, "mode": "buffer"`))
	text := "Here: " + imgURL + " ok"
	s := newSim(g, toolBody(imgURL))
	for _, p := range splitAt(text, 5, 30, 60) {
		if d := s.send(t, p, 0); d.verdict != sdk.Hold || s.out.Len() != 0 {
			t.Fatalf("%q: %v, out %q", p, d.verdict, s.out.String())
		}
	}
	if d := s.send(t, "", sdk.ChunkFinish); d.verdict != sdk.Hold {
		t.Fatalf("finish: %v", d.verdict)
	}
	if d := s.send(t, "", sdk.ChunkDone); d.verdict != sdk.Continue || s.out.String() != text {
		t.Fatalf("done: %v, out %q", d.verdict, s.out.String())
	}
	if got := newSim(g, `{}`).stream(t, splitAt(text, 5, 30, 60)); got != correction {
		t.Fatalf("no evidence: got %q", got)
	}
}

func TestHoldbackWhole(t *testing.T) {
	g := mustGuard(t, cfg(""))
	text := "Here: " + imgURL
	whole := func(body string) decision {
		var st reqState
		return g.onEvent(&st, []byte(text), sdk.ChunkText|sdk.ChunkWhole, func() []byte { return []byte(body) })
	}
	if d := whole(toolBody(imgURL)); d.verdict != sdk.Continue || d.passed != 1 {
		t.Fatalf("evidence: %+v", d)
	}
	if d := whole(`{}`); d.verdict != sdk.Replace || string(d.emit) != correction {
		t.Fatalf("no evidence: %+v", d)
	}
	// Buffer mode changes nothing for a whole reply.
	g = mustGuard(t, cfg(`, "mode": "buffer"`))
	if d := whole(`{}`); d.verdict != sdk.Replace || string(d.emit) != correction {
		t.Fatalf("buffer mode: %+v", d)
	}
}

func TestHoldbackLongRuns(t *testing.T) {
	g := mustGuard(t, cfg(""))
	long := strings.Repeat("a", maxURL+100)
	bare := marker + "/x.png"
	// A run longer than the guard keeps, then a marker: the URL's start
	// is lost, so no evidence can match.
	if got := newSim(g, toolBody(bare)).stream(t, []string{long, bare + " x"}); got != long+correction {
		t.Fatalf("long run then the marker: got …%q", got[len(long):])
	}
	// The same with "=" before the URL: the scheme marks its start.
	withEq := long + "=" + imgURL + " x"
	if got := newSim(g, toolBody(imgURL)).stream(t, []string{withEq[:maxURL], withEq[maxURL:]}); got != withEq {
		t.Fatalf("long run then =https://…: got …%q", got[len(long):])
	}
	// Letters run into the scheme ("aaa…https://"), making the URL too long.
	if got := newSim(g, toolBody(imgURL)).stream(t, []string{long, imgURL[:20], imgURL[20:] + " x"}); got != long+"https://"+correction {
		t.Fatalf("long run then https://…: got …%q", got[len(long):])
	}
	// A URL longer than maxURL never passes.
	huge := imgURL + strings.Repeat("b", maxURL)
	if got := newSim(g, toolBody(huge)).stream(t, []string{"x " + huge}); got != "x https://"+correction {
		t.Fatalf("huge URL: got %.40q", got)
	}
}
