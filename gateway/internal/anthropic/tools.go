package anthropic

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// toolFields writes tools and tool_choice (with parallel_tool_calls folded
// into tool_choice.disable_parallel_tool_use).
func (w *requestWriter) toolFields(f *chatFields) error {
	n, err := w.tools(f.tools)
	if err != nil {
		return err
	}
	parallel := true
	if !isNull(f.parallelToolCalls) {
		switch f.parallelToolCalls.Type() {
		case fastjson.TypeTrue:
		case fastjson.TypeFalse:
			parallel = false
		default:
			return openai.BadRequest("parallel_tool_calls", "'parallel_tool_calls' must be a boolean")
		}
	}
	choice, name, err := toolChoice(f.toolChoice)
	if err != nil {
		return err
	}
	if n == 0 {
		// Without tools only a choice that needs none makes sense, and
		// Anthropic takes no tool_choice at all.
		if choice == "any" || choice == "tool" {
			return openai.BadRequest("tool_choice", "'tool_choice' requires 'tools'")
		}
		return nil
	}
	if choice == "" {
		if parallel {
			return nil
		}
		choice = "auto"
	}
	w.out = append(w.out, `,"tool_choice":{"type":"`...)
	w.out = append(w.out, choice...)
	w.out = append(w.out, '"')
	if choice == "tool" {
		w.out = append(w.out, `,"name":`...)
		w.out = openai.AppendJSONString(w.out, name)
	}
	if !parallel && choice != "none" {
		w.out = append(w.out, `,"disable_parallel_tool_use":true`...)
	}
	w.out = append(w.out, '}')
	return nil
}

// toolChoice returns the Anthropic tool_choice type for v ("" when v is
// absent) and, for "tool", the tool's name.
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
		return "", nil, openai.BadRequest("tool_choice.type", "'tool_choice.type' is %q: only \"function\" is supported for Anthropic models", typ)
	}
	name, ok := stringOf(v.Get("function", "name"))
	if !ok || len(name) == 0 {
		return "", nil, openai.BadRequest("tool_choice.function.name", "'tool_choice.function.name' is a required property and must be a non-empty string")
	}
	return "tool", name, nil
}

// tools writes the function tools as Anthropic tools and returns how many
// there are.
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
			return 0, openai.BadRequest(at+".type", "'%s.type' is %q: only \"function\" tools are supported for Anthropic models", at, typ)
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
			w.out = append(w.out, `,"tools":[`...)
		} else {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"name":`...)
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
		w.out = append(w.out, `,"input_schema":`...)
		params := fn.Get("parameters")
		switch {
		case isNull(params):
			// OpenAI allows a function without parameters; Anthropic
			// requires a schema.
			w.out = append(w.out, `{"type":"object","properties":{}}`...)
		case params.Type() == fastjson.TypeObject:
			w.out = appendValue(w.out, params)
		default:
			return 0, openai.BadRequest(at+".function.parameters", "'%s.function.parameters' must be a JSON Schema object", at)
		}
		w.out = append(w.out, '}')
	}
	if len(tools) > 0 {
		w.out = append(w.out, ']')
	}
	return len(tools), nil
}
