package gemini

import (
	"bytes"
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// assistantMessage adds an assistant message's text (content parts of type
// text or refusal) and its tool calls (functionCall parts) to the model
// turn, and remembers each call's function name by id for the tool
// messages that answer it.
func (w *requestWriter) assistantMessage(m *fastjson.Value, i int) error {
	if !isNull(m.Get("function_call")) {
		return openai.BadRequest(fmt.Sprintf("messages[%d].function_call", i),
			"'messages[%d].function_call' is deprecated and not supported for Gemini models; use 'tool_calls'", i)
	}
	c := m.Get("content")
	if s, ok := stringOf(c); ok {
		w.textPart(roleModel, s)
	} else if !isNull(c) {
		parts, err := c.Array()
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string, an array of content parts, or null", i)
		}
		for j, part := range parts {
			at := fmt.Sprintf("messages[%d].content[%d]", i, j)
			if part.Type() != fastjson.TypeObject {
				return openai.BadRequest(at, "'%s' must be an object", at)
			}
			typ, _ := stringOf(part.Get("type"))
			field := string(typ)
			if field != "text" && field != "refusal" {
				return openai.BadRequest(at+".type", "'%s.type' is %q: assistant messages may contain \"text\" and \"refusal\" parts", at, typ)
			}
			text, ok := stringOf(part.Get(field))
			if !ok {
				return openai.BadRequest(at+"."+field, "'%s.%s' must be a string", at, field)
			}
			w.textPart(roleModel, text)
		}
	}
	calls := m.Get("tool_calls")
	if isNull(calls) {
		return nil
	}
	a, err := calls.Array()
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("messages[%d].tool_calls", i), "'messages[%d].tool_calls' must be an array", i)
	}
	for j, call := range a {
		if err := w.functionCall(call, fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)); err != nil {
			return err
		}
	}
	return nil
}

// functionCall adds a functionCall part for one assistant tool call; its
// arguments (a JSON string) become the part's args object.
func (w *requestWriter) functionCall(call *fastjson.Value, at string) error {
	if call.Type() != fastjson.TypeObject {
		return openai.BadRequest(at, "'%s' must be an object", at)
	}
	if typ, ok := stringOf(call.Get("type")); (ok && string(typ) != "function") || (!ok && !isNull(call.Get("type"))) {
		return openai.BadRequest(at+".type", "'%s.type' must be \"function\"", at)
	}
	id, ok := stringOf(call.Get("id"))
	if !ok || len(id) == 0 {
		return openai.BadRequest(at+".id", "'%s.id' is a required property and must be a non-empty string", at)
	}
	fn := call.Get("function")
	name, ok := stringOf(fn.Get("name"))
	if !ok || len(name) == 0 {
		return openai.BadRequest(at+".function.name", "'%s.function.name' is a required property and must be a non-empty string", at)
	}
	args, ok := stringOf(fn.Get("arguments"))
	if !ok && !isNull(fn.Get("arguments")) {
		return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' must be a string of JSON", at)
	}
	w.part = append(w.part[:0], `{"functionCall":{"name":`...)
	w.part = openai.AppendJSONString(w.part, name)
	w.part = append(w.part, `,"args":`...)
	if len(bytes.TrimSpace(args)) == 0 {
		w.part = append(w.part, "{}"...)
	} else {
		input, err := w.args.ParseBytes(args)
		if err == nil {
			err = openai.ValidateJSON(args)
		}
		if err != nil {
			return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' is not valid JSON: %v", at, err)
		}
		if input.Type() != fastjson.TypeObject {
			return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' must be a JSON object, not %s", at, input.Type())
		}
		w.part = appendValue(w.part, input)
	}
	w.part = append(w.part, '}')
	if w.role != roleModel || !w.signed {
		// Only the first functionCall of a turn carries a signature.
		w.part = append(w.part, `,"thoughtSignature":"`+skipSignature+`"`...)
	}
	w.part = append(w.part, '}')
	w.calls[string(id)] = toolCall{name: string(name), seq: w.numCalls}
	w.numCalls++
	w.commit(roleModel)
	w.signed = true
	return nil
}

