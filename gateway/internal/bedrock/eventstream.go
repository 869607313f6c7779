package bedrock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// The AWS event-stream framing (application/vnd.amazon.eventstream), in
// which ConverseStream replies come. Each message is
//
//	total length    uint32, big-endian, the whole message
//	headers length  uint32
//	prelude CRC     uint32, CRC-32 (IEEE) of the 8 bytes above
//	headers         name length (1 byte), name, value type (1 byte), value; repeated
//	payload         total - headers - 16 bytes
//	message CRC     uint32, CRC-32 of everything before it
//
// Header values: 0 true, 1 false (no bytes), 2 byte, 3 int16, 4 int32,
// 5 int64, 8 timestamp (int64 ms), 9 UUID (16 bytes), 6 bytes and
// 7 string (uint16 length, then the bytes).

const (
	preludeLen    = 12
	messageCRCLen = 4
	minMessageLen = preludeLen + messageCRCLen

	// maxHeadersLen is the service's limit on a message's headers.
	maxHeadersLen = 128 << 10
	// DefaultMaxMessageBytes is the message size limit used when a Decoder
	// is given maxMessageBytes <= 0.
	DefaultMaxMessageBytes = 1 << 20

	initialDecodeBuf = 4 << 10
	keepDecodeBuf    = 64 << 10
	maxEmptyReads    = 100
)

// Errors of the event-stream decoder. Both are sticky: every later Next
// returns the same error.
var (
	// ErrInvalidMessage is returned (wrapped, with what is wrong) for a
	// message whose framing is broken: a CRC mismatch, lengths that do
	// not add up, a malformed header.
	ErrInvalidMessage = errors.New("bedrock: invalid event-stream message")
	// ErrMessageTooLarge is returned for a message longer than the
	// decoder's limit.
	ErrMessageTooLarge = errors.New("bedrock: event-stream message exceeds the maximum size")
)

var crcTable = crc32.IEEETable

// Message is one decoded event-stream message: the headers the Converse
// API uses and the payload. Its slices point into the decoder's buffer and
// are valid until the next call to Next or Reset.
type Message struct {
	MessageType   []byte // :message-type: "event", "exception" or "error"
	EventType     []byte // :event-type, for events ("contentBlockDelta", ...)
	ExceptionType []byte // :exception-type, for exceptions ("throttlingException", ...)
	ErrorCode     []byte // :error-code, for errors
	ErrorMessage  []byte // :error-message, for errors
	ContentType   []byte // :content-type
	Payload       []byte
}

func (m *Message) reset() { *m = Message{} }

// ParseMessage decodes the message at the start of b into m and returns
// its length. A b too short for the message it starts returns 0 and
// io.ErrUnexpectedEOF; broken framing returns an error wrapping
// ErrInvalidMessage. m's slices point into b.
func ParseMessage(b []byte, m *Message) (int, error) {
	if len(b) < preludeLen {
		return 0, io.ErrUnexpectedEOF
	}
	total, headers, err := parsePrelude(b)
	if err != nil {
		return 0, err
	}
	if len(b) < total {
		return 0, io.ErrUnexpectedEOF
	}
	if err := parseBody(b[:total], headers, m); err != nil {
		return 0, err
	}
	return total, nil
}

// parsePrelude checks the prelude at the start of b and returns the
// message and headers lengths.
func parsePrelude(b []byte) (total, headers int, err error) {
	t := binary.BigEndian.Uint32(b[0:4])
	h := binary.BigEndian.Uint32(b[4:8])
	if got, want := crc32.Checksum(b[0:8], crcTable), binary.BigEndian.Uint32(b[8:12]); got != want {
		return 0, 0, fmt.Errorf("%w: prelude CRC %08x, want %08x", ErrInvalidMessage, got, want)
	}
	if t < minMessageLen || uint64(h) > uint64(t)-minMessageLen || h > maxHeadersLen {
		return 0, 0, fmt.Errorf("%w: message length %d with headers length %d", ErrInvalidMessage, t, h)
	}
	if uint64(t) > 1<<31 {
		return 0, 0, fmt.Errorf("%w: message length %d", ErrMessageTooLarge, t)
	}
	return int(t), int(h), nil
}

