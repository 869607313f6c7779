package responses

import (
	"fmt"
	"sync"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Translation of a Responses request into a chat.completions request, for
// upstreams without the Responses API (see doc.go for the table).

var parsers fastjson.ParserPool

// chatWriter builds the chat request.
type chatWriter struct {
	dst []byte
	// asst is where the open assistant message's tool_calls array began
	// (function_call items following an assistant message join it); -1
	// when the last message written is not one that can take more calls.
	asst  bool
	calls bool // the open assistant message has a tool_calls member
}

var writers = sync.Pool{New: func() any { return new(chatWriter) }}

// refused is the 400 for a member the translation cannot express.
func refused(param, why string) *openai.Error {
	return openai.BadRequest(param, "The parameter '%s' is not supported for this model: %s.", param, why)
}

// topRefusals are members refused whenever they are set (not null/false/empty).
var topRefusals = []struct{ name, why string }{
	{"previous_response_id", "its upstream does not store responses; send the conversation in 'input'"},
	{"conversation", "its upstream does not store conversations; send the conversation in 'input'"},
	{"background", "its upstream cannot run a response in the background"},
	{"prompt", "its upstream has no stored prompt templates"},
	{"top_logprobs", "its upstream reports no log probabilities through this gateway"},
	{"max_tool_calls", "its upstream cannot bound the number of built-in tool calls"},
}

// AppendChatRequest appends the chat.completions request for the
// Responses request body to dst. Members that cannot be expressed are
// refused with a 400 *openai.Error naming them (doc.go lists them).
func AppendChatRequest(dst, body []byte) ([]byte, error) {
	p := parsers.Get()
	defer parsers.Put(p)
	root, err := p.ParseBytes(body)
	if err == nil {
		err = openai.ValidateJSON(body)
	}
	if err != nil || root.Type() != fastjson.TypeObject {
		return dst, openai.BadRequest("", "The request body must be a JSON object.")
	}
	if err := checkRefused(root); err != nil {
		return dst, err
	}
	if m, ok := stringOf(root.Get("model")); !ok || len(m) == 0 {
		return dst, openai.BadRequest("model", "Missing required parameter: 'model' (a non-empty string).")
	}
	w := writers.Get().(*chatWriter)
	defer writers.Put(w)
	w.dst, w.asst, w.calls = append(dst, '{'), false, false
	w.dst = appendKey(w.dst, "model")
	w.dst = appendValue(w.dst, root.Get("model"))
	w.dst = appendKey(w.dst, "messages")
	w.dst = append(w.dst, '[')
	if err := w.messages(root); err != nil {
		return dst, err
	}
	w.closeAssistant()
	w.dst = append(w.dst, ']')
	if err := w.options(root); err != nil {
		return dst, err
	}
	if err := w.tools(root); err != nil {
		return dst, err
	}
	out := append(w.dst, '}')
	w.dst = nil
	return out, nil
}

func checkRefused(root *fastjson.Value) error {
	for _, r := range topRefusals {
		v := root.Get(r.name)
		if isNull(v) || v.Type() == fastjson.TypeFalse || (v.Type() == fastjson.TypeString && len(str(v)) == 0) {
			continue
		}
		return refused(r.name, r.why)
	}
	if v := root.Get("store"); v != nil && v.Type() == fastjson.TypeTrue {
		return refused("store", "its upstream does not store responses; send store: false (or leave it out)")
	}
	if v := root.Get("n"); !isNull(v) {
		return refused("n", "the Responses API has no 'n'")
	}
	return nil
}

// messages writes instructions and input as chat messages.
func (w *chatWriter) messages(root *fastjson.Value) error {
	if s, ok := stringOf(root.Get("instructions")); ok && len(s) > 0 {
		w.message("system", func() { w.dst = openai.AppendJSONString(w.dst, s) })
	}
	in := root.Get("input")
	if s, ok := stringOf(in); ok {
		w.message("user", func() { w.dst = openai.AppendJSONString(w.dst, s) })
		return nil
	}
	if isNull(in) {
		return openai.BadRequest("input", "Missing required parameter: 'input'.")
	}
	items, err := in.Array()
	if err != nil {
		return openai.BadRequest("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	for i, it := range items {
		if err := w.item(i, it); err != nil {
			return err
		}
	}
	return nil
}

// message writes one chat message of role whose content content writes.
func (w *chatWriter) message(role string, content func()) {
	w.closeAssistant()
	w.sep()
	w.dst = append(w.dst, `{"role":`...)
	w.dst = openai.AppendJSONString(w.dst, role)
	w.dst = append(w.dst, `,"content":`...)
	content()
	w.dst = append(w.dst, '}')
}

// sep writes the comma before a message.
func (w *chatWriter) sep() {
	if w.dst[len(w.dst)-1] != '[' {
		w.dst = append(w.dst, ',')
	}
}

// closeAssistant ends an open assistant message (its tool_calls array and
// the object).
func (w *chatWriter) closeAssistant() {
	if !w.asst {
		return
	}
	if w.calls {
		w.dst = append(w.dst, ']')
	}
	w.dst = append(w.dst, '}')
	w.asst, w.calls = false, false
}

// item writes input item i.
func (w *chatWriter) item(i int, it *fastjson.Value) error {
	typ := str(it.Get("type"))
	switch string(typ) {
	case "", "message":
		return w.messageItem(i, it)
	case "function_call":
		return w.functionCall(i, it)
	case "function_call_output":
		return w.functionOutput(i, it)
	case "reasoning":
		return nil // the model's own reasoning from an earlier turn: no chat equivalent, dropped
	}
	return refused(fmt.Sprintf("input[%d].type", i), fmt.Sprintf("input items of type %q need an upstream with the Responses API", typ))
}

func (w *chatWriter) messageItem(i int, it *fastjson.Value) error {
	role, _ := stringOf(it.Get("role"))
	switch string(role) {
	case "user", "system", "developer":
	case "assistant":
		return w.assistantItem(i, it)
	default:
		return openai.BadRequest(fmt.Sprintf("input[%d].role", i), "Invalid value for 'input[%d].role': expected one of user, assistant, system, developer.", i)
	}
	c := it.Get("content")
	if s, ok := stringOf(c); ok {
		w.message(string(role), func() { w.dst = openai.AppendJSONString(w.dst, s) })
		return nil
	}
	parts, err := arrayOf(c)
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("input[%d].content", i), "Invalid type for 'input[%d].content': expected a string or an array of content parts.", i)
	}
	var perr error
	w.message(string(role), func() {
		w.dst = append(w.dst, '[')
		for j, part := range parts {
			if perr = w.part(i, j, part, role); perr != nil {
				return
			}
		}
		w.dst = append(w.dst, ']')
	})
	return perr
}

