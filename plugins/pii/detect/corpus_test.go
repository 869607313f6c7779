package detect

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
)

// corpusCase is one line of testdata/corpus.txt: the text to scan and the
// spans marked in it.
type corpusCase struct {
	line int
	text string
	want []Span
}

// readCorpus parses testdata/corpus.txt (its header explains the format).
func readCorpus(t testing.TB) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.ReplaceAll(line, `\n`, "\n")
		c := corpusCase{line: n}
		var text strings.Builder
		for {
			open := strings.Index(line, "[[")
			if open < 0 {
				text.WriteString(line)
				break
			}
			text.WriteString(line[:open])
			rest := line[open+2:]
			colon, end := strings.IndexByte(rest, ':'), strings.Index(rest, "]]")
			if colon < 0 || end < colon {
				t.Fatalf("corpus line %d: a mark without kind:text]]", n)
			}
			set, ok := ParseSet(rest[:colon])
			if !ok || len(set.Kinds()) != 1 {
				t.Fatalf("corpus line %d: unknown kind %q", n, rest[:colon])
			}
			start := text.Len()
			text.WriteString(rest[colon+1 : end])
			c.want = append(c.want, Span{Start: start, End: text.Len(), Kind: set.Kinds()[0]})
			line = rest[end+2:]
		}
		c.text = text.String()
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func describe(text string, spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(" " + s.Kind.String() + ":" + `"` + text[s.Start:s.End] + `"`)
	}
	if b.Len() == 0 {
		return " (none)"
	}
	return b.String()
}

// TestCorpus scans every line of the corpus with every detector on and
// expects exactly the marked spans: true positives found whole, false
// positives not reported.
func TestCorpus(t *testing.T) {
	s := New(Options{})
	cases := readCorpus(t)
	positives, negatives := 0, 0
	for _, c := range cases {
		got := s.Append(nil, []byte(c.text))
		if len(c.want) == 0 {
			negatives++
		} else {
			positives += len(c.want)
		}
		if !equalSpans(got, c.want) {
			t.Errorf("corpus line %d %q:\n got%s\nwant%s", c.line, c.text, describe(c.text, got), describe(c.text, c.want))
		}
	}
	if positives < 60 || negatives < 40 {
		t.Errorf("the corpus has %d positives and %d negative lines; it lost cases", positives, negatives)
	}
}

// TestCorpusOneKind scans with one detector on at a time: it reports the
// spans of its kind and nothing else.
func TestCorpusOneKind(t *testing.T) {
	cases := readCorpus(t)
	for _, k := range All.Kinds() {
		s := New(Options{Kinds: SetOf(k)})
		for _, c := range cases {
			var want []Span
			for _, sp := range c.want {
				if sp.Kind == k {
					want = append(want, sp)
				}
			}
			// A detector on its own may find a shorter span inside
			// another kind's (a phone number's digits in an IBAN).
			got := s.Append(nil, []byte(c.text))
			got = slices.DeleteFunc(got, func(g Span) bool {
				return slices.ContainsFunc(c.want, func(w Span) bool {
					return w.Kind != k && w.Start <= g.Start && g.End <= w.End
				})
			})
			if !equalSpans(got, want) {
				t.Errorf("%s, corpus line %d %q:\n got%s\nwant%s", k, c.line, c.text, describe(c.text, got), describe(c.text, want))
			}
		}
	}
}

func equalSpans(a, b []Span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
