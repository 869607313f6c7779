package anthropic

import (
	"errors"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// StreamReader is an io.Reader that reads a Messages API event stream from
// src and yields the translated OpenAI stream: bytes a proxy built for
// OpenAI upstreams can split with sse.Reader and parse with
// openai.ChunkParser as if the upstream had sent them.
//
// Each Read translates the next upstream event, waiting for it if none is
// buffered, plus every further event already buffered, so an event is
// passed on as soon as it arrives. After message_stop or an error event,
// the next Read reads src to its end (so the connection can be reused) and
// returns io.EOF.
//
// Errors: an error from src (a timeout, a broken connection) is returned
// as is, after the events translated before it. A stream that ends before
// message_stop or an error event yields io.ErrUnexpectedEOF; an event
// that is not a JSON object yields an error wrapping ErrInvalidEvent (and
// so does one larger than the event size limit, wrapping
// sse.ErrEventTooLarge as well).
//
// It is not safe for concurrent use. Reuse it with Reset.
type StreamReader struct {
	rd   *sse.Reader
	tr   StreamTranslator
	data []byte
	out  []byte
	off  int
	err  error // returned once out is drained
}

var _ io.Reader = (*StreamReader)(nil)

// NewStreamReader returns a StreamReader whose upstream events may be up to
// maxEventBytes long (<= 0: sse.DefaultMaxEventBytes). Call Reset before
// reading.
func NewStreamReader(maxEventBytes int) *StreamReader {
	r := &StreamReader{rd: sse.NewReader(nil, maxEventBytes)}
	r.err = io.EOF
	return r
}

// Reset makes r translate the stream src; the other arguments are
// StreamTranslator.Reset's. Reset(nil, "", "", 0, false) drops the
// reference to the previous source.
func (r *StreamReader) Reset(src io.Reader, model, id string, created int64, includeUsage bool) {
	r.rd.Reset(src)
	r.tr.Reset(model, id, created, includeUsage)
	r.out, r.off, r.err = r.out[:0], 0, nil
	if src == nil {
		r.err = io.EOF
	}
	if cap(r.data) > 64<<10 {
		r.data = nil
	}
	if cap(r.out) > 64<<10 {
		r.out = nil
	}
}

// Translator returns r's translator, for its Usage and Done.
func (r *StreamReader) Translator() *StreamTranslator { return &r.tr }

// InputTokens is the prompt's token count (every kind of input token) once
// message_start has reported it; false before.
func (r *StreamReader) InputTokens() (int64, bool) {
	u := r.tr.usage
	n := u.PromptTokens()
	return n, u.Present && n > 0
}

// Read implements io.Reader.
func (r *StreamReader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		r.fill()
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// fill translates the next upstream event and every one that has already
// arrived (sse.Reader.More) into out, or sets err.
func (r *StreamReader) fill() {
	if r.tr.Done() {
		r.drain()
		return
	}
	for {
		raw, err := r.rd.Next()
		if err != nil {
			r.setErr(err)
			return
		}
		var ok bool
		r.data, ok = sse.AppendData(r.data[:0], raw)
		if ok {
			if r.out, err = r.tr.Append(r.out, r.data, EventName(raw)); err != nil {
				r.err = err
				return
			}
		}
		if r.tr.Done() || !r.rd.More() {
			return
		}
	}
}

func (r *StreamReader) setErr(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.err = io.ErrUnexpectedEOF // the stream ended before message_stop
	case errors.Is(err, sse.ErrEventTooLarge):
		r.err = fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	default:
		r.err = err
	}
}

// drain reads the rest of a finished stream so that the upstream
// connection can be reused, then ends r with io.EOF. It runs on the Read
// after the one that returned [DONE] (or the error event), so the client
// already has the end of the reply; Anthropic ends the body right after
// message_stop, and the upstream's idle timeout bounds a server that does
// not. Whatever else comes is dropped.
func (r *StreamReader) drain() {
	for {
		if _, err := r.rd.Next(); err != nil {
			r.err = io.EOF
			return
		}
	}
}
