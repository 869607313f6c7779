package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net/http/httputil"
	"strconv"
	"strings"
	"testing"
)

// segments is a connection that delivers its bytes in the given pieces, one
// per Read; reads counts the Reads, each standing for a wait on the network.
type segments struct {
	parts [][]byte
	reads int
}

func (s *segments) Read(p []byte) (int, error) {
	s.reads++
	if len(s.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.parts[0])
	if s.parts[0] = s.parts[0][n:]; len(s.parts[0]) == 0 {
		s.parts = s.parts[1:]
	}
	return n, nil
}

func decodeAll(t *testing.T, wire string) (string, *bufio.Reader, error) {
	t.Helper()
	br := bufio.NewReaderSize(strings.NewReader(wire), 8<<10)
	var c chunkedBody
	c.reset(br)
	var out bytes.Buffer
	buf := make([]byte, 3) // small reads: chunk boundaries fall inside them
	for {
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out.String(), br, err
		}
	}
}

func TestChunkedBodyDecodes(t *testing.T) {
	tests := []struct{ name, wire, want string }{
		{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello"},
		{"several", "3\r\nabc\r\n1\r\nd\r\na\r\n0123456789\r\n0\r\n\r\n", "abcd0123456789"},
		{"upper-case hex, leading zeros", "00A\r\n0123456789\r\n0\r\n\r\n", "0123456789"},
		{"extensions and whitespace", "4 ;name=value\r\nwxyz\r\n0;last\r\n\r\n", "wxyz"},
		{"trailers", "2\r\nok\r\n0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n", "ok"},
		{"bare LF", "2\nok\n0\n\n", "ok"},
		{"empty body", "0\r\n\r\n", ""},
	}
	for _, tt := range tests {
		got, br, err := decodeAll(t, tt.wire+"NEXT")
		if err != nil || got != tt.want {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
			continue
		}
		// The body's end is exactly where the next response would start.
		if rest, _ := io.ReadAll(br); string(rest) != "NEXT" {
			t.Errorf("%s: left %q after the body, want NEXT", tt.name, rest)
		}
	}
}

func TestChunkedBodyErrors(t *testing.T) {
	tests := []struct {
		name, wire string
		want       error
	}{
		{"ends inside data", "5\r\nhel", io.ErrUnexpectedEOF},
		{"ends before the last chunk", "2\r\nok\r\n", io.ErrUnexpectedEOF},
		{"ends inside the trailers", "2\r\nok\r\n0\r\nX-A: 1\r\n", io.ErrUnexpectedEOF},
		{"ends before the first line", "", io.ErrUnexpectedEOF},
		{"not hex", "zz\r\nhello\r\n0\r\n\r\n", errBadChunk},
		{"empty size", "\r\nhello\r\n0\r\n\r\n", errBadChunk},
		{"negative", "-5\r\nhello\r\n0\r\n\r\n", errBadChunk},
		{"no CRLF after data", "2\r\nokX\r\n0\r\n\r\n", errBadChunk},
		{"size overflow", "ffffffffffffffffff\r\nx\r\n0\r\n\r\n", errBadChunk},
		{"size line too long", "1;" + strings.Repeat("e", maxChunkLine) + "\r\nx\r\n0\r\n\r\n", errBadChunk},
		{"too many trailers", "0\r\n" + strings.Repeat("X-A: 1\r\n", maxTrailers+1) + "\r\n", errBadChunk},
	}
	for _, tt := range tests {
		_, _, err := decodeAll(t, tt.wire)
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
		}
	}
}

