package anthropic

import (
	"strconv"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// responseWriter holds what one AppendResponse call needs; it is pooled.
type responseWriter struct {
	p     fastjson.Parser
	text  []byte // message.content, escaped
	calls []byte // message.tool_calls elements
	args  []byte // one tool call's input, re-encoded
}

var responseWriters = sync.Pool{New: func() any { return new(responseWriter) }}

func (w *responseWriter) release() {
	for _, b := range []*[]byte{&w.text, &w.calls, &w.args} {
		if cap(*b) > maxKeptBuffer {
			*b = nil
		}
		*b = (*b)[:0]
	}
	responseWriters.Put(w)
}

// badResponse is the error for a 2xx reply that is not a Messages API
// message.
func badResponse(why string) *openai.Error {
	return &openai.Error{Status: 502, Type: openai.TypeUpstream, Code: "upstream_bad_response",
		Message: "The Anthropic upstream sent a reply the gateway cannot read: " + why + "."}
}

// AppendResponse appends to dst the OpenAI chat.completion equivalent to
// anthropicBody, a non-streamed Messages API reply, and returns the
// extended slice. model, id and created become the completion's "model",
// "id" and "created" (an empty model or id means the upstream's).
//
// Text blocks are concatenated into message.content (null when there is
// none but there are tool calls); tool_use blocks become message.tool_calls
// with their input re-encoded as the arguments string; other blocks
// (thinking, server tools) are dropped. stop_reason becomes finish_reason
// (see FinishReason) and usage is mapped as in the package documentation;
// without a usage object the completion has none, so that accounting falls
// back to its estimate instead of counting zero.
//
// An Anthropic error body yields TranslateError's error; a body that is
// not a message yields a 502 upstream_error with code
// "upstream_bad_response". Errors are *openai.Error and leave dst
// unchanged. Safe for concurrent use.
func AppendResponse(dst, anthropicBody []byte, model, id string, created int64) ([]byte, error) {
	w := responseWriters.Get().(*responseWriter)
	defer w.release()
	root, err := w.p.ParseBytes(anthropicBody)
	if err == nil {
		err = openai.ValidateJSON(anthropicBody)
	}
	if err != nil {
		return dst, badResponse("not valid JSON")
	}
	if root.Type() != fastjson.TypeObject {
		return dst, badResponse("not a JSON object")
	}
	if typ, _ := stringOf(root.Get("type")); string(typ) == "error" {
		return dst, TranslateError(0, anthropicBody)
	}
	content := root.Get("content")
	if content == nil || content.Type() != fastjson.TypeArray {
		return dst, badResponse("no content array")
	}
	blocks, _ := content.Array()
	hasText, calls := false, 0
	for _, b := range blocks {
		typ, _ := stringOf(b.Get("type"))
		switch string(typ) {
		case "text":
			if t, ok := stringOf(b.Get("text")); ok {
				w.text = openai.AppendJSONEscaped(w.text, t)
				hasText = true
			}
		case "tool_use":
			w.appendToolCall(b, calls)
			calls++
		}
	}

	out := append(dst, `{"id":`...)
	if id == "" {
		s, _ := stringOf(root.Get("id"))
		out = openai.AppendJSONString(out, s)
	} else {
		out = openai.AppendJSONString(out, id)
	}
	out = append(out, `,"object":"chat.completion","created":`...)
	out = strconv.AppendInt(out, created, 10)
	out = append(out, `,"model":`...)
	if model == "" {
		s, _ := stringOf(root.Get("model"))
		out = openai.AppendJSONString(out, s)
	} else {
		out = openai.AppendJSONString(out, model)
	}
	out = append(out, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	if hasText || calls == 0 {
		out = append(out, '"')
		out = append(out, w.text...)
		out = append(out, '"')
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `,"refusal":null`...)
	if calls > 0 {
		out = append(out, `,"tool_calls":[`...)
		out = append(out, w.calls...)
		out = append(out, ']')
	}
	out = append(out, `},"logprobs":null,"finish_reason":`...)
	stop, _ := stringOf(root.Get("stop_reason"))
	out = openai.AppendJSONString(out, FinishReason(stop))
	out = append(out, "}]"...)
	if u := usageOf(root.Get("usage")); u.Present {
		out = append(out, `,"usage":`...)
		out = appendUsage(out, u)
	}
	return append(out, '}'), nil
}

// appendToolCall appends the OpenAI tool call for a tool_use block.
func (w *responseWriter) appendToolCall(b *fastjson.Value, n int) {
	if n > 0 {
		w.calls = append(w.calls, ',')
	}
	id, _ := stringOf(b.Get("id"))
	name, _ := stringOf(b.Get("name"))
	w.calls = append(w.calls, `{"id":`...)
	w.calls = openai.AppendJSONString(w.calls, id)
	w.calls = append(w.calls, `,"type":"function","function":{"name":`...)
	w.calls = openai.AppendJSONString(w.calls, name)
	w.calls = append(w.calls, `,"arguments":`...)
	w.args = w.args[:0]
	if in := b.Get("input"); in != nil {
		w.args = appendValue(w.args, in)
	} else {
		w.args = append(w.args, "{}"...)
	}
	w.calls = openai.AppendJSONString(w.calls, w.args)
	w.calls = append(w.calls, "}}"...)
}
