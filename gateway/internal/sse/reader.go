package sse

import (
	"bytes"
	"errors"
	"io"
)

const (
	// DefaultMaxEventBytes is the event size limit used when NewReader is
	// given maxEventBytes <= 0.
	DefaultMaxEventBytes = 1 << 20

	// initialBufSize is the size of the read buffer a Reader starts with; it
	// grows (doubling) only while a single event does not fit, up to the
	// event size limit.
	initialBufSize = 4 << 10

	// keepBufSize is the largest buffer Reset keeps; a bigger one (grown by
	// a huge event) is dropped so pooled Readers do not pin megabytes.
	keepBufSize = 4 * initialBufSize

	// scanWindow bounds each search for a line ending, so that a stream
	// using bare CR line endings does not rescan the whole buffer for a LF
	// on every line.
	scanWindow = 512

	// maxEmptyReads is how many consecutive (0, nil) reads Next tolerates
	// before giving up with io.ErrNoProgress.
	maxEmptyReads = 100
)

// ErrEventTooLarge is returned by Reader.Next when an event (raw bytes,
// including its terminating blank line) is longer than the Reader's limit.
// It is sticky: every later call to Next returns it again until Reset.
var ErrEventTooLarge = errors.New("sse: event exceeds the maximum event size")

// errBadReadCount reports a source whose Read returned a count outside
// [0, len(p)], which io.Reader forbids.
var errBadReadCount = errors.New("sse: source returned an invalid byte count")

// Reader splits a text/event-stream byte stream into events.
//
// An event is everything up to and including the first blank line: a line
// ending ("\n", "\r\n" or "\r") that directly follows another line ending or
// starts the event. Events are returned raw, so concatenating everything
// Next returns reproduces the input byte for byte.
//
// A Reader reads from its source in large chunks into one reusable buffer
// and does not allocate in steady state. It is not safe for concurrent use;
// pool it and call Reset to reuse it for another stream. Create Readers
// with NewReader; the zero Reader is not usable.
type Reader struct {
	src io.Reader
	buf []byte // len(buf) is the usable buffer size
	max int

	start int // offset of the first unconsumed byte (start of the event)
	end   int // offset just past the last buffered byte
	scan  int // offset where the incremental scan resumes

	lineStart bool // the scan is at the start of a line
	skipLF    bool // the previous byte was a CR ending a line: a LF here belongs to it
	evCarry   bool // the current event began with skipLF set

	ready      int  // end offset of a complete buffered event, or -1
	readyCarry bool // the ready event ended with a CR at the end of buffered data

	eof    bool  // src returned io.EOF
	srcErr error // non-EOF error from src, returned after the buffered bytes
	err    error // sticky error returned by Next
}

// NewReader returns a Reader that splits src into events of at most
// maxEventBytes bytes each (raw, including the terminating blank line).
// maxEventBytes <= 0 means DefaultMaxEventBytes (1 MiB).
func NewReader(src io.Reader, maxEventBytes int) *Reader {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	r := &Reader{max: maxEventBytes}
	r.buf = make([]byte, r.bufLimit(initialBufSize))
	r.Reset(src)
	return r
}

// bufLimit caps a buffer size at what one maximal event needs: max bytes
// plus one byte to detect that an event is longer than max.
func (r *Reader) bufLimit(n int) int {
	if n > r.max+1 {
		return r.max + 1
	}
	return n
}

// Reset discards all buffered data and state (including sticky errors) and
// makes r read from src. The buffer is kept for reuse unless an oversized
// event made it grow beyond 128 KiB.
func (r *Reader) Reset(src io.Reader) {
	if len(r.buf) > keepBufSize {
		r.buf = make([]byte, r.bufLimit(initialBufSize))
	}
	*r = Reader{src: src, buf: r.buf, max: r.max, lineStart: true, ready: -1}
}

// Next returns the raw bytes of the next event exactly as the source sent
// them, including the blank line that terminates it. Leading blank lines and
// comment-only events are returned as events too, so that forwarding every
// raw event reproduces the stream.
//
// The returned slice aliases the Reader's buffer and is valid until the next
// call to Next or Reset; callers must not modify it.
//
// At a clean end of stream (EOF right after a complete event, or on an empty
// stream) Next returns nil, io.EOF. If the stream ends in the middle of an
// event it returns the partial raw bytes and io.ErrUnexpectedEOF, then
// nil, io.EOF. An event longer than the limit yields nil, ErrEventTooLarge.
// Any other error from the source is returned as is (after all complete
// buffered events), together with the partial bytes of the unfinished
// event, and again (with nil) on every later call.
//
// When an event ends with a bare CR at the very end of the data read so far,
// Next returns it without waiting to see whether a LF follows; if one does,
// that LF is returned at the front of the next event (it is the second half
// of a CRLF, not a blank line). Forwarding stays byte-exact either way.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	emptyReads := 0
	for {
		if end := r.findEvent(); end >= 0 {
			if end-r.start > r.max {
				r.err = ErrEventTooLarge
				return nil, r.err
			}
			raw := r.buf[r.start:end:end]
			r.consume(end)
			return raw, nil
		}
		if r.end-r.start > r.max {
			r.err = ErrEventTooLarge
			return nil, r.err
		}
		if r.eof || r.srcErr != nil {
			return r.finish()
		}
		if emptyReads >= maxEmptyReads {
			r.srcErr = io.ErrNoProgress
			continue
		}
		if r.fill() == 0 {
			emptyReads++
		} else {
			emptyReads = 0
		}
	}
}

