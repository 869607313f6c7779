package main

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk"
)

// streamReply runs the reply events through onEvent as the host would:
// the state encoded and decoded between events, the text of a Continue
// forwarded as is, of a Replace as emitted. The pieces are text events,
// followed by a finish event and the end of the stream.
func streamReply(t *testing.T, p *policy, entries []entry, pieces []string) string {
	t.Helper()
	var w replyWork
	raw := encodeState(nil, entries, nil)
	var out strings.Builder
	send := func(text string, f sdk.ChunkFlags) {
		var st replyState
		var err error
		st.entries, st.held, err = decodeState(nil, raw)
		if err != nil {
			t.Fatal(err)
		}
		st.held = append([]byte(nil), st.held...)
		d := p.onEvent(&w, &st, []byte(text), f)
		switch d.verdict {
		case sdk.Continue:
			out.WriteString(text)
		case sdk.Replace:
			out.Write(d.emit)
		default:
			t.Fatalf("verdict %v", d.verdict)
		}
		raw = encodeState(nil, st.entries, st.held)
	}
	for _, piece := range pieces {
		send(piece, sdk.ChunkText)
	}
	send("", sdk.ChunkFinish)
	send("", sdk.ChunkDone)
	if len(raw) > 0 {
		if _, held, _ := decodeState(nil, raw); len(held) > 0 {
			t.Fatalf("%q still held after the end", held)
		}
	}
	return out.String()
}

func wholeReply(t *testing.T, p *policy, entries []entry, text string) string {
	t.Helper()
	var w replyWork
	st := replyState{entries: entries}
	d := p.onEvent(&w, &st, []byte(text), sdk.ChunkWhole|sdk.ChunkText)
	if d.verdict == sdk.Continue {
		return text
	}
	return string(d.emit)
}

