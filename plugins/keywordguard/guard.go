package main

import (
	"errors"
	"regexp"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/sdk"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// guard is a parsed, checked configuration.
type guard struct {
	rules       []rule // the deny patterns, in order
	message     string
	status      int
	headerName  string // "" when no header is configured
	headerValue string

	// Reused for every request: an instance serves one at a time.
	sc    jsonscan.Scanner
	parts []sdk.MessagePart
	lower []byte
}

const (
	defaultMessage = "The request was blocked by the content policy."
	defaultStatus  = 400
	maxMessage     = 4096 // the host's limit on an error message
)

// parseConfig reads and checks the plugin's config. Errors name the bad
// entry, as the operator sees them when the plugin fails to load.
func parseConfig(raw []byte) (*guard, error) {
	g := &guard{message: defaultMessage, status: defaultStatus}
	s := &g.sc
	s.Reset(raw)
	if s.Peek() != '{' {
		return nil, errors.New("the config must be a JSON object")
	}
	seenDeny := false
	err := s.Object(func(key []byte) error {
		switch string(key) {
		case "deny":
			seenDeny = true
			g.rules = g.rules[:0]
			if s.Peek() != '[' {
				return errors.New(`"deny" must be a list of regular expressions`)
			}
			return s.Array(func(i int) error {
				entry := "deny[" + strconv.Itoa(i) + "]"
				if s.Peek() != '"' {
					return errors.New(entry + " must be a string")
				}
				b, err := s.Str()
				if err != nil {
					return err
				}
				pat := string(b)
				if pat == "" {
					return errors.New(entry + " is empty, which would match every request")
				}
				re, err := regexp.Compile(pat)
				if err != nil {
					return errors.New(entry + " " + strconv.Quote(pat) + " is not a valid regular expression: " + err.Error())
				}
				g.rules = append(g.rules, newRule(re))
				return nil
			})
		case "message":
			if s.Peek() != '"' {
				return errors.New(`"message" must be a string`)
			}
			b, err := s.Str()
			if err != nil {
				return err
			}
			if len(b) == 0 || len(b) > maxMessage {
				return errors.New(`"message" must be 1 to 4096 bytes long`)
			}
			g.message = string(b)
			return nil
		case "status":
			lit, err := s.Number()
			if err != nil {
				return errors.New(`"status" must be a number`)
			}
			n, err := strconv.Atoi(string(lit))
			if err != nil || n < 400 || n > 499 {
				return errors.New(`"status" is ` + string(lit) + `; it must be an HTTP client error status, 400 to 499`)
			}
			g.status = n
			return nil
		case "header":
			if s.Peek() != '{' {
				return errors.New(`"header" must be an object {"name": ..., "value": ...}`)
			}
			if err := s.Object(func(key []byte) error {
				k := string(key)
				if k != "name" && k != "value" {
					return errors.New(`header: unknown key ` + strconv.Quote(k) + ` (keys: name, value)`)
				}
				if s.Peek() != '"' {
					return errors.New("header." + k + " must be a string")
				}
				b, err := s.Str()
				if err != nil {
					return err
				}
				if k == "name" {
					g.headerName = string(b)
				} else {
					g.headerValue = string(b)
				}
				return nil
			}); err != nil {
				return err
			}
			return checkHeader(g.headerName, g.headerValue)
		}
		return errors.New("unknown key " + strconv.Quote(string(key)) + " (keys: deny, message, status, header)")
	})
	if err == nil {
		err = s.End()
	}
	if err != nil {
		return nil, err
	}
	if !seenDeny || len(g.rules) == 0 {
		return nil, errors.New(`"deny" must list at least one regular expression`)
	}
	return g, nil
}

func checkHeader(name, value string) error {
	if name == "" {
		return errors.New("header.name is required")
	}
	for i := 0; i < len(name); i++ {
		if !isTokenChar(name[i]) {
			return errors.New("header.name " + strconv.Quote(name) + " is not a valid header name")
		}
	}
	switch strings.ToLower(name) {
	case "host", "content-length", "transfer-encoding", "connection":
		return errors.New("header.name " + strconv.Quote(name) + " is a header the gateway manages")
	}
	if value == "" {
		return errors.New("header.value is required (an empty value would remove the header)")
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return errors.New("header.value must not contain CR, LF or NUL")
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP header name (RFC 9110
// token).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// check returns the index of the first deny pattern that matches the text
// of one of parts, and the index of the message it matched in; rule is -1
// when none matches. The texts are those of text parts and tool results
// (what users, systems and tools said); tool calls are the model's own
// words and are not checked.
func (g *guard) check(parts []sdk.MessagePart) (rule, message int) {
	for i := range parts {
		p := &parts[i]
		if p.Kind == sdk.PartToolCall {
			continue
		}
		lowered := false
		for j := range g.rules {
			r := &g.rules[j]
			if r.mayMatch(p.Text, &g.lower, &lowered) && r.re.Match(p.Text) {
				return j, p.Index
			}
		}
	}
	return -1, -1
}
