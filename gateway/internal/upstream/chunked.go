package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// chunkedBody decodes a chunked response body (RFC 9112, section 7.1) from
// the connection's buffered reader. Unlike a decoder that returns one chunk
// per Read and cannot tell whether the next one is already here, it reports
// (Ready) whether a Read would return without waiting for the network, so a
// stream can forward in one write the events that arrived together even
// when the upstream framed each in its own chunk.
type chunkedBody struct {
	br   *bufio.Reader
	left int64 // data bytes left in the current chunk
	crlf bool  // the current chunk's data is read, its closing CRLF is not
	done bool  // the last chunk and the trailer section are read
	err  error // sticky
}

const (
	// maxChunkLine bounds a chunk-size line (extensions included) and each
	// trailer line.
	maxChunkLine = 4 << 10
	// maxTrailers bounds the trailer section's lines.
	maxTrailers = 64
	// maxChunkSize bounds one chunk's declared size (far above any reply;
	// it keeps the arithmetic clear of overflow).
	maxChunkSize = 1 << 40
)

var errBadChunk = errors.New("malformed chunked encoding")

func (c *chunkedBody) reset(br *bufio.Reader) { *c = chunkedBody{br: br} }

// Read implements io.Reader: the body's data, io.EOF after the last chunk
// and its trailers, io.ErrUnexpectedEOF when the connection ends before.
func (c *chunkedBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if c.left == 0 {
		if err := c.next(); err != nil {
			c.err = truncated(err)
			return 0, c.err
		}
		if c.done {
			return 0, io.EOF
		}
	}
	n, err := c.br.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if c.left == 0 {
		c.crlf = true
	}
	if err != nil {
		c.err = truncated(err)
		if n == 0 {
			return 0, c.err
		}
	}
	return n, nil
}

// truncated turns the end of the connection inside the body into
// io.ErrUnexpectedEOF.
func truncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// next reads the previous chunk's CRLF and the next chunk-size line; for
// the last chunk, the trailer section too.
func (c *chunkedBody) next() error {
	if c.crlf {
		b, err := c.br.ReadByte()
		if err == nil && b == '\r' {
			b, err = c.br.ReadByte()
		}
		if err != nil {
			return err
		}
		if b != '\n' {
			return errBadChunk
		}
		c.crlf = false
	}
	line, err := c.line()
	if err != nil {
		return err
	}
	size, ok := parseChunkSize(line)
	if !ok {
		return errBadChunk
	}
	if size > 0 {
		c.left = size
		return nil
	}
	for range maxTrailers + 1 {
		line, err := c.line()
		if err != nil {
			return err
		}
		if len(line) == 0 {
			c.done = true
			return nil
		}
	}
	return errBadChunk
}

// line reads one line, without its CRLF (or bare LF). The slice is valid
// until the next read.
func (c *chunkedBody) line() ([]byte, error) {
	line, err := c.br.ReadSlice('\n')
	switch {
	case err == bufio.ErrBufferFull:
		return nil, errBadChunk
	case err != nil:
		return nil, err
	case len(line) > maxChunkLine:
		return nil, errBadChunk
	}
	return trimEOL(line), nil
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1] // the LF
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// parseChunkSize parses a chunk-size line: hex digits, optional whitespace,
// optional extensions after ';' (ignored).
func parseChunkSize(line []byte) (int64, bool) {
	if i := bytes.IndexByte(line, ';'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimRight(line, " \t")
	if len(line) == 0 {
		return 0, false
	}
	var n int64
	for _, b := range line {
		var d byte
		switch {
		case '0' <= b && b <= '9':
			d = b - '0'
		case 'a' <= b && b <= 'f':
			d = b - 'a' + 10
		case 'A' <= b && b <= 'F':
			d = b - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int64(d)
		if n > maxChunkSize {
			return 0, false
		}
	}
	return n, true
}

// Ready reports whether Read would return at once from what is buffered,
// without waiting for the network: data of the current chunk, or the next
// chunk's size line and at least one byte of its data, or the whole end of
// the body, or a pending error. It reads nothing. When in doubt (a line
// not complete yet, bytes Read would refuse) it says false: the caller
// then makes the Read it would have made anyway.
func (c *chunkedBody) Ready() bool {
	if c.err != nil || c.done {
		return true
	}
	n := c.br.Buffered()
	if c.left > 0 {
		return n > 0
	}
	b, _ := c.br.Peek(n) // buffered already: no read
	if c.crlf {
		switch {
		case len(b) >= 1 && b[0] == '\n':
			b = b[1:]
		case len(b) >= 2 && b[0] == '\r' && b[1] == '\n':
			b = b[2:]
		default:
			return false
		}
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 || i+1 > maxChunkLine {
		return false
	}
	size, ok := parseChunkSize(trimEOL(b[:i+1]))
	if !ok {
		return false
	}
	b = b[i+1:]
	if size > 0 {
		return len(b) > 0
	}
	for range maxTrailers + 1 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 || i+1 > maxChunkLine {
			return false
		}
		if len(trimEOL(b[:i+1])) == 0 {
			return true
		}
		b = b[i+1:]
	}
	return false
}