// part writes one content part of a user, system or developer message.
func (w *chatWriter) part(i, j int, part *fastjson.Value, role []byte) error {
	if j > 0 {
		w.dst = append(w.dst, ',')
	}
	param := fmt.Sprintf("input[%d].content[%d]", i, j)
	switch t := string(str(part.Get("type"))); t {
	case "input_text", "output_text", "text":
		w.dst = append(w.dst, `{"type":"text","text":`...)
		w.dst = openai.AppendJSONString(w.dst, str(part.Get("text")))
		w.dst = append(w.dst, '}')
		return nil
	case "input_image":
		url, ok := stringOf(part.Get("image_url"))
		if !ok || len(url) == 0 {
			return refused(param+".file_id", "images are sent to it by 'image_url' (a URL or a data: URL), not by file id")
		}
		if string(role) != "user" {
			return refused(param, "images go in user messages only")
		}
		w.dst = append(w.dst, `{"type":"image_url","image_url":{"url":`...)
		w.dst = openai.AppendJSONString(w.dst, url)
		if d, ok := stringOf(part.Get("detail")); ok {
			w.dst = append(w.dst, `,"detail":`...)
			w.dst = openai.AppendJSONString(w.dst, d)
		}
		w.dst = append(w.dst, `}}`...)
		return nil
	default:
		return refused(param+".type", fmt.Sprintf("content parts of type %q cannot be sent to it", t))
	}
}

