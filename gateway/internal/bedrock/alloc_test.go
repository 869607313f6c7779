package bedrock

import (
	"testing"
)

// loopMessages serves framed messages over and over without allocating,
// in reads of at most max bytes (0: no limit).
type loopMessages struct {
	src []byte
	off int
	max int
}

func (l *loopMessages) Read(p []byte) (int, error) {
	if l.max > 0 && len(p) > l.max {
		p = p[:l.max]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.src[l.off:])
		n += c
		l.off = (l.off + c) % len(l.src)
	}
	return n, nil
}

const (
	textDeltaPayload = `{"contentBlockIndex":0,"delta":{"text":"Hello, \"world\" \u2014 this is a fairly typical streamed token or two.\n"},"p":"abcdefghijkl"}`
	argsDeltaPayload = `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"location\": \"San Fra"}}}`
)

func TestStreamTranslatorAllocs(t *testing.T) {
	for _, tc := range []struct{ name, payload string }{{"text delta", textDeltaPayload}, {"arguments delta", argsDeltaPayload}} {
		t.Run(tc.name, func(t *testing.T) {
			var tr StreamTranslator
			tr.Reset("claude-alias", "chatcmpl-0123456789", 1700000000, true)
			var out []byte
			var err error
			var m Message
			for _, raw := range [][]byte{
				eventMessage(t, "messageStart", `{"role":"assistant"}`),
				eventMessage(t, "contentBlockStart", `{"contentBlockIndex":1,"start":{"toolUse":{"toolUseId":"t1","name":"get_weather"}}}`),
			} {
				if _, err := ParseMessage(raw, &m); err != nil {
					t.Fatal(err)
				}
				if out, err = tr.Append(out, &m); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := ParseMessage(eventMessage(t, "contentBlockDelta", tc.payload), &m); err != nil {
				t.Fatal(err)
			}
			for range 10 {
				out, _ = tr.Append(out[:0], &m)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				out, err = tr.Append(out[:0], &m)
			})
			if err != nil || allocs != 0 || len(out) == 0 {
				t.Fatalf("%v allocs per event (err %v, %d bytes out), want 0", allocs, err, len(out))
			}
		})
	}
}

// TestStreamReaderAllocs is the stream hot path end to end: decoding the
// framing, checking both CRCs, parsing the payload and writing the chunk.
func TestStreamReaderAllocs(t *testing.T) {
	for _, max := range []int{0, 100} {
		r := NewStreamReader(0)
		src := &loopMessages{src: stream(
			eventMessage(t, "contentBlockDelta", textDeltaPayload),
			eventMessage(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hmm"}}}`),
		), max: max}
		r.Reset(src, "claude-alias", "chatcmpl-0123456789", 1700000000, false)
		buf := make([]byte, 32<<10)
		for range 100 {
			if _, err := r.Read(buf); err != nil {
				t.Fatal(err)
			}
		}
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := r.Read(buf); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Fatalf("reads of %d bytes: %v allocs per Read, want 0", max, allocs)
		}
	}
}