func maskPolicy(t *testing.T, extra string) *policy {
	t.Helper()
	p, err := parseConfig([]byte(`{"mode":"mask-and-restore"` + extra + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var testEntries = []entry{
	{kind: detect.Email, n: 1, original: []byte("john@example.com")},
	{kind: detect.Email, n: 2, original: []byte("jane@example.org")},
	{kind: detect.Phone, n: 1, original: []byte("+1 415 555 0100")},
	{kind: detect.Email, n: 12, original: []byte("twelve@example.net")},
}

// restoreCases are replies and what the client must get.
var restoreCases = []struct{ name, reply, want string }{
	{"one", "Write to [EMAIL_1] today.", "Write to john@example.com today."},
	{"adjacent", "[EMAIL_1][EMAIL_2][PHONE_1]", "john@example.comjane@example.org+1 415 555 0100"},
	{"longest number", "[EMAIL_12] and [EMAIL_1]", "twelve@example.net and john@example.com"},
	{"unknown placeholder", "[EMAIL_3] and [EMAIL_1x] and [CARD_1]", "[EMAIL_3] and [EMAIL_1x] and [CARD_1]"},
	{"brackets", "a [link](x) [[EMAIL_2]] [", "a [link](x) [jane@example.org] ["},
	{"unfinished at the end", "see [EMAIL_", "see [EMAIL_"},
	{"no placeholder", "Nothing to restore here.", "Nothing to restore here."},
}

func TestRestoreWhole(t *testing.T) {
	p := maskPolicy(t, "")
	for _, tc := range restoreCases {
		if got := wholeReply(t, p, testEntries, tc.reply); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRestoreEverySplit cuts each reply at every pair of offsets (two and
// three events, empty events included): the client always gets the same
// text.
func TestRestoreEverySplit(t *testing.T) {
	p := maskPolicy(t, "")
	for _, tc := range restoreCases {
		n := len(tc.reply)
		for a := 0; a <= n; a++ {
			if got := streamReply(t, p, testEntries, []string{tc.reply[:a], tc.reply[a:]}); got != tc.want {
				t.Fatalf("%s, cut at %d: got %q, want %q", tc.name, a, got, tc.want)
			}
			for b := a; b <= n; b++ {
				pieces := []string{tc.reply[:a], tc.reply[a:b], tc.reply[b:]}
				if got := streamReply(t, p, testEntries, pieces); got != tc.want {
					t.Fatalf("%s, cuts at %d, %d: got %q, want %q", tc.name, a, b, got, tc.want)
				}
			}
		}
	}
}

// TestRestoreBytewise sends one byte per event.
func TestRestoreBytewise(t *testing.T) {
	p := maskPolicy(t, "")
	for _, tc := range restoreCases {
		var pieces []string
		for i := range len(tc.reply) {
			pieces = append(pieces, tc.reply[i:i+1])
		}
		if got := streamReply(t, p, testEntries, pieces); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRestoreHoldsOnlyPrefixes: text that cannot start a placeholder goes
// out in its own event, unchanged (Continue); only a tail that could is
// held.
func TestRestoreHoldsOnlyPrefixes(t *testing.T) {
	p := maskPolicy(t, "")
	var w replyWork
	st := replyState{entries: testEntries}
	steps := []struct {
		text    string
		verdict sdk.Verdict
		out     string
		held    string
	}{
		{"Hello ", sdk.Continue, "", ""},
		{"write to [EM", sdk.Replace, "write to ", "[EM"},
		{"AIL_1", sdk.Replace, "", "[EMAIL_1"},
		{"] or [x]", sdk.Replace, "john@example.com or [x]", ""},
		{"[EMAIL_1", sdk.Replace, "", "[EMAIL_1"}, // could still be [EMAIL_12]
		{"2]", sdk.Replace, "twelve@example.net", ""},
	}
	for _, s := range steps {
		d := p.onEvent(&w, &st, []byte(s.text), sdk.ChunkText)
		if d.verdict != s.verdict || (d.verdict == sdk.Replace && string(d.emit) != s.out) || string(st.held) != s.held {
			t.Fatalf("%q: verdict %v emit %q held %q; want %v %q %q", s.text, d.verdict, d.emit, st.held, s.verdict, s.out, s.held)
		}
	}
	if d := p.onEvent(&w, &st, nil, sdk.ChunkUsage); d.verdict != sdk.Continue {
		t.Fatalf("a usage event: %v", d.verdict)
	}
}

// A custom template restores too, with a kind after the number.
func TestRestoreTemplate(t *testing.T) {
	p := maskPolicy(t, `, "placeholder": "<<{N}:{KIND}>>"`)
	reply := "mail <<1:EMAIL>> or <<12:EMAIL>>, call <<1:PHONE>>"
	want := "mail john@example.com or twelve@example.net, call +1 415 555 0100"
	for a := 0; a <= len(reply); a++ {
		if got := streamReply(t, p, testEntries, []string{reply[:a], reply[a:]}); got != want {
			t.Fatalf("cut at %d: %q", a, got)
		}
	}
}

// TestRestoreEventAllocs: once its buffers have grown, a streamed event's
// restore — the state decoded, the text restored, the state encoded —
// allocates nothing.
func TestRestoreEventAllocs(t *testing.T) {
	p := maskPolicy(t, "")
	var w replyWork
	var st replyState
	state, next := encodeState(nil, testEntries, nil), []byte(nil)
	toks := []string{" write", " to", " [EMAIL_1]", " [EMA", "IL_2]", " now"}
	i := 0
	step := func() {
		entries, held, err := decodeState(st.entries, state)
		if err != nil {
			t.Fatal(err)
		}
		st.entries, st.held = entries, append(st.held[:0], held...)
		p.onEvent(&w, &st, []byte(toks[i%len(toks)]), sdk.ChunkText)
		// Encoded into another buffer: the entries alias this one.
		next = encodeState(next[:0], st.entries, st.held)
		state, next = next, state
		i++
	}
	for range 2 * len(toks) {
		step()
	}
	if n := testing.AllocsPerRun(60, step); n != 0 {
		t.Errorf("%v allocations per event", n)
	}
}