// parseBody checks the message CRC of msg (one whole message) and reads
// its headers and payload into m.
func parseBody(msg []byte, headers int, m *Message) error {
	end := len(msg) - messageCRCLen
	if got, want := crc32.Checksum(msg[:end], crcTable), binary.BigEndian.Uint32(msg[end:]); got != want {
		return fmt.Errorf("%w: message CRC %08x, want %08x", ErrInvalidMessage, got, want)
	}
	m.reset()
	if err := parseHeaders(msg[preludeLen:preludeLen+headers], m); err != nil {
		return err
	}
	m.Payload = msg[preludeLen+headers : end : end]
	return nil
}

// headerValueLen is the fixed value length of each header type; -1 marks
// the length-prefixed types, -2 an unknown type.
var headerValueLen = [...]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: -1, 7: -1, 8: 8, 9: 16}

// parseHeaders reads the headers in h, keeping the string values of those
// Message has fields for.
func parseHeaders(h []byte, m *Message) error {
	for len(h) > 0 {
		n := int(h[0])
		if n == 0 || len(h) < 1+n+1 {
			return fmt.Errorf("%w: malformed header name", ErrInvalidMessage)
		}
		name := h[1 : 1+n]
		typ := int(h[1+n])
		h = h[2+n:]
		if typ >= len(headerValueLen) {
			return fmt.Errorf("%w: header %q has unknown value type %d", ErrInvalidMessage, name, typ)
		}
		size := headerValueLen[typ]
		var value []byte
		if size < 0 {
			if len(h) < 2 {
				return fmt.Errorf("%w: header %q is truncated", ErrInvalidMessage, name)
			}
			size = int(binary.BigEndian.Uint16(h))
			h = h[2:]
			if len(h) < size {
				return fmt.Errorf("%w: header %q is truncated", ErrInvalidMessage, name)
			}
			value = h[:size:size]
		} else if len(h) < size {
			return fmt.Errorf("%w: header %q is truncated", ErrInvalidMessage, name)
		}
		h = h[size:]
		if typ == 7 {
			m.setHeader(name, value)
		}
	}
	return nil
}

func (m *Message) setHeader(name, value []byte) {
	switch string(name) {
	case ":message-type":
		m.MessageType = value
	case ":event-type":
		m.EventType = value
	case ":exception-type":
		m.ExceptionType = value
	case ":error-code":
		m.ErrorCode = value
	case ":error-message":
		m.ErrorMessage = value
	case ":content-type":
		m.ContentType = value
	}
}

// Decoder reads event-stream messages from a byte stream. It reads in
// large chunks into one reusable buffer and does not allocate in steady
// state. It is not safe for concurrent use; reuse it with Reset.
type Decoder struct {
	src   io.Reader
	buf   []byte
	start int // first unconsumed byte
	end   int // just past the last buffered byte
	max   int
	eof   bool  // src returned io.EOF
	srcEr error // src's error other than io.EOF, returned once the buffer is drained
	err   error // sticky decoding error
}

// NewDecoder returns a Decoder for messages up to maxMessageBytes long
// (<= 0: DefaultMaxMessageBytes) reading from src (may be nil; see
// Reset).
func NewDecoder(src io.Reader, maxMessageBytes int) *Decoder {
	if maxMessageBytes <= 0 {
		maxMessageBytes = DefaultMaxMessageBytes
	}
	d := &Decoder{max: maxMessageBytes}
	d.Reset(src)
	return d
}

// Reset makes d read from src, dropping anything buffered.
func (d *Decoder) Reset(src io.Reader) {
	d.src = src
	d.start, d.end, d.eof, d.srcEr, d.err = 0, 0, false, nil, nil
	if cap(d.buf) > keepDecodeBuf {
		d.buf = nil
	}
	if d.buf == nil {
		d.buf = make([]byte, initialDecodeBuf)
	}
}

