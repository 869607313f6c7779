package mcp

import (
	"bytes"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// ToolFilter removes from a tools/list reply the tools a tenant's plan
// does not allow, so a client is not offered tools it may not call
// (tools/call of one is refused anyway). The reply is read with
// jsonscan and only the tools arrays are rewritten, each kept tool's
// bytes as the server sent them: the rest of the message is not
// re-encoded (a re-encoder may write what the server sent otherwise, or
// not as JSON). Its zero value is ready; it is not safe for concurrent
// use.
type ToolFilter struct {
	s     jsonscan.Scanner
	id    []byte    // the expected id, decoded when a string
	kept  []rawSpan // the kept tools of every tools array, in order
	cuts  []toolsCut
	data  []byte
	msg   []byte
	model []byte
}

// rawSpan is a value's bytes in a message: msg[start:end].
type rawSpan struct{ start, end int }

// toolsCut is one tools array to rewrite: msg[start:end], whose kept
// tools are kept[from:to].
type toolsCut struct{ start, end, from, to int }

// Filter appends to dst the JSON-RPC message msg without the tools allow
// refuses, when msg is the response with id (the tools/list request's id
// as sent) listing tools; changed false (and dst as it was) when it is
// another message, is not JSON, or keeps every tool. allow is given each
// tool's name (nil for a tool without a string name); a tool whose name
// is repeated is kept only when every copy is allowed, and every copy of
// result and of its tools is filtered (a client's parser may read any).
func (f *ToolFilter) Filter(dst, msg, id []byte, allow func(tool []byte) bool) (_ []byte, changed bool) {
	return f.filter(dst, msg, id, false, allow)
}

// filter is Filter; anyID takes the response to any request (id unused).
func (f *ToolFilter) filter(dst, msg, id []byte, anyID bool, allow func(tool []byte) bool) (_ []byte, changed bool) {
	f.kept, f.cuts = f.kept[:0], f.cuts[:0]
	if !anyID {
		f.id = decodedID(&f.s, f.id[:0], id)
	}
	matched := anyID
	f.s.MaxDepth = maxJSONDepth
	f.s.Reset(msg)
	err := f.s.Object(func(key []byte) error {
		switch string(key) {
		case "id":
			if anyID {
				return f.s.Skip()
			}
			start := f.s.Offset()
			if err := f.s.Skip(); err != nil {
				return err
			}
			if sameID(msg[start:f.s.Offset()], f.id) {
				matched = true
			}
			return nil
		case "result":
			if f.s.Peek() != '{' {
				return f.s.Skip()
			}
			return f.s.Object(func(key []byte) error {
				if string(key) != "tools" || f.s.Peek() != '[' {
					return f.s.Skip()
				}
				return f.tools(allow)
			})
		}
		return f.s.Skip()
	})
	if err == nil {
		err = f.s.End()
	}
	f.s.Reset(nil)
	if err != nil || !matched || len(f.cuts) == 0 {
		return dst, false
	}
	at := 0
	for _, c := range f.cuts {
		dst = append(append(dst, msg[at:c.start]...), '[')
		for i, k := range f.kept[c.from:c.to] {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, msg[k.start:k.end]...)
		}
		dst = append(dst, ']')
		at = c.end
	}
	return append(dst, msg[at:]...), true
}

// tools reads the tools array at the cursor, noting which tools allow
// keeps and, when it drops one, the array's cut.
func (f *ToolFilter) tools(allow func([]byte) bool) error {
	c := toolsCut{start: f.s.Offset(), from: len(f.kept)}
	dropped := false
	err := f.s.Array(func(int) error {
		f.s.Peek()
		start := f.s.Offset()
		keep, named := true, false
		var err error
		if f.s.Peek() == '{' {
			err = f.s.Object(func(key []byte) error {
				if string(key) != "name" {
					return f.s.Skip()
				}
				named = true
				if f.s.Peek() != '"' {
					keep = keep && allow(nil)
					return f.s.Skip()
				}
				name, err := f.s.Str()
				keep = keep && err == nil && allow(name)
				return err
			})
		} else {
			err = f.s.Skip()
		}
		if err != nil {
			return err
		}
		if !named {
			keep = allow(nil)
		}
		if keep {
			f.kept = append(f.kept, rawSpan{start, f.s.Offset()})
		} else {
			dropped = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	if dropped {
		c.end, c.to = f.s.Offset(), len(f.kept)
		f.cuts = append(f.cuts, c)
	} else {
		f.kept = f.kept[:c.from]
	}
	return nil
}

// decodedID appends to dst a JSON-RPC id as sameID compares it: a
// string's decoded bytes after a '"', a number's text.
func decodedID(s *jsonscan.Scanner, dst, id []byte) []byte {
	if len(id) == 0 || id[0] != '"' {
		return append(dst, id...)
	}
	s.Reset(id)
	b, err := s.Str()
	dst = append(append(dst, '"'), b...)
	s.Reset(nil)
	if err != nil {
		return append(dst[:0], id...) // compared as bytes
	}
	return dst
}

// sameID reports whether raw, an id as a message has it, is want
// (decodedID's form): strings by their decoded bytes (one server may
// escape what the client did not), numbers by their text. It reads raw
// with a scanner of its own (the caller's is walking the message).
func sameID(raw, want []byte) bool {
	if len(raw) == 0 || raw[0] != '"' {
		return bytes.Equal(raw, want)
	}
	var inner jsonscan.Scanner
	inner.Reset(raw)
	b, err := inner.Str()
	return err == nil && len(want) > 0 && want[0] == '"' && bytes.Equal(b, want[1:])
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
