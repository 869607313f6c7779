package sse

import (
	"io"
	"strings"
	"testing"
)

// pieces is a source that returns one piece per Read and knows which have
// arrived: Ready is true while a piece is left before the first one that
// has not (at index arrived).
type pieces struct {
	parts   []string
	arrived int
	reads   int
}

func (p *pieces) Read(b []byte) (int, error) {
	p.reads++
	if len(p.parts) == 0 {
		return 0, io.EOF
	}
	if p.arrived == 0 {
		p.arrived = 1 // a blocking read: the next piece arrives
	}
	n := copy(b, p.parts[0])
	p.parts[0] = p.parts[0][n:]
	if p.parts[0] == "" {
		p.parts, p.arrived = p.parts[1:], p.arrived-1
	}
	return n, nil
}

func (p *pieces) Ready() bool { return p.arrived > 0 && len(p.parts) > 0 }

func TestMoreTakesWhatHasArrived(t *testing.T) {
	// Three events framed apart by the source (as an upstream's chunks),
	// the first two arrived together, the third not yet.
	src := &pieces{parts: []string{"data: a\n\n", "data: b\n", "\n", "data: c\n\n"}, arrived: 3}
	r := NewReader(src, 0)
	if ev, err := r.Next(); err != nil || string(ev) != "data: a\n\n" {
		t.Fatalf("%q %v", ev, err)
	}
	if r.Buffered() {
		t.Fatal("Buffered: the next event is still in the source")
	}
	reads := src.reads
	if !r.More() {
		t.Fatal("More: the second event has arrived in two pieces")
	}
	if ev, err := r.Next(); err != nil || string(ev) != "data: b\n\n" {
		t.Fatalf("%q %v", ev, err)
	}
	if src.reads != reads+2 {
		t.Fatalf("%d reads for the second event, want 2", src.reads-reads)
	}
	if r.More() {
		t.Fatal("More: the third event has not arrived")
	}
	if src.reads != reads+2 {
		t.Fatal("More read from a source that was not ready")
	}
	if ev, err := r.Next(); err != nil || string(ev) != "data: c\n\n" {
		t.Fatalf("%q %v", ev, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("err %v, want EOF", err)
	}
}

func TestMoreWithoutReadySource(t *testing.T) {
	r := NewReader(struct{ io.Reader }{strings.NewReader("data: a\n\ndata: b\n\n")}, 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	// Both events came in one read: Buffered and More agree.
	if !r.Buffered() || !r.More() {
		t.Fatal("the buffered event was not reported")
	}
	r.Next()
	if r.More() {
		t.Fatal("More without a Ready source must not read")
	}
}
