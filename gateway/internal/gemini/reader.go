package gemini

import (
	"errors"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// StreamReader is an io.Reader that reads a streamGenerateContent?alt=sse
// body from src and yields the translated OpenAI stream: bytes a proxy
// built for OpenAI upstreams can split with sse.Reader and parse with
// openai.ChunkParser as if the upstream had sent them.
//
// Each Read translates the next upstream event, waiting for it if none is
// buffered, plus every further event already buffered. Gemini has no
// terminal event: the stream ends when the body does, after a candidate
// with a finishReason; then the usage chunk and [DONE] follow and the next
// Read returns io.EOF.
//
// Errors: an error from src is returned as is, after the events
// translated before it. A body that ends before any finishReason yields
// io.ErrUnexpectedEOF; an event that is not a JSON object yields an error
// wrapping ErrInvalidEvent (and so does one larger than the event size
// limit, wrapping sse.ErrEventTooLarge as well). After an error event the
// rest of the body is read and dropped.
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

// NewStreamReader returns a StreamReader whose upstream events may be up
// to maxEventBytes long (<= 0: sse.DefaultMaxEventBytes). Call Reset
// before reading.
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
	if cap(r.data) > maxKeptBuffer {
		r.data = nil
	}
	if cap(r.out) > maxKeptBuffer {
		r.out = nil
	}
}

// Translator returns r's translator, for its Usage and Done.
func (r *StreamReader) Translator() *StreamTranslator { return &r.tr }

// InputTokens is the prompt's token count (promptTokenCount, cached
// content included) once a chunk's usageMetadata has reported it; false
// before. Gemini reports it with the first chunk.
func (r *StreamReader) InputTokens() (int64, bool) {
	u := r.tr.usage
	return u.PromptTokens(), u.Present && u.Prompt > 0
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
			if r.out, err = r.tr.Append(r.out, r.data); err != nil {
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
	case errors.Is(err, io.EOF):
		var ended bool
		if r.out, ended = r.tr.End(r.out); ended {
			r.err = io.EOF
		} else {
			r.err = io.ErrUnexpectedEOF // the body ended before a finishReason
		}
	case errors.Is(err, sse.ErrEventTooLarge):
		r.err = fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	default:
		r.err = err
	}
}

// drain reads the rest of a stream that ended on an error event, so the
// upstream connection can be reused, then ends r with io.EOF.
func (r *StreamReader) drain() {
	for {
		if _, err := r.rd.Next(); err != nil {
			r.err = io.EOF
			return
		}
	}
}
