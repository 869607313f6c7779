// Package convo encodes a request body's conversation as the plugin ABI's
// request_messages value (sdk/ABI.md, "Request messages"): one record per
// part of each message, in order,
//
//	INDEX SP KIND SP ROLE_LEN SP NAME_LEN SP TEXT_LEN LF ROLE NAME TEXT LF
//
// so that a guard reads the texts of a chat, completions, embeddings or
// Anthropic Messages request without a JSON parser of its own.
//
// What is read, by top-level key (every copy of a duplicated key, in the
// order the body gives them, as a guard must: a parser that keeps the
// first copy and one that keeps the last disagree on what was sent):
//
//   - "system" (Anthropic): message 0 and the ones before the others
//     wherever it stands, role system; a string or text blocks. So is a
//     string "instructions" (OpenAI's Responses API).
//   - "messages": each object is a message. Its "content" (a string, or an
//     array of parts: "text" parts, and Anthropic "tool_use" and
//     "tool_result" blocks), its "tool_calls" (OpenAI), and, for role
//     "tool", its content as one tool_result named by "tool_call_id".
//   - "prompt", "input" and "suffix": each string (the value, or each
//     string of an array) is a user message with one text part; an object
//     in an "input" array is read as a message (Responses-style items),
//     a function_call item as a tool_call of role assistant (NAME its
//     name, TEXT its arguments) and a function_call_output item as a
//     tool_result of role tool (NAME its call_id, TEXT its output).
//
// Scalars that select or name (role, type, name, tool_call_id,
// tool_use_id, function.name, function.arguments, input) take the last
// copy, as encoding/json does; texts take every copy. Strings are decoded
// exactly as encoding/json decodes them. A body that is not a JSON object
// gives no records; a malformed one gives the records read before the
// error. Append never panics.
//
// AppendMCP reads a body of the MCP endpoint instead: a tools/call's
// arguments (mcp.go).
//
// AppendSpans also tells, for each record, where its TEXT lies in the
// body when it is one JSON string literal, and Splice replaces that
// literal with a new text: how a plugin's set_message_text rewrites a
// request (sdk/ABI.md, "Request rewriting").
package convo

