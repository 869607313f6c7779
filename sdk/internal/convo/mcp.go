package convo

import "strconv"

// AppendMCP appends the request_messages encoding of body, one JSON-RPC
// message of the MCP endpoint, to dst and returns it. A tools/call gives
// one tool_call record (NAME params.name, TEXT params.arguments as raw
// JSON), then one text record per JSON string inside the arguments, at any
// depth and in document order, NAME its JSON Pointer (RFC 6901) in the
// arguments: each is one string literal of the body, so a guard that reads
// and rewrites prompts reads and rewrites the call's arguments. All
// records are message 0, role assistant (the caller is a model's agent).
// Any other method gives no records.
//
// Repeated keys follow Append's rule, read so that a guard sees what a
// parser keeping the first copy and one keeping the last would act on:
// the body is a tools/call when any copy of "method" is; every copy of
// "params" and of its "arguments" is read (each copy of "arguments" a
// tool_call record of its own, followed by its strings); "name", a
// scalar that names, is the last copy of the params object it is in. A
// params object without "arguments" gives a tool_call record with an
// empty TEXT.
func AppendMCP(dst, body []byte) []byte {
	dst, _ = appendMCPRecords(dst, body, nil, false)
	return dst
}

// AppendMCPSpans is AppendMCP that also appends to spans, for each record
// in order, where its TEXT lies in body (see TextSpan): a text record's
// is its string literal, a tool_call record's none (raw JSON).
func AppendMCPSpans(dst, body []byte, spans []TextSpan) ([]byte, []TextSpan) {
	return appendMCPRecords(dst, body, spans, true)
}

func appendMCPRecords(dst, body []byte, spans []TextSpan, track bool) ([]byte, []TextSpan) {
	e := encoders.Get().(*encoder)
	e.dst, e.body, e.index = dst, body, 0
	e.spans, e.track = spans, track
	e.s.MaxDepth = maxDepth
	e.s.Reset(body)
	dst = e.appendMCP()
	spans = e.spans
	e.dst, e.body, e.spans, e.ptr = nil, nil, nil, e.ptr[:0]
	e.s.Reset(nil)
	encoders.Put(e)
	return dst, spans
}

// toolsCall is the method whose arguments are read.
const toolsCall = "tools/call"

// mcpRole is the ROLE of an MCP tool call's records.
const mcpRole = "assistant"

func (e *encoder) appendMCP() []byte {
	if e.s.Peek() != '{' {
		return e.dst
	}
	start := e.s.Offset()
	// "method" may follow "params": a first pass decides.
	call := false
	err := e.s.Object(func(key []byte) error {
		if string(key) != "method" || e.s.Peek() != '"' {
			return e.s.Skip()
		}
		b, err := e.s.Str()
		if string(b) == toolsCall {
			call = true
		}
		return err
	})
	if !call || err != nil {
		// A body that cannot be read whole is not read as a call at
		// all: its method may lie after the error.
		return e.dst
	}
	e.s.Reset(e.body)
	e.s.Seek(start)
	_ = e.s.Object(func(key []byte) error {
		if string(key) != "params" || e.s.Peek() != '{' {
			return e.s.Skip()
		}
		return e.mcpParams()
	})
	return e.dst
}

// mcpParams reads one params object of a tools/call: a first pass for its
// name, a second for its arguments.
func (e *encoder) mcpParams() error {
	start := e.s.Offset()
	name, args := none, false
	err := e.s.Object(func(key []byte) error {
		switch string(key) {
		case "name":
			sp, err := e.stringSpan()
			if sp != none {
				name = sp
			}
			return err
		case "arguments":
			args = true
		}
		return e.s.Skip()
	})
	if err != nil {
		return err
	}
	if !args {
		return e.mcpCall(name, -1, -1)
	}
	end := e.s.Offset()
	e.s.Seek(start)
	err = e.s.Object(func(key []byte) error {
		if string(key) != "arguments" {
			return e.s.Skip()
		}
		e.s.Peek()
		from := e.s.Offset()
		if err := e.s.Skip(); err != nil {
			return err
		}
		to := e.s.Offset()
		if err := e.mcpCall(name, from, to); err != nil {
			return err
		}
		e.s.Seek(from)
		e.ptr = e.ptr[:0]
		return e.mcpStrings()
	})
	e.s.Seek(end)
	return err
}

// mcpCall writes the tool_call record named by the string at name whose
// TEXT is body[from:to] (empty when from < 0).
func (e *encoder) mcpCall(name span, from, to int) error {
	start := e.begin()
	rn := e.lit(mcpRole)
	nn, err := e.str(name)
	if err != nil {
		e.dst = e.dst[:start]
		return err
	}
	if from >= 0 {
		e.dst = append(e.dst, e.body[from:to]...)
	}
	e.lits = 2 // raw JSON, not one string: not rewritable
	e.finish(start, KindToolCall, rn, nn)
	return nil
}

// mcpStrings writes a text record for each string of the value at the
// cursor, NAME its JSON Pointer: e.ptr, the pointer of the value.
func (e *encoder) mcpStrings() error {
	switch e.s.Peek() {
	case '"':
		start := e.begin()
		rn := e.lit(mcpRole)
		e.dst = append(e.dst, e.ptr...)
		if err := e.textAtCursor(); err != nil {
			e.dst = e.dst[:start]
			return err
		}
		e.finish(start, KindText, rn, len(e.ptr))
		return nil
	case '{':
		mark := len(e.ptr)
		return e.s.Object(func(key []byte) error {
			e.ptr = appendPointerToken(append(e.ptr[:mark], '/'), key)
			return e.mcpStrings()
		})
	case '[':
		mark := len(e.ptr)
		return e.s.Array(func(i int) error {
			e.ptr = strconv.AppendInt(append(e.ptr[:mark], '/'), int64(i), 10)
			return e.mcpStrings()
		})
	}
	return e.s.Skip()
}

// appendPointerToken appends key as a JSON Pointer reference token: "~"
// as "~0" and "/" as "~1" (RFC 6901, section 3).
func appendPointerToken(dst, key []byte) []byte {
	for _, c := range key {
		switch c {
		case '~':
			dst = append(dst, '~', '0')
		case '/':
			dst = append(dst, '~', '1')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
