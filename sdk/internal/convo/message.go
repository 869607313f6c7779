package convo

// message is what a message's first pass learns: the scalars its records
// need, which may come after its content.
type message struct {
	role       span
	fixedRole  string // the role when there is no "role" member (system)
	toolCallID span
	isTool     bool // role is "tool": its content is one tool_result

	// A Responses input item's: its "type", and a function call's
	// "call_id", "name" and "arguments".
	typ, callID, name, args span
}

// message reads the message object at the cursor: a first pass for its
// role and tool_call_id, a second for its content and tool calls. item:
// it is an element of "input", where a Responses function_call or
// function_call_output item is a tool call or a tool result.
func (e *encoder) message(item bool) error {
	start := e.s.Offset()
	m := message{role: none, toolCallID: none, typ: none, callID: none, name: none, args: none}
	err := e.s.Object(func(key []byte) error {
		var slot *span
		switch string(key) {
		case "role":
			slot = &m.role
		case "tool_call_id":
			slot = &m.toolCallID
		case "type":
			slot = &m.typ
		case "call_id":
			slot = &m.callID
		case "name":
			slot = &m.name
		case "arguments":
			slot = &m.args
		default:
			return e.s.Skip()
		}
		if !item && slot != &m.role && slot != &m.toolCallID {
			return e.s.Skip()
		}
		sp, err := e.stringSpan()
		if sp != none {
			*slot = sp
		}
		return err
	})
	if err != nil {
		return err
	}
	if item && m.typ != none {
		if done, err := e.functionItem(&m, start); done {
			e.index++
			return err
		}
	}
	if m.role != none {
		mark := len(e.dst)
		if _, err := e.str(m.role); err != nil {
			return err
		}
		m.isTool = string(e.dst[mark:]) == "tool"
		e.dst = e.dst[:mark]
	}
	end := e.s.Offset()
	e.s.Seek(start)
	if m.isTool {
		err = e.toolMessage(&m)
	} else {
		err = e.s.Object(func(key []byte) error {
			switch string(key) {
			case "content":
				return e.content(&m)
			case "tool_calls":
				return e.toolCalls(&m)
			}
			return e.s.Skip()
		})
	}
	e.s.Seek(end)
	e.index++
	return err
}

// role appends the message's role to the record being written.
func (e *encoder) role(m *message) (int, error) {
	if m.role == none {
		return e.lit(m.fixedRole), nil
	}
	return e.str(m.role)
}

// text writes the string at the cursor as a text part of m.
func (e *encoder) text(m *message) error {
	start := e.begin()
	n, err := e.role(m)
	if err != nil {
		return err
	}
	if err := e.textAtCursor(); err != nil {
		e.dst = e.dst[:start]
		return err
	}
	e.finish(start, KindText, n, 0)
	return nil
}

// content reads a message's content: a string is a text part, an array
// holds parts; other values have none.
func (e *encoder) content(m *message) error {
	switch e.s.Peek() {
	case '"':
		return e.text(m)
	case '[':
		return e.s.Array(func(int) error {
			if e.s.Peek() != '{' {
				return e.s.Skip()
			}
			return e.part(m)
		})
	}
	return e.s.Skip()
}

// toolMessage reads an OpenAI role "tool" message: its content, every
// copy, is one tool_result record named by tool_call_id.
func (e *encoder) toolMessage(m *message) error {
	start := e.begin()
	rn, err := e.role(m)
	if err != nil {
		return err
	}
	nn, err := e.str(m.toolCallID)
	if err != nil {
		return err
	}
	found := false
	err = e.s.Object(func(key []byte) error {
		if string(key) != "content" {
			return e.s.Skip()
		}
		switch e.s.Peek() {
		case '"', '[':
			found = true
		}
		return e.resultText()
	})
	if err != nil || !found {
		e.dst = e.dst[:start]
		return err
	}
	e.finish(start, KindToolResult, rn, nn)
	return nil
}

// resultText appends a tool result's text: a string, or the text of the
// text blocks of an array (text, input_text and output_text), with no
// separator.
func (e *encoder) resultText() error {
	switch e.s.Peek() {
	case '"':
		return e.textAtCursor()
	case '[':
		return e.s.Array(func(int) error {
			if e.s.Peek() != '{' {
				return e.s.Skip()
			}
			p, err := e.partScalars()
			if err != nil {
				return err
			}
			if !p.is("text") && !p.is("input_text") && !p.is("output_text") {
				e.s.Seek(p.end)
				return nil
			}
			return e.s.Object(func(key []byte) error {
				if string(key) != "text" || e.s.Peek() != '"' {
					return e.s.Skip()
				}
				return e.textAtCursor()
			})
		})
	}
	return e.s.Skip()
}

// toolCalls reads OpenAI tool_calls: each call is a tool_call record, NAME
// function.name, TEXT function.arguments.
func (e *encoder) toolCalls(m *message) error {
	if e.s.Peek() != '[' {
		return e.s.Skip()
	}
	return e.s.Array(func(int) error {
		if e.s.Peek() != '{' {
			return e.s.Skip()
		}
		name, args := none, none
		err := e.s.Object(func(key []byte) error {
			if string(key) != "function" || e.s.Peek() != '{' {
				return e.s.Skip()
			}
			return e.s.Object(func(key []byte) error {
				var sp span
				var err error
				switch string(key) {
				case "name":
					if sp, err = e.stringSpan(); sp != none {
						name = sp
					}
				case "arguments":
					if sp, err = e.stringSpan(); sp != none {
						args = sp
					}
				default:
					err = e.s.Skip()
				}
				return err
			})
		})
		if err != nil {
			return err
		}
		return e.record(KindToolCall, m, name, args)
	})
}

// record writes a record of the message's role whose name and text are
// the strings at two spans.
func (e *encoder) record(kind string, m *message, name, text span) error {
	start := e.begin()
	rn, err := e.role(m)
	if err != nil {
		return err
	}
	nn, err := e.str(name)
	if err == nil {
		_, err = e.textStr(text)
	}
	if err != nil {
		e.dst = e.dst[:start]
		return err
	}
	e.finish(start, kind, rn, nn)
	return nil
}

// functionItem writes a Responses function_call item (a tool_call record,
// role assistant) or function_call_output item (a tool_result record,
// role tool, named by call_id, its every "output" read as a tool result's
// content) starting at start; done is false for other item types.
func (e *encoder) functionItem(m *message, start int) (done bool, err error) {
	mark := len(e.dst)
	if _, err := e.str(m.typ); err != nil {
		e.dst = e.dst[:mark]
		return true, err
	}
	typ := string(e.dst[mark:])
	e.dst = e.dst[:mark]
	switch typ {
	case "function_call":
		return true, e.record(KindToolCall, &message{role: none, fixedRole: "assistant"}, m.name, m.args)
	case "function_call_output":
	default:
		return false, nil
	}
	end := e.s.Offset()
	e.s.Seek(start)
	e.begin()
	rn := e.lit("tool")
	nn, err := e.str(m.callID)
	found := false
	if err == nil {
		err = e.s.Object(func(key []byte) error {
			if string(key) != "output" {
				return e.s.Skip()
			}
			switch e.s.Peek() {
			case '"', '[':
				found = true
			}
			return e.resultText()
		})
	}
	e.s.Seek(end)
	if err != nil || !found {
		e.dst = e.dst[:mark]
		return true, err
	}
	e.finish(mark, KindToolResult, rn, nn)
	return true, nil
}
