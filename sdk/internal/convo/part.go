package convo

// partInfo is what a content part's first pass learns.
type partInfo struct {
	typ     [16]byte // the last "type" string, when it fits
	typLen  int      // -1: absent, not a string, or longer than typ
	name    span     // "name" (tool_use)
	toolUse span     // "tool_use_id" (tool_result)
	input   [2]int   // the raw JSON of "input" (tool_use); input[0] < 0 when absent
	start   int      // where the part's object starts
	end     int      // and where it ends
}

// is reports whether the part's type is t.
func (p *partInfo) is(t string) bool {
	return p.typLen == len(t) && string(p.typ[:p.typLen]) == t
}

// partScalars reads the scalars of the part object at the cursor and
// leaves the cursor at the object's start, for a second pass (or a Seek to
// end).
func (e *encoder) partScalars() (partInfo, error) {
	p := partInfo{typLen: -1, name: none, toolUse: none, input: [2]int{-1, -1}, start: e.s.Offset()}
	err := e.s.Object(func(key []byte) error {
		switch string(key) {
		case "type":
			if e.s.Peek() != '"' {
				p.typLen = -1
				return e.s.Skip()
			}
			b, err := e.s.Str()
			p.typLen = -1
			if len(b) <= len(p.typ) {
				p.typLen = copy(p.typ[:], b)
			}
			return err
		case "name":
			sp, err := e.stringSpan()
			if sp != none {
				p.name = sp
			}
			return err
		case "tool_use_id":
			sp, err := e.stringSpan()
			if sp != none {
				p.toolUse = sp
			}
			return err
		case "input":
			e.s.Peek()
			from := e.s.Offset()
			err := e.s.Skip()
			p.input = [2]int{from, e.s.Offset()}
			return err
		}
		return e.s.Skip()
	})
	p.end = e.s.Offset()
	e.s.Seek(p.start)
	return p, err
}

// part reads one part of a message's content array.
func (e *encoder) part(m *message) error {
	p, err := e.partScalars()
	if err != nil {
		return err
	}
	switch {
	case p.is("text"), p.is("input_text"), p.is("output_text"):
		// Every copy of "text" is a part of its own.
		return e.s.Object(func(key []byte) error {
			if string(key) != "text" || e.s.Peek() != '"' {
				return e.s.Skip()
			}
			return e.text(m)
		})
	case p.is("tool_use"):
		e.s.Seek(p.end)
		start := e.begin()
		rn, err := e.role(m)
		if err != nil {
			return err
		}
		nn, err := e.str(p.name)
		if err != nil {
			e.dst = e.dst[:start]
			return err
		}
		if p.input[0] >= 0 {
			e.dst = append(e.dst, e.body[p.input[0]:p.input[1]]...)
		}
		e.lits = 2 // raw JSON, not one string: not rewritable
		e.finish(start, KindToolCall, rn, nn)
		return nil
	case p.is("tool_result"):
		start := e.begin()
		rn := e.lit("tool")
		nn, err := e.str(p.toolUse)
		if err == nil {
			err = e.s.Object(func(key []byte) error {
				if string(key) != "content" {
					return e.s.Skip()
				}
				return e.resultText()
			})
		}
		if err != nil {
			e.dst = e.dst[:start]
			return err
		}
		e.finish(start, KindToolResult, rn, nn)
		return nil
	}
	e.s.Seek(p.end)
	return nil
}
