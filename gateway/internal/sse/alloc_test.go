package sse

import (
	"io"
	"testing"
)

// loopReader serves src over and over, in reads of at most chunk bytes,
// without allocating.
type loopReader struct {
	src   []byte
	off   int
	chunk int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if l.chunk > 0 && len(p) > l.chunk {
		p = p[:l.chunk]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.src[l.off:])
		n += c
		l.off = (l.off + c) % len(l.src)
	}
	return n, nil
}

var _ io.Reader = (*loopReader)(nil)

func TestNextAndAppendDataDoNotAllocate(t *testing.T) {
	for _, chunk := range []int{0, 37, 1500} {
		r := NewReader(&loopReader{src: []byte(openAIStream), chunk: chunk}, 0)
		var data []byte
		for range 100 { // warm up: let data reach its final capacity
			raw, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			data, _ = AppendData(data[:0], raw)
		}
		allocs := testing.AllocsPerRun(1000, func() {
			raw, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			data, _ = AppendData(data[:0], raw)
			_ = IsDone(data)
			_ = r.Buffered()
		})
		if allocs != 0 {
			t.Fatalf("chunk %d: %v allocs per event, want 0", chunk, allocs)
		}
	}
}
