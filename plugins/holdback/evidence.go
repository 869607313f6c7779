package main

import (
	"bytes"
	"errors"

	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// Tool evidence: the URLs around markers in what tools produced, as the
// request carries it. A URL in the reply that equals one of them passes.
//
// Read from the request body's "messages" (chat completions) and "input"
// (Responses-style items), every turn of the conversation:
//   - the content of messages with role "tool" (or the legacy "function"),
//   - tool_calls[].function.arguments and function_call.arguments of any
//     message,
//   - the "output" of items of type "function_call_output" and the
//     "arguments" of items of type "function_call".
//
// A text that is itself a JSON document (tools often return JSON) is read
// for its decoded strings, so "https:\/\/host\/x" or "\u0026" inside a
// tool's JSON output yields the URL as the model would write it.

const (
	// maxURL bounds a URL: longer ones are never evidence, so a reply URL
	// longer than this is stopped.
	maxURL = 8192
	// maxEvidenceBytes bounds the evidence kept per request (it lives in
	// the request's state while it is needed); URLs past it are ignored,
	// which can only stop more replies, never pass more.
	maxEvidenceBytes = 256 << 10
	// maxNested is how deep JSON inside JSON strings is read.
	maxNested = 2
)

// evidence is an encoded list of distinct URLs: for each, a 4-byte
// little-endian length and the bytes. It is stored as is in the state.
type evidence []byte

func (e evidence) each(f func(u []byte) bool) {
	for len(e) >= 4 {
		n := int(le32(e))
		u := e[4 : 4+n]
		e = e[4+n:]
		if !f(u) {
			return
		}
	}
}

// has reports whether u is one of the URLs.
func (e evidence) has(u []byte) bool {
	found := false
	e.each(func(x []byte) bool { found = bytes.Equal(x, u); return !found })
	return found
}

// hasPrefix reports whether some URL starts with p.
func (e evidence) hasPrefix(p []byte) bool {
	found := false
	e.each(func(x []byte) bool { found = bytes.HasPrefix(x, p); return !found })
	return found
}

// collector gathers the evidence of one request body.
type collector struct {
	ac  *automaton
	out evidence
}

var errNotObject = errors.New("the request body is not a JSON object")

// collectEvidence returns the URLs tools produced according to body (the
// raw request JSON). An error means the body could not be read; the caller
// then has no evidence, which stops rather than passes.
func (g *guard) collectEvidence(body []byte, dst evidence) (evidence, error) {
	c := collector{ac: g.ac, out: dst[:0]}
	var s jsonscan.Scanner
	s.Reset(body)
	if s.Peek() != '{' {
		return c.out, errNotObject
	}
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "messages", "input":
			if s.Peek() != '[' {
				return s.Skip()
			}
			return s.Array(func(int) error { return c.item(&s) })
		}
		return s.Skip()
	})
	if err == nil {
		err = s.End()
	}
	return c.out, err
}

// item reads one message or input item. Its role and type may come after
// its content, so a first pass reads them and a second the texts.
func (c *collector) item(s *jsonscan.Scanner) error {
	if s.Peek() != '{' {
		return s.Skip()
	}
	start := s.Offset()
	var role, typ [32]byte
	var roleN, typN int
	err := s.Object(func(key []byte) error {
		k := string(key)
		if (k == "role" || k == "type") && s.Peek() == '"' {
			v, err := s.Str()
			if err != nil {
				return err
			}
			if k == "role" {
				roleN = copy(role[:], v)
			} else {
				typN = copy(typ[:], v)
			}
			return nil
		}
		return s.Skip()
	})
	if err != nil {
		return err
	}
	r, t := string(role[:roleN]), string(typ[:typN])
	s.Seek(start)
	return s.Object(func(key []byte) error {
		switch string(key) {
		case "content":
			if r == "tool" || r == "function" {
				return c.strings(s, 0)
			}
		case "output":
			if t == "function_call_output" {
				return c.strings(s, 0)
			}
		case "arguments":
			if t == "function_call" {
				return c.strings(s, 0)
			}
		case "tool_calls":
			if s.Peek() == '[' {
				return s.Array(func(int) error { return c.member(s, "function", "arguments") })
			}
		case "function_call":
			return c.member(s, "arguments")
		}
		return s.Skip()
	})
}

// member reads the strings at the path of object keys below the cursor.
func (c *collector) member(s *jsonscan.Scanner, path ...string) error {
	if len(path) == 0 {
		return c.strings(s, 0)
	}
	if s.Peek() != '{' {
		return s.Skip()
	}
	return s.Object(func(key []byte) error {
		if string(key) == path[0] {
			return c.member(s, path[1:]...)
		}
		return s.Skip()
	})
}

// strings reads every string in the value at the cursor as evidence text.
func (c *collector) strings(s *jsonscan.Scanner, nested int) error {
	switch s.Peek() {
	case '"':
		t, err := s.Str()
		if err != nil {
			return err
		}
		c.text(t, nested)
		return nil
	case '[':
		return s.Array(func(int) error { return c.strings(s, nested) })
	case '{':
		return s.Object(func([]byte) error { return c.strings(s, nested) })
	}
	return s.Skip()
}

// text adds the URL around every marker in t. A text that is a JSON
// document is read for its decoded strings instead, as the model would
// quote them; a text that only looks like one is read as text.
func (c *collector) text(t []byte, nested int) {
	if nested < maxNested {
		if j := bytes.TrimLeft(t, " \t\r\n"); len(j) > 0 && (j[0] == '{' || j[0] == '[') {
			n := len(c.out)
			var s jsonscan.Scanner
			s.Reset(t)
			err := c.strings(&s, nested+1)
			if err == nil {
				err = s.End()
			}
			if err == nil {
				return
			}
			c.out = c.out[:n]
		}
	}
	a := c.ac
	st := uint16(0)
	for i := 0; i < len(t); i++ {
		st = a.step(st, t[i])
		m := int(a.match[st])
		if m == 0 {
			continue
		}
		lo, hi := i+1-m, i+1
		for lo > 0 && isURLByte[t[lo-1]] {
			lo--
		}
		for hi < len(t) && isURLByte[t[hi]] {
			hi++
		}
		run := t[lo:hi]
		at, _ := urlStart(run, i+1-lo)
		c.add(trimURL(run[at:]))
	}
}

func (c *collector) add(u []byte) {
	if len(u) == 0 || len(u) > maxURL || len(c.out)+4+len(u) > maxEvidenceBytes || c.out.has(u) {
		return
	}
	c.out = appendLE32(c.out, uint32(len(u)))
	c.out = append(c.out, u...)
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func appendLE32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}
