// Package jsonscan is a small JSON reader for plugins and for the host's
// encoders: enough to walk a document, decode its strings and skip what is
// not needed, without reflection and without allocating per string.
//
// A [Scanner] reads one value at a time from a byte slice it does not copy.
// Strings decode exactly as encoding/json decodes them: every escape,
// surrogate pairs joined, a lone surrogate and each byte of invalid UTF-8
// becoming U+FFFD. Numbers are checked against JSON's grammar and returned
// as their literal text; true, false and null are matched as words.
// Objects and arrays are walked with callbacks, one per member or element,
// each of which must consume its value (read it, walk it or [Scanner.Skip]
// it). Duplicate keys are not merged: the callback sees every copy.
//
// Nesting is bounded ([DefaultMaxDepth], or [Scanner.MaxDepth]), and so is
// the recursion of the walk; a deeper document is [ErrDepth].
//
// A decoded string aliases the input when it has no escapes and is valid
// UTF-8, and otherwise the scanner's own buffer, which the next string
// decoded with escapes overwrites: a Scanner reused across documents
// reaches a steady state in which it allocates nothing. Beside
// encoding/json it keeps a wasm plugin about 1.2 MB smaller and reads a
// chat request several times faster.
package jsonscan

import (
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A Scanner reads a JSON document. The zero value is ready for [Scanner.Reset].
// It is not safe for concurrent use.
type Scanner struct {
	// MaxDepth bounds the nesting of objects and arrays; 0 means
	// DefaultMaxDepth.
	MaxDepth int

	data  []byte
	pos   int
	depth int
	buf   []byte // decoded strings that had escapes or invalid UTF-8
}

// DefaultMaxDepth is the nesting a Scanner accepts when its MaxDepth is 0.
const DefaultMaxDepth = 128

// ErrDepth is returned when a document nests deeper than the Scanner's
// MaxDepth.
var ErrDepth = errors.New("json: nested too deeply")

// Reset starts reading data from its beginning. The Scanner keeps data,
// and the strings it returns may alias it.
func (s *Scanner) Reset(data []byte) {
	s.data, s.pos, s.depth, s.buf = data, 0, 0, s.buf[:0]
}

// Offset returns the cursor's position in the data: after [Scanner.Peek],
// the first byte of the next value; after reading a value, the byte after
// it. data[a:b] between the two is the value's raw JSON.
func (s *Scanner) Offset() int { return s.pos }

// Seek moves the cursor to off, an offset [Scanner.Offset] returned for the
// same data at the same nesting, to read a value again.
func (s *Scanner) Seek(off int) {
	if off < 0 || off > len(s.data) {
		off = len(s.data)
	}
	s.pos = off
}

func (s *Scanner) maxDepth() int {
	if s.MaxDepth > 0 {
		return s.MaxDepth
	}
	return DefaultMaxDepth
}

func (s *Scanner) errorf(msg string) error {
	return errors.New("json: " + msg + " at offset " + strconv.Itoa(s.pos))
}

func (s *Scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// Peek returns the next byte that is not space, which tells the kind of
// the value at the cursor ('{', '[', '"', 't', 'f', 'n', or a number's
// first byte); 0 at the end of the data.
func (s *Scanner) Peek() byte {
	s.ws()
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

func (s *Scanner) expect(c byte) error {
	if s.Peek() != c {
		return s.errorf("expected " + strconv.QuoteRune(rune(c)))
	}
	s.pos++
	return nil
}

// End checks that nothing but space follows the value read.
func (s *Scanner) End() error {
	if s.ws(); s.pos < len(s.data) { // not Peek: a NUL byte is data
		return s.errorf("unexpected data after the value")
	}
	return nil
}

// Object reads the object at the cursor, calling member for each member
// with its decoded key, in order; member must consume the member's value.
// The key is valid until the next string is read. An error from member
// ends the walk and is returned as is.
func (s *Scanner) Object(member func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.depth >= s.maxDepth() {
		return ErrDepth
	}
	s.depth++
	err := s.members(member)
	s.depth--
	return err
}

func (s *Scanner) members(member func(key []byte) error) error {
	if s.Peek() == '}' {
		s.pos++
		return nil
	}
	for {
		if s.Peek() != '"' {
			return s.errorf("expected a member name")
		}
		key, err := s.Str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.Peek() {
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

// Array reads the array at the cursor, calling elem for each element with
// its index; elem must consume the element. An error from elem ends the
// walk and is returned as is.
func (s *Scanner) Array(elem func(i int) error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.depth >= s.maxDepth() {
		return ErrDepth
	}
	s.depth++
	err := s.elements(elem)
	s.depth--
	return err
}

func (s *Scanner) elements(elem func(i int) error) error {
	if s.Peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.Peek() {
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

// Str reads and decodes the string at the cursor. The result aliases the
// data when the string has no escapes and is valid UTF-8, and otherwise
// the Scanner's buffer; either way it is valid until the next call of Str
// (or of a method that reads strings: Object, Skip) and must not be
// modified.
func (s *Scanner) Str() ([]byte, error) {
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

func (s *Scanner) strSlow(start int) ([]byte, error) {
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
			// A run of plain ASCII, appended at once.
			end := s.pos + 1
			for end < len(s.data) {
				if d := s.data[end]; d < 0x20 || d >= utf8.RuneSelf || d == '"' || d == '\\' {
					break
				}
				end++
			}
			b = append(b, s.data[s.pos:end]...)
			s.pos = end
		default:
			r, size := utf8.DecodeRune(s.data[s.pos:])
			s.pos += size
			b = utf8.AppendRune(b, r) // invalid bytes become U+FFFD, one each
		}
	}
	return nil, s.errorf("unterminated string")
}

// skipStr reads the string at the cursor and checks it as Str does,
// without decoding it: several times faster over text that Str would
// check rune by rune or copy.
func (s *Scanner) skipStr() error {
	if err := s.expect('"'); err != nil {
		return err
	}
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			if s.pos+1 >= len(s.data) {
				return s.errorf("unterminated string")
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := s.hex4(); !ok {
					return s.errorf("bad \\u escape")
				}
			default:
				return s.errorf("bad escape")
			}
		case c < 0x20:
			return s.errorf("control character in string")
		default:
			s.pos++ // any other byte, invalid UTF-8 included, as Str takes it
		}
	}
	return s.errorf("unterminated string")
}

func (s *Scanner) hex4() (rune, bool) {
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

// Number reads the number at the cursor and returns its literal text,
// checked against JSON's grammar; it aliases the data.
func (s *Scanner) Number() ([]byte, error) {
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

// Literal reads word (true, false or null) at the cursor.
func (s *Scanner) Literal(word string) error {
	s.ws()
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return s.errorf("expected a value")
	}
	s.pos += len(word)
	return nil
}

// Skip reads the value at the cursor, whatever it is, and checks it.
func (s *Scanner) Skip() error {
	switch s.Peek() {
	case '{':
		return s.Object(func([]byte) error { return s.Skip() })
	case '[':
		return s.Array(func(int) error { return s.Skip() })
	case '"':
		return s.skipStr()
	case 't':
		return s.Literal("true")
	case 'f':
		return s.Literal("false")
	case 'n':
		return s.Literal("null")
	}
	_, err := s.Number()
	return err
}
