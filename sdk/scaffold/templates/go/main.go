// Command denyguard is a Tollgate plugin: it rejects requests whose
// messages contain a denied term, and stops replies that produce one.
// See README.md.
package main

import (
	"errors"
	"strconv"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// main is required of a main package but is not run: a c-shared module's
// _initialize runs the init functions only.
func main() {}

func init() {
	sdk.OnConfigure(func(cfg []byte) error {
		parsed, err := parseConfig(cfg)
		if err != nil {
			return err
		}
		g = parsed
		return nil
	})
	sdk.OnRequest(onRequest)
	sdk.OnChunk(onChunk)
}

// g is the instance's configuration, set by on_configure before any
// request.
var g *guard

// maxTerm is the longest term accepted, in bytes: the stream state keeps
// at most this many bytes minus one between events.
const maxTerm = 256

type guard struct {
	deny        [][]byte // the terms, in ASCII lower case
	replacement string   // what a stopped reply ends with
	longest     int      // the longest term's length
}

const example = `{"deny": ["secret"], "replacement": "[blocked]"}`

// configError is a problem with the config's content, as opposed to its
// JSON syntax.
type configError struct{ msg string }

func (e *configError) Error() string { return "denyguard: " + e.msg }

func problem(msg string) error { return &configError{msg} }

// wrongKind is the problem msg with the value at the cursor, unless that
// value is not JSON at all: then it is the syntax error.
func wrongKind(s *jsonscan.Scanner, msg string) error {
	if err := s.Skip(); err != nil {
		return err
	}
	return problem(msg)
}

// parseConfig reads the config strictly: unknown fields are errors, and
// every message says what to write instead.
func parseConfig(raw []byte) (*guard, error) {
	g := &guard{replacement: "[blocked]"}
	var s jsonscan.Scanner
	s.Reset(raw)
	if s.Peek() != '{' {
		if s.Skip() == nil && s.End() == nil {
			return nil, problem("the config is not an object: write " + example)
		}
	}
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "deny":
			return g.readTerms(&s)
		case "replacement":
			if s.Peek() != '"' {
				return wrongKind(&s, `"replacement" is not a string: write e.g. "[blocked]"`)
			}
			b, err := s.Str()
			g.replacement = string(b)
			return err
		}
		return wrongKind(&s, "unknown config field "+strconv.Quote(string(key))+`: the fields are "deny" and "replacement"`)
	})
	if err == nil {
		err = s.End()
	}
	var ce *configError
	switch {
	case errors.As(err, &ce):
		return nil, err
	case err != nil:
		return nil, problem("the config is not JSON (" + err.Error() + "): write " + example)
	case g.deny == nil:
		return nil, problem(`"deny" is missing: write ` + example)
	}
	return g, nil
}

// readTerms reads the deny array at the scanner's cursor.
func (g *guard) readTerms(s *jsonscan.Scanner) error {
	if s.Peek() != '[' {
		return wrongKind(s, `"deny" is not an array: write an array of terms, e.g. `+example)
	}
	g.deny, g.longest = [][]byte{}, 0
	err := s.Array(func(i int) error {
		if s.Peek() != '"' {
			return wrongKind(s, "deny["+strconv.Itoa(i)+"] is not a string: every term is a string")
		}
		b, err := s.Str()
		if err != nil {
			return err
		}
		if len(b) == 0 || len(b) > maxTerm {
			return problem("deny[" + strconv.Itoa(i) + "] is " + strconv.Itoa(len(b)) + " bytes long: a term has 1 to " + strconv.Itoa(maxTerm) + " bytes")
		}
		g.deny = append(g.deny, lowerASCII(b))
		g.longest = max(g.longest, len(b))
		return nil
	})
	if err == nil && len(g.deny) == 0 {
		return problem(`"deny" is empty: list at least one term, e.g. ` + example)
	}
	return err
}

// parts is reused from request to request.
var parts []sdk.MessagePart

func onRequest(r *sdk.Request) sdk.Verdict {
	parts = r.Messages(parts[:0])
	for _, p := range parts {
		// Tool calls are the assistant's own earlier output, which the
		// chunk phase checked when it was produced: not scanned.
		if (p.Kind == sdk.PartText || p.Kind == sdk.PartToolResult) && g.find(p.Text) {
			// The log and the error never name the term.
			sdk.Log(sdk.LevelInfo, "denyguard: request blocked")
			return r.Reject(400, "invalid_request_error", "content_blocked", "The request contains a blocked term.")
		}
	}
	return sdk.Continue
}

// window is the previous events' tail followed by this event's text;
// reused from event to event.
var window []byte

// onChunk checks the previous events' tail (the request's state) followed
// by this event's text, so that a term split across events is caught when
// its last byte arrives: the client never gets the whole term.
func onChunk(c *sdk.Chunk) sdk.Verdict {
	if c.Len() == 0 {
		return sdk.Continue
	}
	window = window[:0]
	if !c.IsWhole() {
		window = append(window, c.State()...)
	}
	kept := len(window)
	window = append(window, c.Bytes()...)
	if g.find(window) {
		sdk.Log(sdk.LevelInfo, "denyguard: reply stopped")
		return c.Stop(g.replacement, "content_filter")
	}
	if c.IsWhole() {
		return sdk.Continue
	}
	tail := window[len(window)-min(len(window), g.longest-1):]
	if kept != 0 || len(tail) != 0 {
		if err := c.SetState(tail); err != nil {
			// A guard that cannot keep its state would miss a split
			// term: fail the callback, so the plugin's on_error applies.
			panic("denyguard: saving the state: " + err.Error())
		}
	}
	return sdk.Continue
}

// find reports whether text contains a term, ASCII case-insensitively.
func (g *guard) find(text []byte) bool {
	for _, t := range g.deny {
		if containsFold(text, t) {
			return true
		}
	}
	return false
}

// containsFold reports whether text contains term (in lower case),
// ignoring ASCII case. bytes.EqualFold would also fold non-ASCII letters
// (the Kelvin sign matches k).
func containsFold(text, term []byte) bool {
	for i := 0; i+len(term) <= len(text); i++ {
		if equalFoldASCII(text[i:i+len(term)], term) {
			return true
		}
	}
	return false
}

func equalFoldASCII(s, lower []byte) bool {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// lowerASCII returns a lower-case copy of s.
func lowerASCII(s []byte) []byte {
	b := append([]byte(nil), s...)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}