// toolMessage holds back a functionResponse part, named after the call
// it answers, for the user turn (see commitResponses). Content that is a JSON object is the
// response as is; other text is {"output": text}.
func (w *requestWriter) toolMessage(m *fastjson.Value, i int) error {
	at := fmt.Sprintf("messages[%d].tool_call_id", i)
	id, ok := stringOf(m.Get("tool_call_id"))
	if !ok || len(id) == 0 {
		return openai.BadRequest(at, "'%s' is a required property and must be a non-empty string", at)
	}
	call, ok := w.calls[string(id)]
	if !ok {
		return openai.BadRequest(at, "'%s' is %q, which no earlier assistant message's tool_calls has: Gemini matches a tool result to its call by the function's name", at, id)
	}
	var text []byte
	n := 0
	err := eachText(m.Get("content"), i, "tool messages may contain only text parts", func(s []byte) {
		if n > 0 && len(s) > 0 {
			text = append(text, '\n')
		}
		text = append(text, s...)
		n++
	})
	if err != nil {
		return err
	}
	w.part = append(w.part[:0], `{"functionResponse":{"name":`...)
	w.part = openai.AppendJSONString(w.part, call.name)
	w.part = append(w.part, `,"response":`...)
	if v, err := w.args.ParseBytes(text); err == nil && v.Type() == fastjson.TypeObject && openai.ValidateJSON(text) == nil {
		w.part = appendValue(w.part, v)
	} else {
		w.part = append(w.part, `{"output":`...)
		w.part = openai.AppendJSONString(w.part, text)
		w.part = append(w.part, '}')
	}
	w.part = append(w.part, "}}"...)
	start := len(w.responses)
	w.responses = append(w.responses, w.part...)
	w.responseSpans = append(w.responseSpans, responseSpan{seq: call.seq, start: start, end: len(w.responses)})
	return nil
}

// commitResponses adds the held-back functionResponse parts to the user
// turn in the order of the calls they answer, whatever the order of the
// tool messages: Gemini pairs a response with a call by the function's
// name, so two calls of one function answered out of order would
// otherwise each get the other's result.
func (w *requestWriter) commitResponses() {
	spans := w.responseSpans
	if len(spans) == 0 {
		return
	}
	for i := 1; i < len(spans); i++ { // insertion sort: stable, no allocation, few parts
		for j := i; j > 0 && spans[j].seq < spans[j-1].seq; j-- {
			spans[j], spans[j-1] = spans[j-1], spans[j]
		}
	}
	for _, s := range spans {
		w.add(roleUser, w.responses[s.start:s.end])
	}
	w.responses, w.responseSpans = w.responses[:0], spans[:0]
}

// commit adds the part in w.part to the turn of role, first ending the
// open turn if its role differs (and adding any held-back tool results).
func (w *requestWriter) commit(role string) {
	w.commitResponses()
	w.add(role, w.part)
}

// add adds part to the turn of role, first ending the open turn if its
// role differs.
func (w *requestWriter) add(role string, part []byte) {
	if w.role != role {
		w.flush()
		w.role = role
	}
	if len(w.parts) > 0 {
		w.parts = append(w.parts, ',')
	}
	w.parts = append(w.parts, part...)
}

// flush writes the open turn, if it has parts.
func (w *requestWriter) flush() {
	if len(w.parts) == 0 {
		return
	}
	if w.turns > 0 {
		w.out = append(w.out, ',')
	}
	w.out = append(w.out, `{"role":"`...)
	w.out = append(w.out, w.role...)
	w.out = append(w.out, `","parts":[`...)
	w.out = append(w.out, w.parts...)
	w.out = append(w.out, "]}"...)
	w.parts = w.parts[:0]
	w.signed = false
	w.turns++
}
