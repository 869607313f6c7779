package main

// automaton is an Aho–Corasick automaton over the markers, compiled to a
// complete DFA: one table lookup per byte of text, whatever the number of
// markers. A state stands for the longest suffix of the text read so far
// that is a prefix of some marker; its depth is that suffix's length,
// which is exactly how many bytes the guard must hold back.
//
// Bytes are first mapped to classes (each byte that occurs in a marker is
// its own class, every other byte shares class 0), so the table has a row
// of a few dozen entries per state instead of 256. With case_insensitive,
// an upper-case ASCII letter maps to the class of its lower-case form.
//
// The automaton is built once per instance by on_configure and only read
// afterwards.
type automaton struct {
	class  [256]uint8
	nclass int
	// next[s*nclass+c] is the state after reading a byte of class c in s.
	next []uint16
	// depth[s] is the length of the marker prefix that state s stands for.
	depth []uint16
	// match[s] is the length of the longest marker that ends state s's
	// string (0: none), and matchID[s] that marker's index in the config.
	match   []uint16
	matchID []uint16
}

// Limits that keep the table small (states ≤ total bytes + 1 fit uint16)
// and the held text short.
const (
	maxMarkerBytes = 512
	maxTotalBytes  = 8192
	maxMarkers     = 256
)

func foldASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// newAutomaton builds the automaton; markers are non-empty and within the
// limits above (parseConfig checks).
func newAutomaton(markers []string, caseInsensitive bool) *automaton {
	a := &automaton{}
	fold := func(c byte) byte {
		if caseInsensitive {
			return foldASCII(c)
		}
		return c
	}
	// Classes: 0 for bytes in no marker, then one per distinct byte.
	var seen [256]uint8
	n := 1
	for _, m := range markers {
		for i := 0; i < len(m); i++ {
			c := fold(m[i])
			if seen[c] == 0 {
				seen[c] = uint8(n)
				n++
			}
		}
	}
	for b := 0; b < 256; b++ {
		a.class[b] = seen[fold(byte(b))]
	}
	a.nclass = n

	// The trie, with -1 for missing edges while building.
	trie := [][]int32{make([]int32, n)}
	for i := range trie[0] {
		trie[0][i] = -1
	}
	a.depth = []uint16{0}
	a.match = []uint16{0}
	a.matchID = []uint16{0}
	for id, m := range markers {
		s := int32(0)
		for i := 0; i < len(m); i++ {
			c := a.class[m[i]]
			if trie[s][c] < 0 {
				row := make([]int32, n)
				for j := range row {
					row[j] = -1
				}
				trie = append(trie, row)
				a.depth = append(a.depth, uint16(i+1))
				a.match = append(a.match, 0)
				a.matchID = append(a.matchID, 0)
				trie[s][c] = int32(len(trie) - 1)
			}
			s = trie[s][c]
		}
		if a.match[s] == 0 { // a repeated marker keeps its first index
			a.match[s], a.matchID[s] = uint16(len(m)), uint16(id)
		}
	}

	// Breadth-first: fill missing edges from the failure state, whose row
	// is complete by then, and inherit its match when a state has none of
	// its own (its own marker, if any, is the longer one).
	a.next = make([]uint16, len(trie)*n)
	fail := make([]int32, len(trie))
	queue := make([]int32, 0, len(trie))
	for c := 0; c < n; c++ {
		if t := trie[0][c]; t > 0 {
			a.next[c] = uint16(t)
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := fail[s]
		if a.match[s] == 0 && a.match[f] != 0 {
			a.match[s], a.matchID[s] = a.match[f], a.matchID[f]
		}
		for c := 0; c < n; c++ {
			if t := trie[s][c]; t >= 0 {
				fail[t] = int32(a.next[int(f)*n+c])
				a.next[int(s)*n+c] = uint16(t)
				queue = append(queue, t)
			} else {
				a.next[int(s)*n+c] = a.next[int(f)*n+c]
			}
		}
	}
	return a
}

// step returns the state after reading byte b in state s.
func (a *automaton) step(s uint16, b byte) uint16 {
	return a.next[int(s)*a.nclass+int(a.class[b])]
}
