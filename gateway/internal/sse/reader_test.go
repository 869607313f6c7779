package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

const openAIStream = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n" +
	": keep-alive\n\n" +
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
	"data: [DONE]\n\n"

func TestNextTable(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []string
		partial string
		err     error
	}{
		{name: "empty", in: "", err: io.EOF},
		{name: "lf", in: "data: a\n\ndata: b\n\n", want: []string{"data: a\n\n", "data: b\n\n"}, err: io.EOF},
		{name: "crlf", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}, err: io.EOF},
		{name: "cr", in: "data: a\r\rdata: b\r\r", want: []string{"data: a\r\r", "data: b\r\r"}, err: io.EOF},
		{name: "mixed endings", in: "data: a\r\n\ndata: b\n\r\ndata: c\r\n\r", want: []string{"data: a\r\n\n", "data: b\n\r\n", "data: c\r\n\r"}, err: io.EOF},
		{name: "leading blank lines", in: "\n\r\n\rdata: x\n\n", want: []string{"\n", "\r\n", "\r", "data: x\n\n"}, err: io.EOF},
		{name: "comment only", in: ": ping\n\ndata: x\n\n", want: []string{": ping\n\n", "data: x\n\n"}, err: io.EOF},
		{
			name: "all fields",
			in:   "event: message\nid: 7\nretry: 1000\n: note\ndata: a\ndata: b\n\n",
			want: []string{"event: message\nid: 7\nretry: 1000\n: note\ndata: a\ndata: b\n\n"},
			err:  io.EOF,
		},
		{name: "partial no newline", in: "data: a\n\ndata: b", want: []string{"data: a\n\n"}, partial: "data: b", err: io.ErrUnexpectedEOF},
		{name: "partial one newline", in: "data: a\n", partial: "data: a\n", err: io.ErrUnexpectedEOF},
		{name: "trailing blank after event", in: "data: a\n\n\n", want: []string{"data: a\n\n", "\n"}, err: io.EOF},
		{name: "openai stream", in: openAIStream, want: splitKeep(openAIStream), err: io.EOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raws, last, err := readAll(t, NewReader(strings.NewReader(tc.in), 0))
			if err != tc.err {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(raws) != len(tc.want) {
				t.Fatalf("got %d events %q, want %q", len(raws), raws, tc.want)
			}
			for i := range raws {
				if string(raws[i]) != tc.want[i] {
					t.Errorf("event %d = %q, want %q", i, raws[i], tc.want[i])
				}
			}
			if string(last) != tc.partial {
				t.Errorf("partial = %q, want %q", last, tc.partial)
			}
			// Every chunking must agree with the reference splitter.
			in := []byte(tc.in)
			checkAgainstReference(t, in, iotest.OneByteReader(bytes.NewReader(in)), DefaultMaxEventBytes)
			checkAgainstReference(t, in, iotest.DataErrReader(bytes.NewReader(in)), DefaultMaxEventBytes)
			checkAgainstReference(t, in, iotest.HalfReader(bytes.NewReader(in)), DefaultMaxEventBytes)
		})
	}
}

// splitKeep splits an LF-only stream after each "\n\n".
func splitKeep(s string) []string {
	parts := strings.SplitAfter(s, "\n\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

func TestNextAfterEndKeepsReturningEOF(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b"), 0)
	if raw, err := r.Next(); err != nil || string(raw) != "data: a\n\n" {
		t.Fatalf("first: %q %v", raw, err)
	}
	if raw, err := r.Next(); err != io.ErrUnexpectedEOF || string(raw) != "data: b" {
		t.Fatalf("second: %q %v", raw, err)
	}
	for range 3 {
		if raw, err := r.Next(); err != io.EOF || raw != nil {
			t.Fatalf("after end: %q %v", raw, err)
		}
	}
}

func TestRandomChunkings(t *testing.T) {
	inputs := []string{
		openAIStream,
		strings.ReplaceAll(openAIStream, "\n", "\r\n"),
		strings.ReplaceAll(openAIStream, "\n", "\r"),
		"\r\n\r\n\r\r\n\n\r",
		"data: a\r\r\ndata: b\r\r\n",
		"data: x\r\n\r",
		"event: e\r\nid: 1\rretry: 5\n:c\r\n\rdata\r\rdata:\n\n",
		"data: " + strings.Repeat("abc\r", 3000) + "\n\n",
	}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 42))
		for _, in := range inputs {
			b := []byte(in)
			checkAgainstReference(t, b, &randReader{data: b, rng: rng}, DefaultMaxEventBytes)
		}
	}
}

