package gemini

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
	args  []byte // one call's args, re-encoded
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

// badResponse is the error for a 2xx reply that is not a
// GenerateContentResponse.
func badResponse(why string) *openai.Error {
	return &openai.Error{Status: 502, Type: openai.TypeUpstream, Code: "upstream_bad_response",
		Message: "The Gemini upstream sent a reply the gateway cannot read: " + why + "."}
}

// AppendResponse appends to dst the OpenAI chat.completion equivalent to
// geminiBody, a generateContent reply, and returns the extended slice.
// model, id and created become the completion's "model", "id" and
// "created" (an empty model or id means the upstream's modelVersion or
// responseId).
//
// The first candidate's text parts are concatenated into message.content
// (thought parts are left out; null when there is no text but there are
// function calls); functionCall parts become message.tool_calls, with
// generated ids and their args as the arguments string. finishReason
// becomes finish_reason (see FinishReason); a prompt blocked before any
// candidate (promptFeedback.blockReason) is an empty message finished by
// "content_filter". usageMetadata is mapped as in the package
// documentation; without it the completion has no usage, so accounting
// falls back to its estimate instead of counting zero.
//
// A Google error body yields TranslateError's error; a body that is not a
// reply yields a 502 upstream_error with code "upstream_bad_response".
// Errors are *openai.Error and leave dst unchanged. Safe for concurrent
// use.
func AppendResponse(dst, geminiBody []byte, model, id string, created int64) ([]byte, error) {
	w := responseWriters.Get().(*responseWriter)
	defer w.release()
	root, err := w.p.ParseBytes(geminiBody)
	if err == nil {
		err = openai.ValidateJSON(geminiBody)
	}
	if err != nil {
		return dst, badResponse("not valid JSON")
	}
	if root.Type() != fastjson.TypeObject {
		return dst, badResponse("not a JSON object")
	}
	if root.Get("error") != nil {
		return dst, TranslateError(0, geminiBody)
	}
	cand := root.Get("candidates", "0")
	block, _ := stringOf(root.Get("promptFeedback", "blockReason"))
	if cand == nil && block == nil {
		return dst, badResponse("no candidates")
	}
	hasText, calls := false, 0
	for _, part := range cand.GetArray("content", "parts") {
		if t, ok := stringOf(part.Get("text")); ok && !part.GetBool("thought") {
			w.text = openai.AppendJSONEscaped(w.text, t)
			hasText = true
		} else if fc := part.Get("functionCall"); fc != nil {
			w.appendToolCall(fc, calls)
			calls++
		}
	}

	out := appendHead(dst, root, model, id, created, "chat.completion")
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
	reason, _ := stringOf(cand.Get("finishReason"))
	if cand == nil {
		reason = block
	}
	finish := FinishReason(reason, calls > 0)
	if cand == nil {
		finish = "content_filter" // the prompt itself was blocked
	}
	out = openai.AppendJSONString(out, finish)
	out = append(out, "}]"...)
	if u := usageOf(root.Get("usageMetadata")); u.Present {
		out = append(out, `,"usage":`...)
		out = appendUsage(out, u)
	}
	return append(out, '}'), nil
}

// appendToolCall appends the OpenAI tool call for a functionCall.
func (w *responseWriter) appendToolCall(fc *fastjson.Value, n int) {
	if n > 0 {
		w.calls = append(w.calls, ',')
	}
	id, _ := stringOf(fc.Get("id"))
	name, _ := stringOf(fc.Get("name"))
	w.calls = append(w.calls, `{"id":`...)
	w.calls = appendCallID(w.calls, id)
	w.calls = append(w.calls, `,"type":"function","function":{"name":`...)
	w.calls = openai.AppendJSONString(w.calls, name)
	w.calls = append(w.calls, `,"arguments":`...)
	w.args = appendArgs(w.args[:0], fc.Get("args"))
	w.calls = openai.AppendJSONString(w.calls, w.args)
	w.calls = append(w.calls, "}}"...)
}

// appendArgs appends a functionCall's args as compact JSON ("{}" when
// absent).
func appendArgs(dst []byte, args *fastjson.Value) []byte {
	if isNull(args) {
		return append(dst, "{}"...)
	}
	return appendValue(dst, args)
}

// appendHead appends a completion's or chunk's opening members up to
// "model": id and model, or the upstream's when empty (a made-up id when
// it sent none).
func appendHead(out []byte, root *fastjson.Value, model, id string, created int64, object string) []byte {
	out = append(out, `{"id":`...)
	if id == "" {
		if s, _ := stringOf(root.Get("responseId")); len(s) > 0 {
			out = openai.AppendJSONString(out, s)
		} else {
			out = appendRandomID(out, "chatcmpl-")
		}
	} else {
		out = openai.AppendJSONString(out, id)
	}
	out = append(out, `,"object":"`...)
	out = append(out, object...)
	out = append(out, `","created":`...)
	out = strconv.AppendInt(out, created, 10)
	out = append(out, `,"model":`...)
	if model == "" {
		s, _ := stringOf(root.Get("modelVersion"))
		return openai.AppendJSONString(out, s)
	}
	return openai.AppendJSONString(out, model)
}
