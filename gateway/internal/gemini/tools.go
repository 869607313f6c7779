package gemini

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// toolFields writes tools (one functionDeclarations tool) and toolConfig.
func (w *requestWriter) toolFields(f *chatFields) error {
	n, err := w.tools(f.tools)
	if err != nil {
		return err
	}
	mode, name, err := toolChoice(f.toolChoice)
	if err != nil {
		return err
	}
	if mode == "" {
		return nil
	}
	if n == 0 {
		if mode == "ANY" {
			return openai.BadRequest("tool_choice", "'tool_choice' requires 'tools'")
		}
		return nil // auto or none without tools: nothing to say
	}
	w.out = append(w.out, `,"toolConfig":{"functionCallingConfig":{"mode":"`...)
	w.out = append(w.out, mode...)
	w.out = append(w.out, '"')
	if name != nil {
		w.out = append(w.out, `,"allowedFunctionNames":[`...)
		w.out = openai.AppendJSONString(w.out, name)
		w.out = append(w.out, ']')
	}
	w.out = append(w.out, "}}"...)
	return nil
}

// toolChoice returns the functionCallingConfig mode for v ("" when v is
// absent) and, for a named function, its name.
func toolChoice(v *fastjson.Value) (mode string, name []byte, err error) {
	if isNull(v) {
		return "", nil, nil
	}
	if s, ok := stringOf(v); ok {
		switch string(s) {
		case "auto":
			return "AUTO", nil, nil
		case "none":
			return "NONE", nil, nil
		case "required":
			return "ANY", nil, nil
		}
		return "", nil, openai.BadRequest("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or an object naming a function; got %q", s)
	}
	if v.Type() != fastjson.TypeObject {
		return "", nil, openai.BadRequest("tool_choice", "'tool_choice' must be a string or an object")
	}
	if typ, _ := stringOf(v.Get("type")); string(typ) != "function" {
		return "", nil, openai.BadRequest("tool_choice.type", "'tool_choice.type' is %q: only \"function\" is supported for Gemini models", typ)
	}
	name, ok := stringOf(v.Get("function", "name"))
	if !ok || len(name) == 0 {
		return "", nil, openai.BadRequest("tool_choice.function.name", "'tool_choice.function.name' is a required property and must be a non-empty string")
	}
	return "ANY", name, nil
}

// tools writes the function tools as one Gemini tool of
// functionDeclarations and returns how many there are.
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
			return 0, openai.BadRequest(at+".type", "'%s.type' is %q: only \"function\" tools are supported for Gemini models", at, typ)
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
			w.out = append(w.out, `,"tools":[{"functionDeclarations":[`...)
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
		params := fn.Get("parameters")
		switch {
		case isNull(params) || noProperties(params):
			// Gemini rejects an OBJECT schema without properties; a
			// function without parameters has none.
		case params.Type() == fastjson.TypeObject:
			w.out = append(w.out, `,"parameters":`...)
			if w.out, err = appendSchema(w.out, params, at+".function.parameters"); err != nil {
				return 0, err
			}
		default:
			return 0, openai.BadRequest(at+".function.parameters", "'%s.function.parameters' must be a JSON Schema object", at)
		}
		w.out = append(w.out, '}')
	}
	if len(tools) > 0 {
		w.out = append(w.out, "]}]"...)
	}
	return len(tools), nil
}

// noProperties reports an object schema that declares no properties
// ({"type":"object"} or with "properties":{}).
func noProperties(params *fastjson.Value) bool {
	if params.Type() != fastjson.TypeObject {
		return false
	}
	if typ, _ := stringOf(params.Get("type")); string(typ) != "object" {
		return false
	}
	p := params.Get("properties")
	if p == nil {
		return params.Get("anyOf") == nil
	}
	o, err := p.Object()
	return err == nil && o.Len() == 0
}