func TestCRAtReadBoundaryIsNotABlankEvent(t *testing.T) {
	// "\r" ends the event at a read boundary; the following "\n" completes
	// the CRLF and must not show up as a separate blank event.
	in := []byte("data: a\r\n\r\ndata: b\r\n\r\n")
	raws, last, err := readAll(t, NewReader(iotest.OneByteReader(bytes.NewReader(in)), 0))
	if err != io.EOF || len(last) != 0 {
		t.Fatalf("end: %q %v", last, err)
	}
	want := []string{"data: a\r\n\r", "\ndata: b\r\n\r", "\n"}
	if len(raws) != len(want) {
		t.Fatalf("events %q, want %q", raws, want)
	}
	for i := range want {
		if string(raws[i]) != want[i] {
			t.Fatalf("event %d = %q, want %q", i, raws[i], want[i])
		}
	}
}

func TestLongDataLine(t *testing.T) {
	payload := strings.Repeat("x", 700<<10)
	in := []byte("data: " + payload + "\n\ndata: [DONE]\n\n")
	rng := rand.New(rand.NewPCG(1, 2))
	r := NewReader(&randReader{data: in, rng: rng}, 0)
	raw, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	data, ok := AppendData(nil, raw)
	if !ok || string(data) != payload {
		t.Fatalf("data mismatch: ok=%v len=%d", ok, len(data))
	}
	raw, err = r.Next()
	if err != nil || string(raw) != "data: [DONE]\n\n" {
		t.Fatalf("second: %q %v", raw, err)
	}
}

func TestEventTooLarge(t *testing.T) {
	ev := "data: 0123456789\n\n" // 18 bytes
	t.Run("exactly max is fine", func(t *testing.T) {
		r := NewReader(strings.NewReader(ev+ev), len(ev))
		for range 2 {
			if raw, err := r.Next(); err != nil || string(raw) != ev {
				t.Fatalf("%q %v", raw, err)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatal(err)
		}
	})
	t.Run("one over max", func(t *testing.T) {
		r := NewReader(iotest.OneByteReader(strings.NewReader(ev+ev)), len(ev)-1)
		raw, err := r.Next()
		if !errors.Is(err, ErrEventTooLarge) || raw != nil {
			t.Fatalf("%q %v", raw, err)
		}
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("not sticky: %v", err)
		}
		r.Reset(strings.NewReader("data: 1\n\n"))
		if raw, err := r.Next(); err != nil || string(raw) != "data: 1\n\n" {
			t.Fatalf("after Reset: %q %v", raw, err)
		}
	})
	t.Run("unterminated huge line", func(t *testing.T) {
		src := io.MultiReader(strings.NewReader("data: ok\n\ndata: "), neverEnding('x'))
		r := NewReader(src, 100<<10)
		if raw, err := r.Next(); err != nil || string(raw) != "data: ok\n\n" {
			t.Fatalf("%q %v", raw, err)
		}
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("err = %v", err)
		}
		if len(r.buf) > 100<<10+1 {
			t.Fatalf("buffer grew to %d bytes, beyond the limit", len(r.buf))
		}
	})
	t.Run("default limit is 1 MiB", func(t *testing.T) {
		r := NewReader(strings.NewReader("data: "+strings.Repeat("y", 1<<20)+"\n\n"), 0)
		if _, err := r.Next(); !errors.Is(err, ErrEventTooLarge) {
			t.Fatalf("err = %v", err)
		}
	})
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

var errBoom = errors.New("boom")

