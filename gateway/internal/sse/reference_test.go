package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// refSplit is an independent, deliberately naive splitter used as a test
// oracle: it sees the whole input at once, so a CR is always paired with a
// following LF. It returns the raw events and the trailing partial event.
func refSplit(in []byte) (events [][]byte, partial []byte) {
	start := 0
	lineStart := true
	for i := 0; i < len(in); {
		c := in[i]
		n := 0 // length of the line ending at i, 0 if none
		switch {
		case c == '\r' && i+1 < len(in) && in[i+1] == '\n':
			n = 2
		case c == '\r' || c == '\n':
			n = 1
		}
		if n == 0 {
			lineStart = false
			i++
			continue
		}
		i += n
		if lineStart {
			events = append(events, in[start:i])
			start = i
		}
		lineStart = true
	}
	return events, in[start:]
}

// isBlank reports whether raw holds nothing but line endings.
func isBlank(raw []byte) bool {
	return len(bytes.Trim(raw, "\r\n")) == 0
}

// semantic maps raw events to what a consumer sees: the data of each
// non-blank event ("<none>" for events without data).
func semantic(raws [][]byte) []string {
	var out []string
	for _, raw := range raws {
		if isBlank(raw) {
			continue
		}
		d, ok := AppendData(nil, raw)
		if !ok {
			out = append(out, "<none>")
			continue
		}
		out = append(out, "data="+string(d))
	}
	return out
}

// randReader returns the input in pseudo-random read sizes, occasionally
// returning (0, nil) and sometimes returning the last bytes with io.EOF.
type randReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *randReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	var n int
	switch r.rng.IntN(8) {
	case 0:
		return 0, nil
	case 1, 2, 3:
		n = 1 + r.rng.IntN(3)
	case 4, 5:
		n = 1 + r.rng.IntN(64)
	case 6:
		n = 1 + r.rng.IntN(4096)
	default:
		n = len(p)
	}
	n = copy(p[:min(n, len(p))], r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 && r.rng.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// readAll drains r, returning the raw events and the final (non-nil) error
// with the bytes returned alongside it.
func readAll(t testing.TB, r *Reader) (raws [][]byte, last []byte, err error) {
	t.Helper()
	for i := 0; ; i++ {
		if i > 1<<22 {
			t.Fatal("Next did not terminate")
		}
		raw, err := r.Next()
		if err != nil {
			return raws, bytes.Clone(raw), err
		}
		if len(raw) == 0 {
			t.Fatal("Next returned an empty event without error")
		}
		raws = append(raws, bytes.Clone(raw))
	}
}

// checkAgainstReference splits in with a Reader over src and compares the
// result with refSplit: byte-exact concatenation, same event data, same
// kind of ending, and the size limit honoured.
func checkAgainstReference(t testing.TB, in []byte, src io.Reader, limit int) {
	t.Helper()
	raws, last, err := readAll(t, NewReader(src, limit))
	var got []byte
	for _, raw := range raws {
		if len(raw) > limit {
			t.Fatalf("event of %d bytes exceeds max %d", len(raw), limit)
		}
		got = append(got, raw...)
	}
	if len(last) > limit {
		t.Fatalf("partial event of %d bytes exceeds max %d", len(last), limit)
	}
	got = append(got, last...)

	refEvents, refPartial := refSplit(in)
	longest := len(refPartial)
	for _, ev := range refEvents {
		longest = max(longest, len(ev))
	}
	if errors.Is(err, ErrEventTooLarge) {
		if len(last) != 0 {
			t.Fatalf("ErrEventTooLarge returned %d bytes", len(last))
		}
		if !bytes.HasPrefix(in, got) {
			t.Fatalf("events before ErrEventTooLarge are not a prefix of the input")
		}
		if longest < limit {
			t.Fatalf("ErrEventTooLarge with max %d but the longest event has %d bytes", limit, longest)
		}
		return
	}
	if longest > limit+1 {
		t.Fatalf("no ErrEventTooLarge with max %d but an event has %d bytes", limit, longest)
	}
	if !bytes.Equal(got, in) {
		t.Fatalf("concatenation differs from input\n got %q\nwant %q", got, in)
	}
	if g, w := semantic(raws), semantic(refEvents); !equalStrings(g, w) {
		t.Fatalf("event data differ\n got %q\nwant %q", g, w)
	}
	wantErr := io.EOF
	if len(refPartial) > 0 {
		wantErr = io.ErrUnexpectedEOF
	}
	if err != wantErr {
		t.Fatalf("final error %v, want %v (partial %q)", err, wantErr, refPartial)
	}
	// A partial event may start with the LF of a CRLF whose CR ended the
	// previous event at a read boundary.
	if !bytes.Equal(last, refPartial) && !(len(last) > 0 && last[0] == '\n' && bytes.Equal(last[1:], refPartial)) {
		t.Fatalf("partial %q, want %q", last, refPartial)
	}
}

func equalStrings(a, b []string) bool {
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

func TestRefSplit(t *testing.T) {
	ev, partial := refSplit([]byte("\ndata: a\r\n\r\nb\r\rc\n"))
	want := []string{"\n", "data: a\r\n\r\n", "b\r\r"}
	if len(ev) != len(want) {
		t.Fatalf("events %q", ev)
	}
	for i := range want {
		if string(ev[i]) != want[i] {
			t.Fatalf("event %d = %q, want %q", i, ev[i], want[i])
		}
	}
	if string(partial) != "c\n" {
		t.Fatalf("partial %q", partial)
	}
}
