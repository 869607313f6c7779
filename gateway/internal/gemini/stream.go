package gemini

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// ErrInvalidEvent is returned (wrapped) for stream event data that is not
// a JSON object.
var ErrInvalidEvent = errors.New("gemini: invalid stream event")

// StreamTranslator turns a streamGenerateContent?alt=sse stream, whose
// events are each a whole GenerateContentResponse, into an OpenAI
// chat.completion.chunk stream, one event at a time (see the package
// documentation for the mapping).
//
// It keeps its buffers across Reset and does not allocate in steady state.
// It is not safe for concurrent use; keep one per stream, or pool them and
// call Reset.
type StreamTranslator struct {
	p fastjson.Parser

	id, model    string
	created      int64
	includeUsage bool

	prefix   []byte // `data: {"id":...,"choices":[`, built when the stream starts
	args     []byte // one call's arguments, re-encoded
	started  bool   // the role chunk was emitted
	finished bool   // a finish_reason chunk was emitted
	done     bool   // [DONE] or an error event was emitted
	calls    int    // tool calls emitted (the next OpenAI tool call index)
	usage    Usage  // the latest usageMetadata
}

// Reset prepares t for a new stream. model and id are the chunks' "model"
// and "id" (an empty string means: the upstream's modelVersion and
// responseId); created is their "created" (Unix seconds). With
// includeUsage, every chunk carries "usage":null and a final chunk with
// "choices":[] carries the usage before [DONE], as OpenAI does for
// stream_options.include_usage.
func (t *StreamTranslator) Reset(model, id string, created int64, includeUsage bool) {
	t.id, t.model, t.created, t.includeUsage = id, model, created, includeUsage
	t.prefix, t.args = t.prefix[:0], t.args[:0]
	if cap(t.args) > maxKeptBuffer {
		t.args = nil
	}
	t.started, t.finished, t.done = false, false, false
	t.calls, t.usage = 0, Usage{}
}

// Done reports whether the translated stream has ended: [DONE] or an
// error event was emitted.
func (t *StreamTranslator) Done() bool { return t.done }

// Finished reports whether a candidate's finishReason (or a blocked
// prompt) has come: the stream may end after it.
func (t *StreamTranslator) Finished() bool { return t.finished }

// Usage returns the usage the upstream reported so far, in OpenAI terms.
func (t *StreamTranslator) Usage() openai.Usage { return t.usage.OpenAI() }

// Append translates one event's data (a GenerateContentResponse, or
// {"error":{...}}) and appends the resulting OpenAI events to dst: zero or
// more `data: {...}\n\n` lines, each a single line of valid JSON. An error
// becomes `data: {"error":{...}}\n\n` and ends the stream. The stream's
// end, when the upstream body ends, is End's.
//
// Data that is not a JSON object returns dst unchanged and an error
// wrapping ErrInvalidEvent.
func (t *StreamTranslator) Append(dst, data []byte) ([]byte, error) {
	if t.done {
		return dst, nil
	}
	root, err := t.p.ParseBytes(data)
	if err != nil || root.Type() != fastjson.TypeObject {
		return dst, fmt.Errorf("%w: not a JSON object", ErrInvalidEvent)
	}
	if e := root.Get("error"); e != nil {
		code := int(intOf(e.Get("code")))
		name, _ := stringOf(e.Get("status"))
		msg, _ := stringOf(e.Get("message"))
		dst = append(dst, "data: "...)
		dst = errorFor(code, name, msg, nil).AppendJSON(dst)
		dst = append(dst, "\n\n"...)
		t.done = true
		return dst, nil
	}
	if u := usageOf(root.Get("usageMetadata")); u.Present {
		t.usage = u
	}
	if !t.started {
		if t.id == "" {
			if s, _ := stringOf(root.Get("responseId")); len(s) > 0 {
				t.id = string(s)
			} else {
				id := appendRandomID(t.args[:0], "chatcmpl-")
				t.id = string(id[1 : len(id)-1])
			}
		}
		if t.model == "" {
			s, _ := stringOf(root.Get("modelVersion"))
			t.model = string(s)
		}
		dst = t.start(dst)
	}
	if t.finished {
		return dst, nil // only usage may follow a finish
	}
	cand := root.Get("candidates", "0")
	for _, part := range cand.GetArray("content", "parts") {
		if text, ok := stringOf(part.Get("text")); ok && !part.GetBool("thought") {
			if len(text) > 0 {
				dst = t.appendText(dst, text)
			}
		} else if fc := part.Get("functionCall"); fc != nil {
			dst = t.appendCall(dst, fc)
		}
	}
	if reason, _ := stringOf(cand.Get("finishReason")); len(reason) > 0 && string(reason) != "FINISH_REASON_UNSPECIFIED" {
		dst = t.appendFinish(dst, FinishReason(reason, t.calls > 0))
	} else if cand == nil && root.Get("promptFeedback", "blockReason") != nil {
		dst = t.appendFinish(dst, "content_filter")
	}
	return dst, nil
}

