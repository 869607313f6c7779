package detect

import (
	"testing"
)

// FuzzScan: on any text the scanner does not panic and reports spans in
// range, in order, non-empty and non-overlapping, of the kinds asked for,
// each of which the scanner also reports, whole, in its text alone.
func FuzzScan(f *testing.F) {
	for _, c := range readCorpus(f) {
		f.Add(c.text, uint32(All), false)
	}
	f.Add("+44 (0)20 7946 0958 -----BEGIN PRIVATE KEY-----", uint32(SetOf(Phone, Secret)), true)
	f.Add("a.a.a.a.a.a.a.a@", uint32(All), false)
	f.Fuzz(func(t *testing.T, text string, kinds uint32, private bool) {
		s := New(Options{Kinds: Set(kinds), PrivateIPs: private})
		spans := s.Append(nil, []byte(text))
		prev := 0
		for _, sp := range spans {
			if sp.Start < prev || sp.End <= sp.Start || sp.End > len(text) {
				t.Fatalf("span %+v after %d in %d bytes", sp, prev, len(text))
			}
			if !sp.Kind.Valid() || !s.Kinds().Has(sp.Kind) {
				t.Fatalf("span %+v of a kind not asked for (%b)", sp, s.Kinds())
			}
			prev = sp.End
			// A finding is one on its own too: the detectors decide from
			// the span and its boundaries, not from text further away.
			alone := s.Append(nil, []byte(text[sp.Start:sp.End]))
			if len(alone) != 1 || alone[0] != (Span{0, sp.End - sp.Start, sp.Kind}) {
				t.Fatalf("%s %q in %q is %+v on its own", sp.Kind, text[sp.Start:sp.End], text, alone)
			}
		}
	})
}
