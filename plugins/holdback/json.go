package main

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON reader: enough to walk a document, decode its strings
// exactly as encoding/json does (escapes, surrogate pairs, invalid UTF-8
// as U+FFFD) and skip what is not needed, without reflection and without
// allocating per string. It is plugins/keywordguard's reader, copied (a
// plugin folder imports only the SDK); keep the two in step. Its fuzz
// test against encoding/json lives there.
type scanner struct {
	data  []byte
	pos   int
	depth int
	buf   []byte // decoded strings that had escapes or invalid UTF-8
}

// maxDepth bounds nesting, and so the recursion of skip and texts.
const maxDepth = 128

var errDepth = errors.New("json: nested too deeply")

func (s *scanner) reset(data []byte) {
	s.data, s.pos, s.depth, s.buf = data, 0, 0, s.buf[:0]
}

func (s *scanner) errorf(msg string) error {
	return errors.New("json: " + msg + " at offset " + strconv.Itoa(s.pos))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("expected " + strconv.QuoteRune(rune(c)))
	}
	s.pos++
	return nil
}

// end checks that nothing but space follows the value.
func (s *scanner) end() error {
	if s.peek() != 0 {
		return s.errorf("unexpected data after the value")
	}
	return nil
}

// object calls member for each member of the object at the cursor with the
// decoded key; member must consume the value (or call skip). The key is
// valid until the next string is read.
func (s *scanner) object(member func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.depth >= maxDepth {
		return errDepth
	}
	s.depth++
	err := s.members(member)
	s.depth--
	return err
}

func (s *scanner) members(member func(key []byte) error) error {
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.peek() != '"' {
			return s.errorf("expected a member name")
		}
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.errorf("expected ',' or '}'")
		}
	}
}

// array calls elem for each element of the array at the cursor; elem must
// consume the element.
func (s *scanner) array(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.depth >= maxDepth {
		return errDepth
	}
	s.depth++
	err := s.elements(elem)
	s.depth--
	return err
}

func (s *scanner) elements(elem func(i int) error) error {
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return s.errorf("expected ',' or ']'")
		}
	}
}

// str decodes the string at the cursor. The result aliases the input when
// the string has no escapes and is valid UTF-8, else s.buf; either way it
// is valid until the next call of str.
func (s *scanner) str() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.pos
	// Fast path: no escapes, ASCII or valid UTF-8.
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.data[start : s.pos-1], nil
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return nil, s.errorf("control character in string")
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return s.strSlow(start)
			}
			s.pos += size
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) strSlow(start int) ([]byte, error) {
	b := append(s.buf[:0], s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			s.buf = b
			return b, nil
		case c < 0x20:
			return nil, s.errorf("control character in string")
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return nil, s.errorf("unterminated string")
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return nil, s.errorf("bad \\u escape")
				}
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
						save := s.pos
						s.pos += 2
						if x, ok := s.hex4(); ok {
							if d := utf16.DecodeRune(r, x); d != utf8.RuneError {
								r2 = d
							} else {
								s.pos = save // not a pair: the second escape stands alone
							}
						} else {
							return nil, s.errorf("bad \\u escape")
						}
					}
					r = r2
				}
				b = utf8.AppendRune(b, r)
			default:
				return nil, s.errorf("bad escape")
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			s.pos++
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			s.pos += size
			b = utf8.AppendRune(b, r) // invalid bytes become U+FFFD, one each
		}
	}
	return nil, s.errorf("unterminated string")
}

func (s *scanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.pos : s.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	s.pos += 4
	return r, true
}

// number returns the literal of the number at the cursor, checked against
// JSON's grammar.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	at := func(c byte) bool {
		if s.pos < len(s.data) && s.data[s.pos] == c {
			s.pos++
			return true
		}
		return false
	}
	at('-')
	if at('0') {
		if s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
			return nil, s.errorf("bad number")
		}
	} else if digits() == 0 {
		return nil, s.errorf("expected a value")
	}
	if at('.') && digits() == 0 {
		return nil, s.errorf("bad number")
	}
	if at('e') || at('E') {
		_ = at('+') || at('-')
		if digits() == 0 {
			return nil, s.errorf("bad number")
		}
	}
	return s.data[start:s.pos], nil
}

func (s *scanner) literal(word string) error {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return s.errorf("expected a value")
	}
	s.pos += len(word)
	return nil
}

// skip consumes the value at the cursor.
func (s *scanner) skip() error {
	switch s.peek() {
	case '{':
		return s.object(func([]byte) error { return s.skip() })
	case '[':
		return s.array(func(int) error { return s.skip() })
	case '"':
		_, err := s.str()
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	_, err := s.number()
	return err
}
