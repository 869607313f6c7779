package bedrock

import (
	"bytes"
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// toolUseBlock adds a toolUse block for one assistant tool call; its
// arguments (a JSON string) become the block's input object.
func (w *requestWriter) toolUseBlock(call *fastjson.Value, at string) error {
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
	w.blk = append(w.blk[:0], `{"toolUse":{"toolUseId":`...)
	w.blk = openai.AppendJSONString(w.blk, id)
	w.blk = append(w.blk, `,"name":`...)
	w.blk = openai.AppendJSONString(w.blk, name)
	w.blk = append(w.blk, `,"input":`...)
	if len(bytes.TrimSpace(args)) == 0 {
		w.blk = append(w.blk, "{}"...)
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
		w.blk = appendValue(w.blk, input)
	}
	w.blk = append(w.blk, "}}"...)
	w.toolUse = true
	w.commit(roleAssistant, false)
	return nil
}

// toolMessage adds a toolResult block to the user turn.
func (w *requestWriter) toolMessage(m *fastjson.Value, i int) error {
	id, ok := stringOf(m.Get("tool_call_id"))
	if !ok || len(id) == 0 {
		return openai.BadRequest(fmt.Sprintf("messages[%d].tool_call_id", i),
			"'messages[%d].tool_call_id' is a required property and must be a non-empty string", i)
	}
	w.blk = append(w.blk[:0], `{"toolResult":{"toolUseId":`...)
	w.blk = openai.AppendJSONString(w.blk, id)
	w.blk = append(w.blk, `,"content":[`...)
	c := m.Get("content")
	if s, ok := stringOf(c); ok {
		if len(s) > 0 {
			w.blk = append(w.blk, `{"text":`...)
			w.blk = openai.AppendJSONString(w.blk, s)
			w.blk = append(w.blk, '}')
		}
	} else if !isNull(c) {
		parts, err := c.Array()
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string or an array of text parts", i)
		}
		n := 0
		for j, part := range parts {
			text, err := textPart(part, i, j, "tool messages may contain only text parts")
			if err != nil {
				return err
			}
			if len(text) == 0 {
				continue
			}
			if n > 0 {
				w.blk = append(w.blk, ',')
			}
			w.blk = append(w.blk, `{"text":`...)
			w.blk = openai.AppendJSONString(w.blk, text)
			w.blk = append(w.blk, '}')
			n++
		}
	}
	w.blk = append(w.blk, "]}}"...)
	w.toolUse = true
	w.commit(roleUser, true)
	return nil
}

// toolConfig writes "toolConfig" from tools and tool_choice. Converse has
// no "none" choice: tool_choice "none" sends no toolConfig, which Converse
// accepts only when the conversation holds no tool calls or results.
func (w *requestWriter) toolConfig(f *chatFields) error {
	if !isNull(f.parallelToolCalls) && f.parallelToolCalls.Type() != fastjson.TypeTrue && f.parallelToolCalls.Type() != fastjson.TypeFalse {
		return openai.BadRequest("parallel_tool_calls", "'parallel_tool_calls' must be a boolean")
	}
	choice, name, err := toolChoice(f.toolChoice)
	if err != nil {
		return err
	}
	mark := len(w.out)
	n, err := w.tools(f.tools)
	if err != nil {
		return err
	}
	switch {
	case n == 0 && (choice == "any" || choice == "tool"):
		return openai.BadRequest("tool_choice", "'tool_choice' requires 'tools'")
	case n == 0 && w.toolUse:
		return openai.BadRequest("tools", "'tools' is required for Bedrock models when the conversation contains tool calls or tool results")
	case n == 0:
		return nil
	case choice == "none" && w.toolUse:
		return openai.BadRequest("tool_choice",
			"'tool_choice' \"none\" cannot be expressed for Bedrock models when the conversation contains tool calls or tool results")
	case choice == "none":
		w.out = w.out[:mark] // no tools at all: the model cannot call one
		return nil
	}
	if choice != "" {
		w.out = append(w.out, `,"toolChoice":{"`...)
		w.out = append(w.out, choice...)
		w.out = append(w.out, `":{`...)
		if choice == "tool" {
			w.out = append(w.out, `"name":`...)
			w.out = openai.AppendJSONString(w.out, name)
		}
		w.out = append(w.out, "}}"...)
	}
	w.out = append(w.out, '}')
	return nil
}

