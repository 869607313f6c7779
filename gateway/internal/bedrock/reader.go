package bedrock

import (
	"errors"
	"fmt"
	"io"
)

// StreamReader is an io.Reader that reads a ConverseStream reply (AWS
// event-stream framing) from src and yields the translated OpenAI stream:
// bytes a proxy built for OpenAI upstreams can split with sse.Reader and
// parse with openai.ChunkParser as if the upstream had sent them.
//
// Each Read translates the next upstream message, waiting for it if none
// is buffered, plus every further message that has already arrived, so an
// event is passed on as soon as it comes. After [DONE] or an error event
// the next Read reads src to its end (so the connection can be reused) and
// returns io.EOF.
//
// Errors: an error from src is returned as is, after the events
// translated before it. A stream that ends before messageStop yields
// io.ErrUnexpectedEOF (one that ends after messageStop but before the
// metadata event is complete: its usage chunk, if any, and [DONE] are
// emitted). Broken framing yields an error wrapping ErrInvalidMessage, an
// oversized message one wrapping ErrMessageTooLarge, a payload that is not
// JSON one wrapping ErrInvalidEvent.
//
// It is not safe for concurrent use. Reuse it with Reset.
type StreamReader struct {
	dec *Decoder
	msg Message
	tr  StreamTranslator
	out []byte
	off int
	err error // returned once out is drained
}

var _ io.Reader = (*StreamReader)(nil)

// NewStreamReader returns a StreamReader whose upstream messages may be up
// to maxEventBytes long (<= 0: DefaultMaxMessageBytes). Call Reset before
// reading.
func NewStreamReader(maxEventBytes int) *StreamReader {
	return &StreamReader{dec: NewDecoder(nil, maxEventBytes), err: io.EOF}
}

// Reset makes r translate the stream src; the other arguments are
// StreamTranslator.Reset's. Reset(nil, "", "", 0, false) drops the
// reference to the previous source.
func (r *StreamReader) Reset(src io.Reader, model, id string, created int64, includeUsage bool) {
	r.dec.Reset(src)
	r.msg = Message{}
	r.tr.Reset(model, id, created, includeUsage)
	if cap(r.out) > keepDecodeBuf {
		r.out = nil
	}
	r.out, r.off, r.err = r.out[:0], 0, nil
	if src == nil {
		r.err = io.EOF
	}
}

// Translator returns r's translator, for its Usage and Done.
func (r *StreamReader) Translator() *StreamTranslator { return &r.tr }

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

// fill translates the next upstream message and every one that has
// already arrived into out, or sets err.
func (r *StreamReader) fill() {
	if r.tr.Done() {
		r.drain()
		return
	}
	for {
		err := r.dec.Next(&r.msg)
		if err != nil {
			r.setErr(err)
			return
		}
		if r.out, err = r.tr.Append(r.out, &r.msg); err != nil {
			r.err = err
			return
		}
		if r.tr.Done() || !r.dec.More() {
			return
		}
	}
}

func (r *StreamReader) setErr(err error) {
	switch {
	case errors.Is(err, io.EOF) && r.tr.Stopped():
		r.out = r.tr.End(r.out) // no metadata after messageStop: complete all the same
		r.err = io.EOF
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		r.err = io.ErrUnexpectedEOF
	case errors.Is(err, ErrMessageTooLarge) || errors.Is(err, ErrInvalidMessage):
		r.err = fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	default:
		r.err = err
	}
}

// drain reads the rest of a finished stream so that the upstream
// connection can be reused, then ends r with io.EOF. Bedrock ends the body
// right after the metadata event; the upstream's idle timeout bounds a
// server that does not.
func (r *StreamReader) drain() {
	for r.dec.Next(&r.msg) == nil {
	}
	r.err = io.EOF
}
