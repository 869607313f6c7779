package sse

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzReader splits random input delivered in random read sizes with a
// random event size limit and checks it against the reference splitter:
// no panic, byte-exact concatenation of raw events (plus the partial
// tail), identical event data, and no event longer than the limit.
func FuzzReader(f *testing.F) {
	f.Add([]byte(openAIStream), uint64(1), uint16(0))
	f.Add([]byte("data: a\r\n\r\ndata: b\r\r\n"), uint64(7), uint16(5))
	f.Add([]byte("\r\n\r\r\n\n: c\n\nevent: x\nid: 1\nretry: 3\ndata\ndata:\ndata: z\n\n"), uint64(3), uint16(64))
	f.Add([]byte("data: partial"), uint64(9), uint16(0))
	f.Add([]byte("data: "+string(bytes.Repeat([]byte("q"), 300))+"\n\n"), uint64(11), uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64, limit uint16) {
		lim := int(limit)
		if lim == 0 {
			lim = len(in) + 1 // large enough for any event
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		checkAgainstReference(t, in, &randReader{data: bytes.Clone(in), rng: rng}, lim)
		// AppendData must accept any raw event.
		for _, ev := range bytes.SplitAfter(in, []byte("\n\n")) {
			d, ok := AppendData(nil, ev)
			if !ok && len(d) != 0 {
				t.Fatalf("ok=false with data %q", d)
			}
		}
	})
}