// encode frames data in chunks of the given sizes (the rest in one more).
func encode(data string, sizes []int) string {
	var b strings.Builder
	for _, n := range sizes {
		if n <= 0 || n > len(data) {
			continue
		}
		b.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n" + data[:n] + "\r\n")
		data = data[n:]
	}
	if data != "" {
		b.WriteString(strconv.FormatInt(int64(len(data)), 16) + "\r\n" + data + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// readArriving decodes wire delivered in pieces of size() bytes, one per
// connection read, with reads of bufSize, until the decoder's first error
// (io.EOF at the end). It fails t if Ready promised a Read that then read
// from the connection or returned nothing. It returns the bytes decoded and
// how many reads Ready promised.
func readArriving(t *testing.T, wire []byte, size func() int, bufSize int) (out []byte, promised int, err error) {
	t.Helper()
	conn := &segments{}
	for rest := wire; len(rest) > 0; {
		n := min(len(rest), size())
		conn.parts = append(conn.parts, rest[:n])
		rest = rest[n:]
	}
	var c chunkedBody
	c.reset(bufio.NewReaderSize(conn, 8<<10))
	buf := make([]byte, bufSize)
	for range 4 * (len(wire) + 4) {
		ready := c.Ready()
		before := conn.reads
		var n int
		n, err = c.Read(buf)
		out = append(out, buf[:n]...)
		if ready {
			promised++
			if conn.reads != before {
				t.Fatalf("Ready was true, yet Read read from the connection (wire %q)", wire)
			}
			if n == 0 && err == nil {
				t.Fatalf("Ready was true, yet Read returned nothing (wire %q)", wire)
			}
		}
		if err != nil {
			return out, promised, err
		}
	}
	t.Fatalf("no end after %d reads (wire %q)", 4*(len(wire)+4), wire)
	return
}

// Whatever the chunking and however the bytes arrive, Ready is true only
// when a Read returns without reading from the connection, and the decoded
// bytes are the body.
func TestChunkedReadyNeverWaits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	promised := 0
	for round := range 2000 {
		data := strings.Repeat("data: event\n\n", 20)[:1+rng.IntN(200)]
		var sizes []int
		for range rng.IntN(8) {
			sizes = append(sizes, 1+rng.IntN(40))
		}
		out, n, err := readArriving(t, []byte(encode(data, sizes)), func() int { return 1 + rng.IntN(30) }, 1+rng.IntN(64))
		promised += n
		if err != io.EOF {
			t.Fatalf("round %d: %v", round, err)
		}
		if string(out) != data {
			t.Fatalf("round %d: decoded %q, want %q", round, out, data)
		}
	}
	if promised == 0 {
		t.Fatal("Ready never said true")
	}
}

// Chunks that arrived together are Ready one after the other: the whole
// body is read with the connection read once.
func TestChunkedReadyAcrossChunks(t *testing.T) {
	conn := &segments{parts: [][]byte{[]byte("5\r\nfirst\r\n6\r\nsecond\r\n0\r\n\r\n")}}
	var c chunkedBody
	c.reset(bufio.NewReaderSize(conn, 8<<10))
	buf := make([]byte, 64)
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "first" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if !c.Ready() {
		t.Fatal("the second chunk arrived with the first, but Ready is false")
	}
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "second" {
		t.Fatalf("%q %v", buf[:n], err)
	}
	if !c.Ready() {
		t.Fatal("the last chunk arrived with the others, but Ready is false")
	}
	if _, err := c.Read(buf); err != io.EOF {
		t.Fatalf("err %v, want EOF", err)
	}
	if conn.reads != 1 {
		t.Fatalf("%d connection reads, want 1", conn.reads)
	}
}

// FuzzChunkedBody checks the decoder against net/http/httputil's on any
// input: where both reach the end of the body, they decoded the same bytes;
// and Ready never promises a Read that then waits for the connection.
func FuzzChunkedBody(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\n\r\n"), uint8(3))
	f.Add([]byte("3;x=y\r\nabc\r\n1\r\nd\r\n0\r\nT: 1\r\n\r\n"), uint8(1))
	f.Add([]byte("a\nabcdefghij\n0\n\n"), uint8(7))
	f.Add([]byte("zz\r\n"), uint8(2))
	f.Fuzz(func(t *testing.T, wire []byte, step uint8) {
		seg := int(step%16) + 1
		ours, _, err := readArriving(t, wire, func() int { return seg }, seg)
		theirs, terr := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(wire)))
		if err == io.EOF && terr == nil && !bytes.Equal(ours, theirs) {
			t.Fatalf("decoded %q, httputil %q", ours, theirs)
		}
	})
}
