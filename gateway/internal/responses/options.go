package responses

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// copied are the members that mean the same in both APIs and pass as they
// are (chat name, Responses name).
var copied = [][2]string{
	{"temperature", "temperature"},
	{"top_p", "top_p"},
	{"parallel_tool_calls", "parallel_tool_calls"},
	{"user", "user"},
	{"max_tokens", "max_output_tokens"},
}

// options writes the sampling, stream and format members.
func (w *chatWriter) options(root *fastjson.Value) error {
	for _, c := range copied {
		if v := root.Get(c[1]); !isNull(v) {
			w.dst = appendKey(w.dst, c[0])
			w.dst = appendValue(w.dst, v)
		}
	}
	if v := root.Get("stream"); v != nil && v.Type() == fastjson.TypeTrue {
		w.dst = append(w.dst, `,"stream":true,"stream_options":{"include_usage":true}`...)
	}
	if e, ok := stringOf(root.Get("reasoning", "effort")); ok {
		w.dst = appendKey(w.dst, "reasoning_effort")
		w.dst = openai.AppendJSONString(w.dst, e)
	}
	return w.format(root.Get("text", "format"))
}

// format writes text.format as response_format.
func (w *chatWriter) format(f *fastjson.Value) error {
	if isNull(f) {
		return nil
	}
	switch t := string(str(f.Get("type"))); t {
	case "text":
		return nil
	case "json_object":
		w.dst = append(w.dst, `,"response_format":{"type":"json_object"}`...)
		return nil
	case "json_schema":
		name, _ := stringOf(f.Get("name"))
		schema := f.Get("schema")
		if len(name) == 0 || schema == nil || schema.Type() != fastjson.TypeObject {
			return openai.BadRequest("text.format", "Invalid 'text.format': a json_schema format needs a 'name' and a 'schema' object.")
		}
		w.dst = append(w.dst, `,"response_format":{"type":"json_schema","json_schema":{"name":`...)
		w.dst = openai.AppendJSONString(w.dst, name)
		w.dst = append(w.dst, `,"schema":`...)
		w.dst = appendValue(w.dst, schema)
		for _, k := range []string{"description", "strict"} {
			if v := f.Get(k); !isNull(v) {
				w.dst = appendKey(w.dst, k)
				w.dst = appendValue(w.dst, v)
			}
		}
		w.dst = append(w.dst, `}}`...)
		return nil
	default:
		return refused("text.format.type", fmt.Sprintf("output format %q cannot be asked of it", t))
	}
}

// tools writes tools of type function and tool_choice.
func (w *chatWriter) tools(root *fastjson.Value) error {
	tools := root.Get("tools")
	n := 0
	if !isNull(tools) {
		arr, err := tools.Array()
		if err != nil {
			return openai.BadRequest("tools", "Invalid type for 'tools': expected an array.")
		}
		n = len(arr)
		if n > 0 {
			w.dst = append(w.dst, `,"tools":[`...)
		}
		for i, t := range arr {
			if err := w.tool(i, t); err != nil {
				return err
			}
		}
		if n > 0 {
			w.dst = append(w.dst, ']')
		}
	}
	return w.toolChoice(root.Get("tool_choice"), n)
}

// tool writes one function tool.
func (w *chatWriter) tool(i int, t *fastjson.Value) error {
	if typ := str(t.Get("type")); string(typ) != "function" {
		return refused(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("built-in tools (%q) run only on an upstream with the Responses API; only tools of type \"function\" can be sent to it", typ))
	}
	name, ok := stringOf(t.Get("name"))
	if !ok || len(name) == 0 {
		return openai.BadRequest(fmt.Sprintf("tools[%d].name", i), "Missing required parameter: 'tools[%d].name'.", i)
	}
	if i > 0 {
		w.dst = append(w.dst, ',')
	}
	w.dst = append(w.dst, `{"type":"function","function":{"name":`...)
	w.dst = openai.AppendJSONString(w.dst, name)
	for _, k := range []string{"description", "parameters", "strict"} {
		if v := t.Get(k); !isNull(v) {
			w.dst = appendKey(w.dst, k)
			w.dst = appendValue(w.dst, v)
		}
	}
	w.dst = append(w.dst, `}}`...)
	return nil
}

// toolChoice writes tool_choice; tools is the number of tools.
func (w *chatWriter) toolChoice(c *fastjson.Value, tools int) error {
	if isNull(c) {
		return nil
	}
	if s, ok := stringOf(c); ok {
		switch string(s) {
		case "auto", "none", "required":
			w.dst = append(w.dst, `,"tool_choice":`...)
			w.dst = openai.AppendJSONString(w.dst, s)
			return nil
		}
		return openai.BadRequest("tool_choice", "Invalid value for 'tool_choice': expected auto, none, required or a function.")
	}
	if typ := str(c.Get("type")); string(typ) != "function" {
		return refused("tool_choice.type", fmt.Sprintf("a tool choice of type %q names a built-in tool", typ))
	}
	name, ok := stringOf(c.Get("name"))
	if !ok || len(name) == 0 || tools == 0 {
		return openai.BadRequest("tool_choice", "Invalid 'tool_choice': a function choice needs a 'name' and 'tools'.")
	}
	w.dst = append(w.dst, `,"tool_choice":{"type":"function","function":{"name":`...)
	w.dst = openai.AppendJSONString(w.dst, name)
	w.dst = append(w.dst, `}}`...)
	return nil
}