// assistantItem writes an assistant message item: its text as a string.
func (w *chatWriter) assistantItem(i int, it *fastjson.Value) error {
	c := it.Get("content")
	var text []byte
	if s, ok := stringOf(c); ok {
		text = s
	} else {
		parts, err := arrayOf(c)
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("input[%d].content", i), "Invalid type for 'input[%d].content': expected a string or an array of content parts.", i)
		}
		for j, part := range parts {
			switch t := string(str(part.Get("type"))); t {
			case "output_text", "input_text", "text":
				text = append(text, str(part.Get("text"))...)
			case "refusal":
				text = append(text, str(part.Get("refusal"))...)
			default:
				return refused(fmt.Sprintf("input[%d].content[%d].type", i, j), fmt.Sprintf("assistant content parts of type %q cannot be sent to it", t))
			}
		}
	}
	w.closeAssistant()
	w.sep()
	w.dst = append(w.dst, `{"role":"assistant","content":`...)
	w.dst = openai.AppendJSONString(w.dst, text)
	w.asst = true
	return nil
}

// functionCall writes a function_call item as a tool call of the open
// assistant message, or of a new one.
func (w *chatWriter) functionCall(i int, it *fastjson.Value) error {
	id, _ := stringOf(it.Get("call_id"))
	name, _ := stringOf(it.Get("name"))
	args, ok := stringOf(it.Get("arguments"))
	if len(id) == 0 || len(name) == 0 || !ok {
		return openai.BadRequest(fmt.Sprintf("input[%d]", i), "Invalid 'input[%d]': a function_call item needs 'call_id', 'name' and 'arguments' strings.", i)
	}
	if !w.asst {
		w.sep()
		w.dst = append(w.dst, `{"role":"assistant","content":null`...)
		w.asst = true
	}
	if w.calls {
		w.dst = append(w.dst, ',')
	} else {
		w.dst = append(w.dst, `,"tool_calls":[`...)
		w.calls = true
	}
	w.dst = append(w.dst, `{"id":`...)
	w.dst = openai.AppendJSONString(w.dst, id)
	w.dst = append(w.dst, `,"type":"function","function":{"name":`...)
	w.dst = openai.AppendJSONString(w.dst, name)
	w.dst = append(w.dst, `,"arguments":`...)
	w.dst = openai.AppendJSONString(w.dst, args)
	w.dst = append(w.dst, `}}`...)
	return nil
}

// functionOutput writes a function_call_output item as a tool message.
func (w *chatWriter) functionOutput(i int, it *fastjson.Value) error {
	id, _ := stringOf(it.Get("call_id"))
	if len(id) == 0 {
		return openai.BadRequest(fmt.Sprintf("input[%d].call_id", i), "Missing required parameter: 'input[%d].call_id'.", i)
	}
	out := it.Get("output")
	var text []byte
	if s, ok := stringOf(out); ok {
		text = s
	} else {
		parts, err := arrayOf(out)
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("input[%d].output", i), "Invalid type for 'input[%d].output': expected a string or an array of content parts.", i)
		}
		for j, part := range parts {
			if t := str(part.Get("type")); string(t) != "input_text" && string(t) != "output_text" {
				return refused(fmt.Sprintf("input[%d].output[%d].type", i, j), fmt.Sprintf("tool output parts of type %q cannot be sent to it", t))
			}
			text = append(text, str(part.Get("text"))...)
		}
	}
	w.closeAssistant()
	w.sep()
	w.dst = append(w.dst, `{"role":"tool","tool_call_id":`...)
	w.dst = openai.AppendJSONString(w.dst, id)
	w.dst = append(w.dst, `,"content":`...)
	w.dst = openai.AppendJSONString(w.dst, text)
	w.dst = append(w.dst, '}')
	return nil
}

// arrayOf is v's elements; an error when v is absent or not an array.
func arrayOf(v *fastjson.Value) ([]*fastjson.Value, error) {
	if v == nil {
		return nil, errNotArray
	}
	return v.Array()
}

const errNotArray = replyError("not an array")