// Buffered reports whether a complete further event is already buffered,
// so that the next call to Next returns it without reading from the source.
// A caller may use it to batch several events into one write.
func (r *Reader) Buffered() bool {
	if r.err != nil {
		return false
	}
	return r.findEvent() >= 0
}

// readier is a source that can tell whether a Read would return without
// waiting (upstream.Exchange).
type readier interface{ Ready() bool }

// maxReadyReads bounds the reads one call to More makes.
const maxReadyReads = 64

// More reports whether a complete event is buffered after reading from the
// source as long as its Read would not wait, which only a source with a
// Ready() bool method can say. A caller batching events into one write asks
// More once Buffered is false: events whose bytes have arrived but are still
// in the source (behind framing it removes) then join the batch.
func (r *Reader) More() bool {
	if r.err != nil {
		return false
	}
	if r.findEvent() >= 0 {
		return true
	}
	src, ok := r.src.(readier)
	if !ok {
		return false
	}
	for range maxReadyReads {
		if r.eof || r.srcErr != nil || r.end-r.start > r.max || !src.Ready() {
			return false
		}
		r.fill()
		if r.findEvent() >= 0 {
			return true
		}
	}
	return false
}

// findEvent returns the end offset of the complete event at r.start, or -1
// when no complete event is buffered yet.
func (r *Reader) findEvent() int {
	if r.ready < 0 {
		r.ready, r.readyCarry = r.scanEvent()
	}
	return r.ready
}

// consume marks the event ending at end as returned.
func (r *Reader) consume(end int) {
	r.start, r.scan = end, end
	r.lineStart = true
	r.skipLF = r.readyCarry
	r.evCarry = r.readyCarry
	r.ready, r.readyCarry = -1, false
	if r.start == r.end {
		// Everything consumed: rewind for free instead of compacting later.
		r.start, r.end, r.scan = 0, 0, 0
	}
}

// finish handles the end of the source once no complete event is buffered.
func (r *Reader) finish() ([]byte, error) {
	if r.start == r.end {
		if r.srcErr != nil {
			r.err = r.srcErr
			return nil, r.err
		}
		return nil, io.EOF
	}
	raw := r.buf[r.start:r.end:r.end]
	onlyCarriedLF := r.evCarry && r.end-r.start == 1 && raw[0] == '\n'
	r.start, r.end, r.scan = 0, 0, 0
	r.lineStart, r.skipLF, r.evCarry = true, false, false
	switch {
	case r.srcErr != nil:
		r.err = r.srcErr
		return raw, r.err
	case onlyCarriedLF:
		// The LF completing the previous event's final CRLF: a clean end.
		return raw, nil
	default:
		return raw, io.ErrUnexpectedEOF
	}
}

// fill reads once from the source into the free tail of the buffer,
// compacting or growing the buffer first when needed. It returns the
// number of bytes read.
func (r *Reader) fill() int {
	if r.start > 0 && len(r.buf)-r.end < len(r.buf)/4 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.scan -= r.start
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		// The unfinished event fills the whole buffer; Next has already
		// checked that it is not longer than max, so there is room to grow.
		nb := make([]byte, r.bufLimit(2*len(r.buf)))
		copy(nb, r.buf[r.start:r.end])
		r.scan -= r.start
		r.end -= r.start
		r.start = 0
		r.buf = nb
	}
	n, err := r.src.Read(r.buf[r.end:])
	if n < 0 || n > len(r.buf)-r.end {
		n, err = 0, errBadReadCount
	}
	r.end += n
	if err == io.EOF {
		r.eof = true
	} else if err != nil {
		r.srcErr = err
	}
	return n
}

// scanEvent advances the incremental scan over newly buffered bytes. It
// returns the end offset of the event starting at r.start, or -1, and
// whether that event ended with a CR as the last buffered byte.
func (r *Reader) scanEvent() (int, bool) {
	b := r.buf[:r.end]
	i := r.scan
	for i < len(b) {
		if r.skipLF {
			r.skipLF = false
			if b[i] == '\n' {
				i++
				continue
			}
		}
		if r.lineStart {
			switch b[i] {
			case '\n':
				r.scan = i + 1
				return i + 1, false
			case '\r':
				if i+1 == len(b) {
					r.scan = i + 1
					return i + 1, true
				}
				if b[i+1] == '\n' {
					i++
				}
				r.scan = i + 1
				return i + 1, false
			}
			r.lineStart = false
		}
		// Inside a line: find its end, at most scanWindow bytes ahead.
		seg := b[i:]
		if len(seg) > scanWindow {
			seg = seg[:scanWindow]
		}
		lf := bytes.IndexByte(seg, '\n')
		if lf >= 0 {
			seg = seg[:lf]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			i += cr + 1
			r.lineStart, r.skipLF = true, true
			continue
		}
		if lf >= 0 {
			i += lf + 1
			r.lineStart = true
			continue
		}
		i += len(seg)
	}
	r.scan = i
	return -1, false
}
