// Command denyguard is a Tollgate plugin: it rejects requests whose
// messages contain a denied term, and stops replies that produce one.
// See README.md.
package main

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/tollgate/tollgate/sdk"
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

func parseConfig(raw []byte) (*guard, error) {
	if !json.Valid(raw) {
		return nil, errors.New("denyguard: the config is not JSON: write " + example)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		return nil, errors.New("denyguard: the config is not an object: write " + example)
	}
	g := &guard{replacement: "[blocked]"}
	for key, v := range members {
		switch key {
		case "deny":
			var terms []json.RawMessage
			if err := json.Unmarshal(v, &terms); err != nil || terms == nil {
				return nil, errors.New(`denyguard: "deny" is not an array: write an array of terms, e.g. ` + example)
			}
			if len(terms) == 0 {
				return nil, errors.New(`denyguard: "deny" is empty: list at least one term, e.g. ` + example)
			}
			for i, t := range terms {
				var s string
				if err := json.Unmarshal(t, &s); err != nil || t[0] != '"' {
					return nil, errors.New("denyguard: deny[" + strconv.Itoa(i) + "] is not a string: every term is a string")
				}
				if len(s) == 0 || len(s) > maxTerm {
					return nil, errors.New("denyguard: deny[" + strconv.Itoa(i) + "] is " + strconv.Itoa(len(s)) + " bytes long: a term has 1 to " + strconv.Itoa(maxTerm) + " bytes")
				}
				g.deny = append(g.deny, lowerASCII(s))
				g.longest = max(g.longest, len(s))
			}
		case "replacement":
			if err := json.Unmarshal(v, &g.replacement); err != nil || v[0] != '"' {
				return nil, errors.New(`denyguard: "replacement" is not a string: write a string, e.g. "[blocked]"`)
			}
		default:
			return nil, errors.New("denyguard: unknown config field " + strconv.Quote(key) + `: the fields are "deny" and "replacement"`)
		}
	}
	if len(g.deny) == 0 {
		return nil, errors.New(`denyguard: "deny" is missing: write ` + example)
	}
	return g, nil
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

func lowerASCII(s string) []byte {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}
