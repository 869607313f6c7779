package mcp

import (
	"errors"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// Results reads the strings of a tools/call or resources/read reply that
// the plugins' chunk phase guards, and splices their replacements back
// (sdk/ABI.md, "MCP tool results"). The strings are read where a tool's
// output lies:
//
//   - in "result": every string at any depth (a content item's text, an
//     embedded resource's text and uri, a resource link's uri, name and
//     description, every string of structuredContent, a resource's
//     contents), except the members of a content item or resource that
//     are not text — "type", "mimeType", "data" and "blob" (base64),
//     "annotations" — and "_meta" wherever a content item, a resource or
//     the result has it;
//   - in "error": "message", and every string in "data".
//
// Every copy of a repeated member is read (a client's parser may keep any
// copy), and so is a message whose id is not the request's: what reaches
// the client is guarded, whatever it claims to answer. Its zero value is
// ready; it is not safe for concurrent use.
type Results struct {
	s     jsonscan.Scanner
	spans []span
	text  []byte // the strings, decoded, back to back
	repl  []byte // replacement texts, back to back
	id    []byte // the message's last "id", as sent
	// output is set when the message is a tool's output: a result with
	// content or contents, or an error.
	output bool
}

// span is one string literal of the message, quotes included, and where
// its decoded text and its replacement lie.
type span struct {
	start, end    int // msg[start:end]
	text, textEnd int // r.text[text:textEnd]
	repl, replEnd int // r.repl[repl:replEnd], when replaced
	replaced      bool
}

// maxJSONDepth is the nesting the gateway reads a server's message to:
// encoding/json's (the official Go SDK's), so a message a client reads
// is never one the gateway gave up on, and left unfiltered or unguarded.
const maxJSONDepth = 10000

// MaxResultStrings bounds the strings of one reply the chunk phase is run
// on: a reply with more is withheld (ErrTooManyStrings), since each is a
// call of every chunk plugin.
const MaxResultStrings = 65536

// ErrTooManyStrings is Read's error for a reply with more than
// MaxResultStrings strings to guard.
var ErrTooManyStrings = errors.New("mcp: the tool's reply has more strings than the gateway's guards check")

// context of a value being walked: which of its members are not text.
type walkAt uint8

const (
	atAll      walkAt = iota // every string
	atResult                 // the result object: its _meta is skipped
	atItems                  // result.content: an array of content items
	atItem                   // one content item
	atResource               // a content item's resource, a resources/read content
	atContents               // result.contents: resources/read's contents
)

// Read reads msg, one JSON-RPC message a server sent, and returns how many
// strings the chunk phase is to be run on: 0 when msg is not a JSON object
// or has neither a result nor an error (a notification, a request of the
// server's), and when its strings are all empty. Text(i) gives them.
func (r *Results) Read(msg []byte) (int, error) {
	r.spans, r.text, r.repl, r.id, r.output = r.spans[:0], r.text[:0], r.repl[:0], r.id[:0], false
	r.s.MaxDepth = maxJSONDepth
	r.s.Reset(msg)
	if r.s.Peek() != '{' {
		return 0, nil
	}
	err := r.s.Object(func(key []byte) error {
		switch string(key) {
		case "result":
			return r.walk(atResult)
		case "error":
			r.output = true
			if r.s.Peek() != '{' {
				return r.s.Skip()
			}
			return r.s.Object(func(key []byte) error {
				switch string(key) {
				case "message":
					return r.walk(atAll)
				case "data":
					return r.walk(atAll)
				}
				return r.s.Skip()
			})
		case "id":
			start := r.s.Offset()
			if err := r.s.Skip(); err != nil {
				return err
			}
			r.id = append(r.id[:0], msg[start:r.s.Offset()]...)
			return nil
		}
		return r.s.Skip()
	})
	if err == nil {
		err = r.s.End()
	}
	r.s.Reset(nil)
	if err != nil {
		// Not JSON the client can read as a message: nothing to guard
		// in it, and nothing the gateway could splice into.
		r.spans, r.text = r.spans[:0], r.text[:0]
		return 0, nil
	}
	if len(r.spans) > MaxResultStrings {
		return len(r.spans), ErrTooManyStrings
	}
	return len(r.spans), nil
}

// walk reads the value at the cursor, at, noting its strings.
func (r *Results) walk(at walkAt) error {
	switch r.s.Peek() {
	case '"':
		start := r.s.Offset()
		b, err := r.s.Str()
		if err != nil {
			return err
		}
		if len(b) > 0 {
			t := len(r.text)
			r.text = append(r.text, b...)
			r.spans = append(r.spans, span{start: start, end: r.s.Offset(), text: t, textEnd: len(r.text)})
		}
		return nil
	case '[':
		elem := atAll
		switch at {
		case atItems:
			elem = atItem
		case atContents:
			elem = atResource
		}
		return r.s.Array(func(int) error { return r.walk(elem) })
	case '{':
		return r.s.Object(func(key []byte) error {
			next := atAll
			switch at {
			case atResult:
				switch string(key) {
				case "_meta":
					return r.s.Skip()
				case "content":
					next, r.output = atItems, true
				case "contents":
					next, r.output = atContents, true
				}
			case atItem:
				switch string(key) {
				case "type", "mimeType", "data", "blob", "annotations", "_meta":
					return r.s.Skip()
				case "resource":
					next = atResource
				}
			case atResource:
				switch string(key) {
				case "mimeType", "blob", "annotations", "_meta":
					return r.s.Skip()
				}
			}
			return r.walk(next)
		})
	}
	return r.s.Skip()
}

// Output reports whether the message Read last is a tool's output: a
// result with "content" (tools/call) or "contents" (resources/read), or
// an error. On a stream that carries the replies to every request (the
// HTTP+SSE transport) these are the ones guarded, not a tools list or an
// initialize result.
func (r *Results) Output() bool { return r.output }

// ID is the id of the message Read last, as sent; empty when it had none.
func (r *Results) ID() []byte { return r.id }

// Text returns string i of the message Read last, decoded. Valid until
// the next Read.
func (r *Results) Text(i int) []byte {
	s := &r.spans[i]
	return r.text[s.text:s.textEnd]
}

// Replace sets string i's replacement (any bytes: it is encoded as a JSON
// string, invalid UTF-8 as U+FFFD).
func (r *Results) Replace(i int, text []byte) {
	s := &r.spans[i]
	s.repl = len(r.repl)
	r.repl = append(r.repl, text...)
	s.replEnd, s.replaced = len(r.repl), true
}

// AppendRewritten appends msg, the message Read last, to dst with the
// replaced strings spliced in; every other byte is msg's.
func (r *Results) AppendRewritten(dst, msg []byte) []byte {
	at := 0
	for i := range r.spans {
		s := &r.spans[i]
		if !s.replaced {
			continue
		}
		dst = append(dst, msg[at:s.start]...)
		dst = openai.AppendJSONString(dst, r.repl[s.repl:s.replEnd])
		at = s.end
	}
	return append(dst, msg[at:]...)
}

// AppendWithheld appends to dst the message sent in place of a reply a
// guard stopped: a tool result with isError true whose one text item is
// text (a tool error the model reads, as MCP reports a tool's failure),
// with the id of the message Read last (null if it had none).
func (r *Results) AppendWithheld(dst, text []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(r.id) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, r.id...)
	}
	dst = append(dst, `,"result":{"content":[{"type":"text","text":`...)
	dst = openai.AppendJSONString(dst, text)
	return append(dst, `}],"isError":true}}`...)
}

// Shrink drops buffers a huge reply grew (over 1 MiB of text, or 64 Ki
// strings' spans), so a pooled Results does not keep them.
func (r *Results) Shrink() {
	if cap(r.text) > 1<<20 || cap(r.repl) > 1<<20 || cap(r.spans) > 1<<16 {
		*r = Results{}
	}
}
