package responses

import (
	"errors"
	"fmt"
	"io"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// Translator turns an OpenAI chat.completion.chunk stream (the data of
// each event, as an OpenAI upstream or a provider's StreamReader yields
// it) into the Responses API's event stream (doc.go, "Streams"). It is
// not safe for concurrent use; reuse it with Reset.
type Translator struct {
	out    Output
	parser openai.ChunkParser
	chunk  openai.Chunk
	finish []byte
	usage  Usage
	done   bool
}

// Reset readies t for a stream of the response id and model.
func (t *Translator) Reset(model, id []byte, created int64) {
	t.out.Reset(id, model, created)
	t.finish, t.usage, t.done = t.finish[:0], Usage{}, false
}

// Done reports whether the terminal event (or an error) was written.
func (t *Translator) Done() bool { return t.done }

// Usage is the usage the chunks reported.
func (t *Translator) Usage() Usage { return t.usage }

// Append appends the events for one chunk's data to dst.
func (t *Translator) Append(dst, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	c := &t.chunk
	if err := t.parser.Parse(data, c); err != nil {
		return dst, err
	}
	o := &t.out
	if c.Error {
		var p fastjson.Parser
		e := &openai.Error{Status: 500, Type: "server_error", Message: "The upstream reported an error."}
		if v, err := p.ParseBytes(data); err == nil {
			e.Message = string(v.GetStringBytes("error", "message"))
			e.Type = string(v.GetStringBytes("error", "type"))
			e.Code = string(v.GetStringBytes("error", "code"))
		}
		t.done = true
		return AppendErrorEvent(dst, o.Seq, e), nil
	}
	if o.Seq == 0 {
		dst = o.AppendCreated(dst)
	}
	if c.Done {
		t.done = true
		return o.AppendEnd(dst, StatusOf(t.finish), t.usage), nil
	}
	if c.Usage.Present {
		t.usage = UsageOf(c.Usage)
	}
	if c.FinishReason != nil {
		t.finish = append(t.finish[:0], c.FinishReason...)
	}
	if len(c.Text) > 0 {
		it, i := o.Open()
		if it == nil || it.Func {
			if it != nil {
				dst = o.AppendItemDone(dst, i)
			}
			o.Add(false)
			i = o.Len() - 1
			dst = o.AppendItemAdded(dst, i)
		}
		dst = o.AppendTextDelta(dst, i, c.Text)
	}
	for k := range c.ToolCalls {
		dst = t.toolCall(dst, &c.ToolCalls[k])
	}
	return dst, nil
}

// toolCall appends the events for one tool-call delta.
func (t *Translator) toolCall(dst []byte, tc *openai.ToolCallDelta) []byte {
	o := &t.out
	i := -1
	for j := o.Len() - 1; j >= 0; j-- {
		if it := o.At(j); it.Func && it.Index == tc.Index {
			i = j
			break
		}
	}
	if i < 0 || len(tc.ID) > 0 && !o.At(i).Open {
		if it, j := o.Open(); it != nil {
			dst = o.AppendItemDone(dst, j)
		}
		it := o.Add(true)
		it.Index = tc.Index
		it.CallID = append(it.CallID, tc.ID...)
		it.Name = append(it.Name, tc.Name...)
		i = o.Len() - 1
		dst = o.AppendItemAdded(dst, i)
	}
	if len(tc.Arguments) > 0 {
		dst = o.AppendArgsDelta(dst, i, tc.Arguments)
	}
	return dst
}

// StreamReader is an io.Reader that reads a chat.completion.chunk stream
// from src and yields the Responses event stream. A source that ends
// before [DONE] yields io.ErrUnexpectedEOF after the events translated
// before it; its own errors pass through. After the terminal event the
// next Read reads src to its end and returns io.EOF. Reuse it with Reset.
type StreamReader struct {
	rd   *sse.Reader
	tr   Translator
	data []byte
	out  []byte
	off  int
	err  error
}

var _ io.Reader = (*StreamReader)(nil)

// NewStreamReader returns a StreamReader whose source events may be up to
// maxEventBytes long (<= 0: sse.DefaultMaxEventBytes).
func NewStreamReader(maxEventBytes int) *StreamReader {
	return &StreamReader{rd: sse.NewReader(nil, maxEventBytes), err: io.EOF}
}

// Reset makes r translate src for the response id and model;
// Reset(nil, nil, nil, 0) drops the reference to the previous source.
func (r *StreamReader) Reset(src io.Reader, model, id []byte, created int64) {
	r.rd.Reset(src)
	r.tr.Reset(model, id, created)
	r.out, r.off, r.err = r.out[:0], 0, nil
	if src == nil {
		r.err = io.EOF
	}
	if cap(r.out) > 64<<10 {
		r.out = nil
	}
}

// Translator returns r's translator, for its Usage.
func (r *StreamReader) Translator() *Translator { return &r.tr }

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

func (r *StreamReader) fill() {
	if r.tr.Done() {
		for {
			if _, err := r.rd.Next(); err != nil {
				r.err = io.EOF
				return
			}
		}
	}
	for {
		raw, err := r.rd.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			return
		}
		var ok bool
		if r.data, ok = sse.AppendData(r.data[:0], raw); ok {
			if r.out, err = r.tr.Append(r.out, r.data); err != nil {
				r.err = fmt.Errorf("responses: translating a chat stream: %w", err)
				return
			}
		}
		if r.tr.Done() || !r.rd.More() {
			return
		}
	}
}
