package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestHoldbackProperty streams random texts with random markers in random
// chunkings, without evidence, and checks after every event that the text
// released and the text held make up exactly the upstream text, that what
// is held is exactly the longest suffix that is a proper prefix of a
// marker, that no marker reaches the client, and at the end that the
// reply is the text before the first marker and the correction.
func TestHoldbackProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		c := randomCase(r)
		checkStream(t, c, newSimStreamer(t, mustGuard(t, c.config)), r)
	}
}

// A streamer is a stream through the guard: the native sim or the plugin.
type streamer interface {
	// send sends one text event and returns all the text the client has
	// received, and whether the reply stopped.
	send(text string) (out string, stopped bool)
	// held returns the text the guard holds, as far as it can be seen.
	held(fed string, out string) string
	// finish sends the finish and [DONE] and returns the reply.
	finish() string
}

type simStreamer struct {
	t testing.TB
	s *sim
}

func newSimStreamer(t testing.TB, g *guard) *simStreamer {
	return &simStreamer{t: t, s: newSim(g, `{"messages":[]}`)}
}

func (x *simStreamer) send(text string) (string, bool) {
	x.s.send(x.t, text, 0)
	return x.s.out.String(), x.s.stopped
}
func (x *simStreamer) held(string, string) string { return x.s.heldText(x.t) }
func (x *simStreamer) finish() string             { return x.s.stream(x.t, nil) }

// randomCase is a random config (markers over a small alphabet, sometimes
// case-insensitive, correction "!") and a text that sometimes contains
// them.
type randomCaseT struct {
	markers []string
	fold    bool
	config  string
	text    string
}

func randomCase(r *rand.Rand) randomCaseT {
	var c randomCaseT
	c.markers = make([]string, 1+r.IntN(4))
	for i := range c.markers {
		c.markers[i] = randString(r, "ab./", 1+r.IntN(6))
	}
	c.fold = r.IntN(4) == 0
	c.config = `{"markers":["` + strings.Join(c.markers, `","`) + `"], "correction":"!"`
	if c.fold {
		c.config += `, "case_insensitive": true`
	}
	c.config += "}"
	c.text = randomText(r, c.markers)
	return c
}

func randomText(r *rand.Rand, markers []string) string {
	var tb strings.Builder
	for n := r.IntN(100); tb.Len() < n; {
		if r.IntN(8) == 0 {
			tb.WriteString(markers[r.IntN(len(markers))])
		} else {
			tb.WriteString(randString(r, "abAB./ ", 1+r.IntN(5)))
		}
	}
	return tb.String()
}

func checkStream(t testing.TB, c randomCaseT, st streamer, r *rand.Rand) {
	t.Helper()
	text := c.text
	fed, stopped := 0, false
	var out string
	for fed < len(text) && !stopped {
		k := min(len(text), fed+r.IntN(8))
		out, stopped = st.send(text[fed:k])
		fed = k
		if stopped {
			break
		}
		held := st.held(text[:fed], out)
		if out+held != text[:fed] {
			t.Fatalf("markers %q text %q after %d bytes: out %q + held %q", c.markers, text, fed, out, held)
		}
		if depth, _ := naiveState(c.markers, text[:fed], c.fold); len(held) != depth {
			t.Fatalf("markers %q after %q: held %q, want %d bytes", c.markers, text[:fed], held, depth)
		}
		if firstMarkerEnd(c.markers, out, c.fold) >= 0 {
			t.Fatalf("markers %q: a marker reached the client: %q", c.markers, out)
		}
	}
	want := text
	if e := firstMarkerEnd(c.markers, text, c.fold); e >= 0 {
		_, m := naiveState(c.markers, text[:e], c.fold)
		want = text[:e-m] + "!"
	}
	got := out
	if !stopped {
		got = st.finish()
	}
	if got != want {
		t.Fatalf("markers %q fold %v text %q: got %q, want %q", c.markers, c.fold, text, got, want)
	}
}

// firstMarkerEnd returns the end (exclusive) of the first marker in text,
// -1 when there is none.
func firstMarkerEnd(markers []string, text string, fold bool) int {
	for e := 1; e <= len(text); e++ {
		if _, m := naiveState(markers, text[:e], fold); m > 0 {
			return e
		}
	}
	return -1
}

// TestHoldbackPropertyEvidence streams random replies made of words and URLs, some
// of which tools produced, in random chunkings: the client gets the whole
// reply when every URL with a marker has evidence, and otherwise exactly
// the text before the first marker of the first URL without, and the
// correction; released and held text always make up the upstream text.
func TestHoldbackPropertyEvidence(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	hosts := []string{"img.example.net", "cdn.example.org"}
	g := mustGuard(t, `{"markers":["img.example.net", "cdn.example"], "correction":"!"}`)
	for iter := 0; iter < 2000; iter++ {
		var words, evidence []string
		for range 1 + r.IntN(8) {
			switch r.IntN(4) {
			case 0, 1:
				words = append(words, randString(r, "abc.", 1+r.IntN(6)))
			default:
				u := "https://" + hosts[r.IntN(2)] + "/" + randString(r, "xyz/?=&%", r.IntN(12))
				words = append(words, u)
				if r.IntN(3) > 0 {
					evidence = append(evidence, u)
				}
			}
		}
		seps := []string{" ", "\n", " (", ") ", ", ", `"`}
		var tb strings.Builder
		for i, w := range words {
			if i > 0 {
				tb.WriteString(seps[r.IntN(len(seps))])
			}
			tb.WriteString(w)
		}
		text := tb.String()
		body := toolBody(strings.Join(evidence, " "))
		want := expectWithEvidence(g, text, evidence, "!")
		s := newSim(g, body)
		fed := 0
		for fed < len(text) && !s.stopped {
			k := min(len(text), fed+1+r.IntN(10))
			s.send(t, text[fed:k], 0)
			fed = k
			if !s.stopped && s.out.String()+s.heldText(t) != text[:fed] {
				t.Fatalf("text %q after %d bytes: out %q held %q", text, fed, s.out.String(), s.heldText(t))
			}
		}
		if got := s.stream(t, nil); got != want {
			t.Fatalf("text %q evidence %q: got %q, want %q", text, evidence, got, want)
		}
	}
}

// expectWithEvidence is the oracle: it cuts text into runs of URL bytes and
// checks each run with a marker against the evidence, with the same URL
// rules (urlStart, trimURL) but none of the streaming machinery.
func expectWithEvidence(g *guard, text string, evidence []string, corr string) string {
	ok := map[string]bool{}
	for _, e := range evidence {
		ok[string(trimURL([]byte(e)))] = true
	}
	for i := 0; i < len(text); {
		if !isURLByte[text[i]] {
			i++
			continue
		}
		j := i
		for j < len(text) && isURLByte[text[j]] {
			j++
		}
		run := text[i:j]
		for e := 1; e <= len(run); e++ { // the first marker in the run
			if _, m := naiveState(g.markers, run[:e], false); m > 0 {
				at, _ := urlStart([]byte(run), e)
				if !ok[string(trimURL([]byte(run[at:])))] {
					return text[:i+e-m] + corr
				}
				break
			}
		}
		i = j
	}
	return text
}