func TestReadErrorReturnsPartial(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n\ndata: par"), iotest.ErrReader(errBoom))
	r := NewReader(src, 0)
	for _, want := range []string{"data: a\n\n", "data: b\n\n"} {
		if raw, err := r.Next(); err != nil || string(raw) != want {
			t.Fatalf("%q %v", raw, err)
		}
	}
	raw, err := r.Next()
	if !errors.Is(err, errBoom) || string(raw) != "data: par" {
		t.Fatalf("got %q %v", raw, err)
	}
	if raw, err := r.Next(); !errors.Is(err, errBoom) || raw != nil {
		t.Fatalf("not sticky: %q %v", raw, err)
	}
}

func TestTimeoutErrorWithNoPartial(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: a\n\n"), iotest.ErrReader(iotest.ErrTimeout))
	r := NewReader(src, 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if raw, err := r.Next(); !errors.Is(err, iotest.ErrTimeout) || raw != nil {
		t.Fatalf("%q %v", raw, err)
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	r := NewReader(io.MultiReader(strings.NewReader("data: a"), zeroReader{}), 0)
	raw, err := r.Next()
	if !errors.Is(err, io.ErrNoProgress) || string(raw) != "data: a" {
		t.Fatalf("%q %v", raw, err)
	}
}

// sizeRecorder records the size of each Read call's buffer.
type sizeRecorder struct {
	r     io.Reader
	sizes []int
}

func (s *sizeRecorder) Read(p []byte) (int, error) {
	s.sizes = append(s.sizes, len(p))
	return s.r.Read(p)
}

func TestReadsInLargeChunks(t *testing.T) {
	in := strings.Repeat(openAIStream, 400) // ~160 KiB
	rec := &sizeRecorder{r: strings.NewReader(in)}
	r := NewReader(rec, 0)
	raws, _, err := readAll(t, r)
	if err != io.EOF {
		t.Fatal(err)
	}
	if len(raws) != 5*400 {
		t.Fatalf("%d events", len(raws))
	}
	if len(rec.sizes) > len(in)/(initialBufSize/2)+2 {
		t.Fatalf("%d reads for %d bytes: %v", len(rec.sizes), len(in), rec.sizes)
	}
	for _, n := range rec.sizes {
		if n < initialBufSize/4 {
			t.Fatalf("read with a %d byte buffer: %v", n, rec.sizes)
		}
	}
}

func TestBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c"), 0)
	if r.Buffered() {
		t.Fatal("Buffered before any read")
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if !r.Buffered() {
		t.Fatal("second event should be buffered")
	}
	if raw, _ := r.Next(); string(raw) != "data: b\n\n" {
		t.Fatalf("%q", raw)
	}
	if r.Buffered() {
		t.Fatal("partial third event reported as buffered")
	}
	if raw, err := r.Next(); err != io.ErrUnexpectedEOF || string(raw) != "data: c" {
		t.Fatalf("%q %v", raw, err)
	}
	if r.Buffered() {
		t.Fatal("Buffered after end")
	}
}

func TestBufferedDoesNotBlock(t *testing.T) {
	pr, pw := io.Pipe()
	r := NewReader(pr, 0)
	go func() {
		_, _ = pw.Write([]byte("data: a\n\n"))
	}()
	if raw, err := r.Next(); err != nil || string(raw) != "data: a\n\n" {
		t.Fatalf("%q %v", raw, err)
	}
	// Nothing more is written: Buffered must return at once.
	if r.Buffered() {
		t.Fatal("Buffered with nothing buffered")
	}
	_ = pw.Close()
}

func TestResetReuse(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: tail"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	buf := &r.buf[0]
	r.Reset(strings.NewReader("data: b\n\n"))
	if raw, err := r.Next(); err != nil || string(raw) != "data: b\n\n" {
		t.Fatalf("%q %v", raw, err)
	}
	if &r.buf[0] != buf {
		t.Fatal("Reset dropped a small buffer")
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

func TestResetDropsHugeBuffer(t *testing.T) {
	r := NewReader(strings.NewReader("data: "+strings.Repeat("z", 500<<10)+"\n\n"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if len(r.buf) <= keepBufSize {
		t.Fatalf("buffer did not grow: %d", len(r.buf))
	}
	r.Reset(strings.NewReader(""))
	if len(r.buf) != initialBufSize {
		t.Fatalf("buffer after Reset: %d", len(r.buf))
	}
}
