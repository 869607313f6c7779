package mcp

import (
	"bytes"

	"github.com/valyala/fastjson"
)

// ToolFilter removes from a tools/list reply the tools a tenant's plan
// does not allow, so a client is not offered tools it may not call
// (tools/call of one is refused anyway). Its zero value is ready; it is
// not safe for concurrent use.
type ToolFilter struct {
	p     fastjson.Parser
	id    []byte
	data  []byte
	msg   []byte
	model []byte
}

// Filter appends to dst the JSON-RPC message msg without the tools allow
// refuses, when msg is the response with id (the tools/list request's id
// as sent) listing tools; changed false (and dst as it was) when it is
// another message, is not JSON, or keeps every tool. allow is given each
// tool's name.
func (f *ToolFilter) Filter(dst, msg, id []byte, allow func(tool []byte) bool) (_ []byte, changed bool) {
	return f.filter(dst, msg, id, false, allow)
}

// filter is Filter; anyID takes the response to any request (id unused).
func (f *ToolFilter) filter(dst, msg, id []byte, anyID bool, allow func(tool []byte) bool) (_ []byte, changed bool) {
	v, err := f.p.ParseBytes(msg)
	if err != nil {
		return dst, false
	}
	got := v.Get("id")
	if got == nil {
		return dst, false
	}
	if f.id = got.MarshalTo(f.id[:0]); !anyID && !bytes.Equal(f.id, id) {
		return dst, false
	}
	tools := v.Get("result", "tools")
	if tools == nil || tools.Type() != fastjson.TypeArray {
		return dst, false
	}
	list, _ := tools.Array()
	kept := list[:0] // fastjson's own slice: rewritten in place
	for _, t := range list {
		if allow(t.GetStringBytes("name")) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(list) {
		return dst, false
	}
	arr := fastjson.Arena{}
	out := arr.NewArray()
	for i, t := range kept {
		out.SetArrayItem(i, t)
	}
	v.Get("result").Set("tools", out)
	return v.MarshalTo(dst), true
}

// AllowTool returns the allow function of Filter for a tenant's plan
// patterns on server's tools: mcp:SERVER/TOOL must be Allowed.
func (f *ToolFilter) AllowTool(server string, patterns []string) func([]byte) bool {
	return func(tool []byte) bool {
		f.model = AppendModel(f.model[:0], server, tool)
		return Allowed(patterns, string(f.model))
	}
}

// FilterEvent is Filter for one server-sent event: ev is the event's
// lines, up to and including the blank line that ends it (CutEvent). When
// its data is the tools/list response, the event is appended to dst with
// its data lines replaced by one line of the filtered message, its other
// lines (event, id, retry, comments) kept in place.
func (f *ToolFilter) FilterEvent(dst, ev, id []byte, allow func([]byte) bool) (_ []byte, changed bool) {
	return f.filterEvent(dst, ev, id, false, allow)
}

// FilterStreamEvent is FilterEvent for the older HTTP+SSE transport
// (MCP 2024-11-05), whose one GET stream carries the replies to every
// request a client POSTs: any response whose result.tools is an array
// is filtered, whatever its id (the gateway does not see which POST was
// a tools/list, nor keeps state across the POSTs and the stream).
func (f *ToolFilter) FilterStreamEvent(dst, ev []byte, allow func([]byte) bool) (_ []byte, changed bool) {
	return f.filterEvent(dst, ev, nil, true, allow)
}

func (f *ToolFilter) filterEvent(dst, ev, id []byte, anyID bool, allow func([]byte) bool) (_ []byte, changed bool) {
	if f.data = EventData(f.data[:0], ev); len(f.data) == 0 {
		return dst, false
	}
	start := len(dst)
	dst, changed = f.filter(dst, f.data, id, anyID, allow)
	if !changed {
		return dst, false
	}
	f.msg = append(f.msg[:0], dst[start:]...) // dst is rebuilt around it below
	return AppendEvent(dst[:start], ev, f.msg), true
}

// EventData appends to dst the data of the server-sent event ev (its
// lines up to and including the blank line that ends it, CutEvent): its
// data fields joined by LF.
func EventData(dst, ev []byte) []byte {
	first := true
	for rest := ev; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		if d, ok := dataField(line); ok {
			if !first {
				dst = append(dst, '\n')
			}
			dst, first = append(dst, d...), false
		}
	}
	return dst
}

// AppendEvent appends to dst the event ev with its data lines replaced by
// msg, its other lines (event, id, retry, comments) kept in place. msg is
// JSON: a line break in it (CR, LF or CRLF) lies between tokens, and
// starts a data line of its own.
func AppendEvent(dst, ev, msg []byte) []byte {
	wrote := false
	for rest := ev; len(rest) > 0; {
		n := len(rest)
		var line []byte
		line, rest = cutLine(rest)
		if _, ok := dataField(line); ok {
			if !wrote {
				dst = appendData(dst, msg)
				wrote = true
			}
			continue
		}
		dst = append(dst, ev[len(ev)-n:len(ev)-len(rest)]...)
	}
	return dst
}

// appendData appends msg as the data lines of an event.
func appendData(dst, msg []byte) []byte {
	for {
		i := bytes.IndexAny(msg, "\r\n")
		if i < 0 {
			return append(append(append(dst, "data: "...), msg...), '\n')
		}
		dst = append(append(append(dst, "data: "...), msg[:i]...), '\n')
		if msg[i] == '\r' && i+1 < len(msg) && msg[i+1] == '\n' {
			i++
		}
		msg = msg[i+1:]
	}
}

// cutLine cuts the first line off b: the line without its end (LF or
// CRLF) and what follows it.
func cutLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	return bytes.TrimSuffix(line, []byte("\r")), rest
}

// dataField is the value of a "data" field line (one leading space
// dropped, as the SSE spec reads it; a line of the name alone is the
// field with an empty value).
func dataField(line []byte) ([]byte, bool) { return field(line, "data") }

// field is the value of the line's field name, as dataField reads it.
func field(line []byte, name string) ([]byte, bool) {
	d, ok := bytes.CutPrefix(line, []byte(name))
	if !ok || (len(d) > 0 && d[0] != ':') {
		return nil, false
	}
	if len(d) == 0 {
		return d, true
	}
	d = d[1:]
	return bytes.TrimPrefix(d, []byte(" ")), true
}

// CutEvent cuts the first complete server-sent event off b: its lines up
// to and including the blank line ending it (LF or CRLF line ends), and
// what follows. ok false: b holds no complete event yet.
func CutEvent(b []byte) (ev, rest []byte, ok bool) {
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return nil, b, false
		}
		line := b[i : i+j]
		i += j + 1
		if len(line) == 0 || (len(line) == 1 && line[0] == '\r') {
			return b[:i], b[i:], true
		}
	}
	return nil, b, false
}