// toolChoice returns the Converse toolChoice member for v ("" when v is
// absent, "none" for OpenAI's none) and, for "tool", the tool's name.
func toolChoice(v *fastjson.Value) (choice string, name []byte, err error) {
	if isNull(v) {
		return "", nil, nil
	}
	if s, ok := stringOf(v); ok {
		switch string(s) {
		case "auto":
			return "auto", nil, nil
		case "none":
			return "none", nil, nil
		case "required":
			return "any", nil, nil
		}
		return "", nil, openai.BadRequest("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or an object naming a function; got %q", s)
	}
	if v.Type() != fastjson.TypeObject {
		return "", nil, openai.BadRequest("tool_choice", "'tool_choice' must be a string or an object")
	}
	if typ, _ := stringOf(v.Get("type")); string(typ) != "function" {
		return "", nil, openai.BadRequest("tool_choice.type", "'tool_choice.type' is %q: only \"function\" is supported for Bedrock models", typ)
	}
	name, ok := stringOf(v.Get("function", "name"))
	if !ok || len(name) == 0 {
		return "", nil, openai.BadRequest("tool_choice.function.name", "'tool_choice.function.name' is a required property and must be a non-empty string")
	}
	return "tool", name, nil
}

// tools writes `,"toolConfig":{"tools":[...]` (left open for toolChoice)
// and returns how many tools there are; with none it writes nothing.
func (w *requestWriter) tools(v *fastjson.Value) (int, error) {
	if isNull(v) {
		return 0, nil
	}
	tools, err := v.Array()
	if err != nil {
		return 0, openai.BadRequest("tools", "'tools' must be an array")
	}
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type() != fastjson.TypeObject {
			return 0, openai.BadRequest(at, "'%s' must be an object", at)
		}
		if typ, _ := stringOf(t.Get("type")); string(typ) != "function" {
			return 0, openai.BadRequest(at+".type", "'%s.type' is %q: only \"function\" tools are supported for Bedrock models", at, typ)
		}
		fn := t.Get("function")
		if fn == nil || fn.Type() != fastjson.TypeObject {
			return 0, openai.BadRequest(at+".function", "'%s.function' is a required property and must be an object", at)
		}
		name, ok := stringOf(fn.Get("name"))
		if !ok || len(name) == 0 {
			return 0, openai.BadRequest(at+".function.name", "'%s.function.name' is a required property and must be a non-empty string", at)
		}
		if i == 0 {
			w.out = append(w.out, `,"toolConfig":{"tools":[`...)
		} else {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"toolSpec":{"name":`...)
		w.out = openai.AppendJSONString(w.out, name)
		if d := fn.Get("description"); !isNull(d) {
			desc, ok := stringOf(d)
			if !ok {
				return 0, openai.BadRequest(at+".function.description", "'%s.function.description' must be a string", at)
			}
			if len(desc) > 0 {
				w.out = append(w.out, `,"description":`...)
				w.out = openai.AppendJSONString(w.out, desc)
			}
		}
		w.out = append(w.out, `,"inputSchema":{"json":`...)
		params := fn.Get("parameters")
		switch {
		case isNull(params):
			// OpenAI allows a function without parameters; Converse
			// requires a schema.
			w.out = append(w.out, `{"type":"object","properties":{}}`...)
		case params.Type() == fastjson.TypeObject:
			w.out = appendValue(w.out, params)
		default:
			return 0, openai.BadRequest(at+".function.parameters", "'%s.function.parameters' must be a JSON Schema object", at)
		}
		w.out = append(w.out, '}')
		if strict := fn.Get("strict"); strict != nil && strict.Type() == fastjson.TypeTrue {
			w.out = append(w.out, `,"strict":true`...)
		}
		w.out = append(w.out, "}}"...)
	}
	if len(tools) > 0 {
		w.out = append(w.out, ']')
	}
	return len(tools), nil
}