// End is called when the upstream body has ended. After a finish it
// appends the end of the stream — the usage chunk (with includeUsage and
// usage reported) and `data: [DONE]` — and reports true; without one the
// stream was cut: dst is returned as it is, with false (StreamReader then
// ends with io.ErrUnexpectedEOF). After an error event it appends nothing
// and reports true.
func (t *StreamTranslator) End(dst []byte) ([]byte, bool) {
	if t.done {
		return dst, true
	}
	if !t.finished {
		return dst, false
	}
	if t.includeUsage && t.usage.Present {
		dst = append(dst, t.prefix...)
		dst = append(dst, `],"usage":`...)
		dst = appendUsage(dst, t.usage)
		dst = append(dst, "}\n\n"...)
	}
	t.done = true
	return append(dst, "data: [DONE]\n\n"...), true
}

// start emits the role chunk once, before anything else.
func (t *StreamTranslator) start(dst []byte) []byte {
	t.started = true
	t.prefix = append(t.prefix[:0], `data: {"id":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.id)
	t.prefix = append(t.prefix, `,"object":"chat.completion.chunk","created":`...)
	t.prefix = strconv.AppendInt(t.prefix, t.created, 10)
	t.prefix = append(t.prefix, `,"model":`...)
	t.prefix = openai.AppendJSONString(t.prefix, t.model)
	t.prefix = append(t.prefix, `,"choices":[`...)
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"role":"assistant","content":""}`...)
	return t.close(dst, "")
}

// close ends choices[0] (whose delta object is written) and the event;
// finish "" means null.
func (t *StreamTranslator) close(dst []byte, finish string) []byte {
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = openai.AppendJSONString(dst, finish)
	}
	dst = append(dst, "}]"...)
	if t.includeUsage {
		dst = append(dst, `,"usage":null`...)
	}
	return append(dst, "}\n\n"...)
}

func (t *StreamTranslator) appendText(dst, text []byte) []byte {
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"content":`...)
	dst = openai.AppendJSONString(dst, text)
	dst = append(dst, '}')
	return t.close(dst, "")
}

// appendCall emits a whole function call as one tool call delta.
func (t *StreamTranslator) appendCall(dst []byte, fc *fastjson.Value) []byte {
	id, _ := stringOf(fc.Get("id"))
	name, _ := stringOf(fc.Get("name"))
	t.args = appendArgs(t.args[:0], fc.Get("args"))
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(t.calls), 10)
	dst = append(dst, `,"id":`...)
	dst = appendCallID(dst, id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = openai.AppendJSONString(dst, name)
	dst = append(dst, `,"arguments":`...)
	dst = openai.AppendJSONString(dst, t.args)
	dst = append(dst, `}}]}`...)
	t.calls++
	return t.close(dst, "")
}

func (t *StreamTranslator) appendFinish(dst []byte, finish string) []byte {
	t.finished = true
	dst = append(dst, t.prefix...)
	dst = append(dst, `{"index":0,"delta":{}`...)
	return t.close(dst, finish)
}