import (
	"strconv"
	"sync"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// Part kinds, as written in a record.
const (
	KindText       = "text"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
)

// maxDepth is above the nesting the gateway's request parser accepts (300),
// so a body that reached a plugin is never cut short by the scanner's
// bound.
const maxDepth = 1024

// Append appends the request_messages encoding of body to dst and returns
// it.
func Append(dst, body []byte) []byte {
	dst, _ = appendRecords(dst, body, nil, false)
	return dst
}

// AppendSpans is Append that also appends to spans, for each record in
// order, where its TEXT lies in body (see TextSpan).
func AppendSpans(dst, body []byte, spans []TextSpan) ([]byte, []TextSpan) {
	return appendRecords(dst, body, spans, true)
}

func appendRecords(dst, body []byte, spans []TextSpan, track bool) ([]byte, []TextSpan) {
	e := encoders.Get().(*encoder)
	e.dst, e.body, e.index = dst, body, 0
	e.spans, e.track = spans, track
	e.s.MaxDepth = maxDepth
	e.s.Reset(body)
	dst = e.append()
	spans = e.spans
	e.dst, e.body, e.spans = nil, nil, nil
	e.s.Reset(nil)
	encoders.Put(e)
	return dst, spans
}

// encoders keeps encoders, and the scanner buffers that decoded strings
// with escapes grew, from one request to the next.
var encoders = sync.Pool{New: func() any { return new(encoder) }}

func (e *encoder) append() []byte {
	dst := e.dst
	if e.s.Peek() != '{' {
		return dst
	}
	start := e.s.Offset()
	// System first: it is message 0 wherever it stands in the body.
	// A malformed body still gives what the second pass reads before the
	// error.
	_ = e.s.Object(func(key []byte) error {
		switch string(key) {
		case "system":
			return e.system()
		case "instructions":
			if e.s.Peek() == '"' {
				return e.system()
			}
		}
		return e.s.Skip()
	})
	e.s.Reset(e.body)
	e.s.Seek(start)
	_ = e.s.Object(func(key []byte) error {
		switch string(key) {
		case "messages":
			return e.messages()
		case "prompt", "input", "suffix":
			return e.prompts(string(key) == "input")
		}
		return e.s.Skip()
	})
	return e.dst
}

type encoder struct {
	s     jsonscan.Scanner
	body  []byte
	dst   []byte
	index int // the next message's INDEX

	// With track, each record's TextSpan is appended to spans: textSpan is
	// the string literal the record being written took its TEXT from,
	// lits how many literals (or raw values: 2) it took it from.
	track    bool
	spans    []TextSpan
	textSpan TextSpan
	lits     int

	// ptr is the JSON Pointer of the value being read in an MCP tool
	// call's arguments (mcp.go).
	ptr []byte
}

// A span is where a string value starts in the body (its opening quote);
// -1 when absent. Strings are decoded again from their span when a record
// needs them, since a decoded string lives only until the next is read.
type span int

const none span = -1

// str appends the string at sp, decoded, to the record being written.
func (e *encoder) str(sp span) (int, error) {
	if sp == none {
		return 0, nil
	}
	cur := e.s.Offset()
	e.s.Seek(int(sp))
	b, err := e.s.Str()
	e.s.Seek(cur)
	e.dst = append(e.dst, b...)
	return len(b), err
}

// textStr is str for a record's TEXT: the literal is noted as its source.
func (e *encoder) textStr(sp span) (int, error) {
	if sp == none {
		return 0, nil
	}
	cur := e.s.Offset()
	e.s.Seek(int(sp))
	b, err := e.s.Str()
	if err == nil {
		e.noteText(int(sp), e.s.Offset())
	}
	e.s.Seek(cur)
	e.dst = append(e.dst, b...)
	return len(b), err
}

// textAtCursor appends the string at the cursor, decoded, to the record's
// TEXT, noting the literal as its source.
func (e *encoder) textAtCursor() error {
	e.s.Peek()
	from := e.s.Offset()
	b, err := e.s.Str()
	if err != nil {
		return err
	}
	e.noteText(from, e.s.Offset())
	e.dst = append(e.dst, b...)
	return nil
}

// noteText notes that the record being written took TEXT from the string
// literal body[from:to].
func (e *encoder) noteText(from, to int) {
	e.textSpan = TextSpan{Start: from, End: to}
	e.lits++
}

// begin starts a record: its ROLE NAME TEXT are appended from the
// position it returns.
func (e *encoder) begin() int {
	e.lits = 0
	return len(e.dst)
}

// lit appends a fixed string to the record being written.
func (e *encoder) lit(v string) int {
	e.dst = append(e.dst, v...)
	return len(v)
}

// finish ends the record whose ROLE NAME TEXT start at start, writing its
// header before them.
func (e *encoder) finish(start int, kind string, roleLen, nameLen int) {
	textLen := len(e.dst) - start - roleLen - nameLen
	var hb [80]byte
	h := strconv.AppendInt(hb[:0], int64(e.index), 10)
	h = append(h, ' ')
	h = append(h, kind...)
	h = append(h, ' ')
	h = strconv.AppendInt(h, int64(roleLen), 10)
	h = append(h, ' ')
	h = strconv.AppendInt(h, int64(nameLen), 10)
	h = append(h, ' ')
	h = strconv.AppendInt(h, int64(textLen), 10)
	h = append(h, '\n')
	end := len(e.dst)
	e.dst = append(e.dst, h...)
	copy(e.dst[start+len(h):], e.dst[start:end])
	copy(e.dst[start:], h)
	e.dst = append(e.dst, '\n')
	if e.track {
		sp := TextSpan{Start: -1, End: -1}
		if e.lits == 1 {
			sp = e.textSpan
		}
		e.spans = append(e.spans, sp)
	}
	e.lits = 0
}

// stringSpan returns the span of the string at the cursor, consuming it;
// none, after skipping it, for any other value.
func (e *encoder) stringSpan() (span, error) {
	if e.s.Peek() != '"' {
		return none, e.s.Skip()
	}
	sp := span(e.s.Offset())
	_, err := e.s.Str()
	return sp, err
}

// system reads a top-level "system": a string or an array of text blocks.
func (e *encoder) system() error {
	switch e.s.Peek() {
	case '"', '[':
	default:
		return e.s.Skip()
	}
	m := message{role: none, fixedRole: "system", toolCallID: none}
	err := e.content(&m)
	e.index++
	return err
}

// prompts reads "prompt", "input" or "suffix": a string, or an array of
// strings (and, in "input", of message objects); other values are skipped.
func (e *encoder) prompts(items bool) error {
	switch e.s.Peek() {
	case '"':
		return e.userText()
	case '[':
		return e.s.Array(func(int) error {
			switch e.s.Peek() {
			case '"':
				return e.userText()
			case '{':
				if items {
					return e.message(true)
				}
			}
			return e.s.Skip()
		})
	}
	return e.s.Skip()
}

// userText writes the string at the cursor as a message of its own, role
// user.
func (e *encoder) userText() error {
	start := e.begin()
	n := e.lit("user")
	if err := e.textAtCursor(); err != nil {
		e.dst = e.dst[:start]
		return err
	}
	e.finish(start, KindText, n, 0)
	e.index++
	return nil
}

func (e *encoder) messages() error {
	if e.s.Peek() != '[' {
		return e.s.Skip()
	}
	return e.s.Array(func(int) error {
		if e.s.Peek() != '{' {
			return e.s.Skip()
		}
		return e.message(false)
	})
}
