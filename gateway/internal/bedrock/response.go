package bedrock

import (
	"crypto/rand"
	"encoding/hex"
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

// badResponse is the error for a 2xx reply that is not a Converse reply.
func badResponse(why string) *openai.Error {
	return &openai.Error{Status: 502, Type: openai.TypeUpstream, Code: "upstream_bad_response",
		Message: "The Bedrock upstream sent a reply the gateway cannot read: " + why + "."}
}

// NewID returns a chat completion id, "chatcmpl-" and 24 random hex
// digits, for replies whose upstream names none (Converse replies carry no
// id).
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-" + hex.EncodeToString(b[:])
}

// AppendResponse appends to dst the OpenAI chat.completion equivalent to
// raw, a Converse reply, and returns the extended slice. model, id and
// created become the completion's "model", "id" and "created"; an empty
// id means a new one (NewID): Converse replies carry none.
//
// Text blocks are concatenated into message.content (null when there is
// none but there are tool calls); toolUse blocks become message.tool_calls
// with their input re-encoded as the arguments string; other blocks
// (reasoningContent, citations) are dropped. stopReason becomes
// finish_reason (FinishReason) and usage is mapped as in the package
// documentation; without a usage object the completion has none, so that
// accounting falls back to its estimate instead of counting zero.
//
// A body that is not a Converse reply yields a 502 upstream_error with
// code "upstream_bad_response". Errors are *openai.Error and leave dst
// unchanged. Safe for concurrent use.
func AppendResponse(dst, raw []byte, model, id string, created int64) ([]byte, error) {
	w := responseWriters.Get().(*responseWriter)
	defer w.release()
	root, err := w.p.ParseBytes(raw)
	if err == nil {
		err = openai.ValidateJSON(raw)
	}
	if err != nil {
		return dst, badResponse("not valid JSON")
	}
	if root.Type() != fastjson.TypeObject {
		return dst, badResponse("not a JSON object")
	}
	content := root.Get("output", "message", "content")
	if content == nil || content.Type() != fastjson.TypeArray {
		return dst, badResponse("no output.message.content array")
	}
	blocks, _ := content.Array()
	hasText, calls := false, 0
	for _, b := range blocks {
		if t, ok := stringOf(b.Get("text")); ok {
			w.text = openai.AppendJSONEscaped(w.text, t)
			hasText = true
		} else if tu := b.Get("toolUse"); tu != nil && tu.Type() == fastjson.TypeObject {
			w.appendToolCall(tu, calls)
			calls++
		}
	}
	if id == "" {
		id = NewID()
	}
	out := append(dst, `{"id":`...)
	out = openai.AppendJSONString(out, id)
	out = append(out, `,"object":"chat.completion","created":`...)
	out = strconv.AppendInt(out, created, 10)
	out = append(out, `,"model":`...)
	out = openai.AppendJSONString(out, model)
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
	stop, _ := stringOf(root.Get("stopReason"))
	out = openai.AppendJSONString(out, FinishReason(stop))
	out = append(out, "}]"...)
	if u := usageOf(root.Get("usage")); u.Present {
		out = append(out, `,"usage":`...)
		out = appendUsage(out, u)
	}
	return append(out, '}'), nil
}

// appendToolCall appends the OpenAI tool call for a toolUse block.
func (w *responseWriter) appendToolCall(b *fastjson.Value, n int) {
	if n > 0 {
		w.calls = append(w.calls, ',')
	}
	id, _ := stringOf(b.Get("toolUseId"))
	name, _ := stringOf(b.Get("name"))
	w.calls = append(w.calls, `{"id":`...)
	w.calls = openai.AppendJSONString(w.calls, id)
	w.calls = append(w.calls, `,"type":"function","function":{"name":`...)
	w.calls = openai.AppendJSONString(w.calls, name)
	w.calls = append(w.calls, `,"arguments":`...)
	w.args = w.args[:0]
	if in := b.Get("input"); in != nil && in.Type() != fastjson.TypeNull {
		w.args = appendValue(w.args, in)
	} else {
		w.args = append(w.args, "{}"...)
	}
	w.calls = openai.AppendJSONString(w.calls, w.args)
	w.calls = append(w.calls, "}}"...)
}

// FinishReason maps a Converse stopReason to an OpenAI finish_reason:
// end_turn and stop_sequence → "stop"; max_tokens and
// model_context_window_exceeded → "length"; tool_use → "tool_calls";
// guardrail_intervened and content_filtered → "content_filter"; anything
// else → "stop".
func FinishReason(stopReason []byte) string {
	switch string(stopReason) {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	return "stop"
}