// Next decodes the next message into m, reading from the source as
// needed. It returns io.EOF when the source ends between messages,
// io.ErrUnexpectedEOF when it ends inside one, the source's own error as
// is, and errors wrapping ErrInvalidMessage or ErrMessageTooLarge for
// broken or oversized messages. m's slices are valid until the next call.
func (d *Decoder) Next(m *Message) error {
	if d.err != nil {
		return d.err
	}
	empty := 0
	for {
		n, err := d.buffered()
		if err != nil {
			d.err = err
			return err
		}
		if n > 0 {
			if err := parseBody(d.buf[d.start:d.start+n], d.headersLen(), m); err != nil {
				d.err = err
				return err
			}
			d.start += n
			return nil
		}
		if d.eof || d.srcEr != nil {
			return d.finish()
		}
		if d.fill() == 0 {
			if empty++; empty >= maxEmptyReads {
				d.err = io.ErrNoProgress
				return d.err
			}
		} else {
			empty = 0
		}
	}
}

// Buffered reports whether a complete message is buffered, so that Next
// returns it without reading from the source.
func (d *Decoder) Buffered() bool {
	n, err := d.buffered()
	return d.err == nil && err == nil && n > 0
}

// buffered returns the length of the complete message at start, 0 if it
// has not all arrived, or an error for a broken or oversized prelude.
func (d *Decoder) buffered() (int, error) {
	if d.end-d.start < preludeLen {
		return 0, nil
	}
	total, _, err := parsePrelude(d.buf[d.start:d.end])
	if err != nil {
		return 0, err
	}
	if total > d.max {
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrMessageTooLarge, total, d.max)
	}
	if d.end-d.start < total {
		return 0, nil
	}
	return total, nil
}

func (d *Decoder) headersLen() int {
	return int(binary.BigEndian.Uint32(d.buf[d.start+4:]))
}

// fill reads once from the source into the buffer, first making room
// (compacting, or growing up to the message limit), and returns the
// count read.
func (d *Decoder) fill() int {
	if d.start > 0 && d.end == len(d.buf) || d.start == d.end {
		copy(d.buf, d.buf[d.start:d.end])
		d.end -= d.start
		d.start = 0
	}
	if d.end == len(d.buf) {
		size := min(2*len(d.buf), d.max+preludeLen)
		if size <= len(d.buf) {
			// Not reached: a message that would need more is refused by
			// buffered before the buffer fills. Grow anyway rather than
			// read nothing forever.
			size = len(d.buf) + initialDecodeBuf
		}
		nb := make([]byte, size)
		copy(nb, d.buf[:d.end])
		d.buf = nb
	}
	n, err := d.src.Read(d.buf[d.end:])
	if n < 0 || n > len(d.buf)-d.end {
		d.srcEr = errors.New("bedrock: event-stream source returned an invalid byte count")
		return 0
	}
	d.end += n
	switch {
	case err == io.EOF:
		d.eof = true
	case err != nil:
		d.srcEr = err
	}
	return n
}

// finish is Next's result once the source has ended with no complete
// message buffered.
func (d *Decoder) finish() error {
	switch {
	case d.start < d.end && d.srcEr == nil:
		d.err = io.ErrUnexpectedEOF
	case d.srcEr != nil:
		d.err = d.srcEr
	default:
		d.err = io.EOF
	}
	return d.err
}

// readier is a source that can tell whether a Read would return without
// waiting (upstream.Exchange).
type readier interface{ Ready() bool }

// More reports whether a complete message is buffered after reading from
// the source as long as its Read would not wait (only a source with a
// Ready() bool method can say), so a caller can batch the messages that
// have already arrived.
func (d *Decoder) More() bool {
	for range 64 {
		if d.Buffered() {
			return true
		}
		src, ok := d.src.(readier)
		if !ok || d.err != nil || d.eof || d.srcEr != nil || !src.Ready() {
			return false
		}
		if _, err := d.buffered(); err != nil {
			return false
		}
		d.fill()
	}
	return false
}

func crc32IEEE(b []byte) uint32 { return crc32.Checksum(b, crcTable) }
