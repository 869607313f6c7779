package main

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveState returns what the automaton's state after text must stand for:
// the longest suffix of text that is a prefix of some marker, and the
// longest marker that is a suffix of text.
func naiveState(markers []string, text string, fold bool) (depth, match int) {
	if fold {
		text = strings.ToLower(text)
		lower := make([]string, len(markers))
		for i, m := range markers {
			lower[i] = strings.ToLower(m)
		}
		markers = lower
	}
	for _, m := range markers {
		for n := min(len(m), len(text)); n > depth; n-- {
			if text[len(text)-n:] == m[:n] {
				depth = n
				break
			}
		}
		if len(m) > match && strings.HasSuffix(text, m) {
			match = len(m)
		}
	}
	return depth, match
}

func randString(r *rand.Rand, alphabet string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func TestHoldbackAutomatonAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		fold := iter%3 == 0
		markers := make([]string, 1+r.IntN(5))
		for i := range markers {
			markers[i] = randString(r, "abAB.", 1+r.IntN(6))
		}
		a := newAutomaton(markers, fold)
		text := randString(r, "abAB. c", r.IntN(80))
		s := uint16(0)
		for i := 0; i < len(text); i++ {
			s = a.step(s, text[i])
			depth, match := naiveState(markers, text[:i+1], fold)
			if int(a.depth[s]) != depth || int(a.match[s]) != match {
				t.Fatalf("markers %q fold %v, after %q: depth %d match %d, want %d %d",
					markers, fold, text[:i+1], a.depth[s], a.match[s], depth, match)
			}
			if match > 0 {
				id := int(a.matchID[s])
				m := markers[id]
				if fold {
					m = strings.ToLower(m)
				}
				if len(m) != match || !strings.HasSuffix(strings.ToLower(text[:i+1]), strings.ToLower(m)) {
					t.Fatalf("matchID %d (%q) does not end %q", id, markers[id], text[:i+1])
				}
			}
		}
	}
}

func TestHoldbackAutomatonMatchID(t *testing.T) {
	a := newAutomaton([]string{"windows.net", "blob.core.windows.net", "core"}, false)
	s := uint16(0)
	var ids []int
	for _, c := range []byte("x.blob.core.windows.net") {
		s = a.step(s, c)
		if a.match[s] > 0 {
			ids = append(ids, int(a.matchID[s]))
		}
	}
	// "core" ends first; at the last byte both others end, and the longer
	// one is reported.
	if len(ids) != 2 || ids[0] != 2 || ids[1] != 1 {
		t.Fatalf("matches %v, want [2 1]", ids)
	}
}
