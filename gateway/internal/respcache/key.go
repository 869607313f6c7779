package respcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// ErrUncacheable is returned (wrapped) by Key for a request whose body has
// no canonical form: not a JSON object, invalid JSON, duplicate keys,
// nesting deeper than MaxDepth, over MaxBodyBytes.
var ErrUncacheable = errors.New("respcache: request not cacheable")

// Limits of Key.
const (
	MaxBodyBytes = 8 << 20 // bodies larger are not cacheable
	MaxDepth     = 64      // objects and arrays nested deeper are not cacheable
	// maxExpDigits bounds a number's exponent literal (after its leading
	// zeros): 15 digits keep every exponent arithmetic within an int64.
	maxExpDigits = 15
)

// keyVersion starts the hashed form: a change of the canonical form
// changes it, so keys of two versions never meet.
const keyVersion = "tollgate-respcache-key-v1\x00"

// dropped are the top-level fields removed before hashing: they change
// how the reply is delivered or accounted, not what it says.
var dropped = [...]string{
	"stream", "stream_options", "user", "metadata", "store",
	"safety_identifier", "prompt_cache_key", "service_tier",
}

// Key appends to dst the cache key of a request: lowercase hex SHA-256 of
// the canonical form of (scope, endpoint, body). See the package
// documentation for the canonical form.
func Key(dst []byte, scope, endpoint string, body []byte) ([]byte, error) {
	if len(body) > MaxBodyBytes {
		return dst, fmt.Errorf("%w: body of %d bytes (over %d)", ErrUncacheable, len(body), MaxBodyBytes)
	}
	c := canonPool.Get().(*canon)
	defer c.release()
	c.in, c.pos = body, 0
	c.out = append(c.out[:0], keyVersion...)
	c.out = binary.AppendUvarint(c.out, uint64(len(scope)))
	c.out = append(c.out, scope...)
	c.out = binary.AppendUvarint(c.out, uint64(len(endpoint)))
	c.out = append(c.out, endpoint...)
	c.ws()
	if c.pos >= len(c.in) || c.in[c.pos] != '{' {
		return dst, fmt.Errorf("%w: body is not a JSON object", ErrUncacheable)
	}
	if err := c.object(1, true); err != nil {
		return dst, err
	}
	c.ws()
	if c.pos != len(c.in) {
		return dst, c.errf("data after the object")
	}
	sum := sha256.Sum256(c.out)
	return hex.AppendEncode(dst, sum[:]), nil
}

// canon writes the canonical form of the JSON in in to out.
type canon struct {
	in    []byte
	pos   int
	out   []byte
	spans []span // members of the objects being read, innermost last
	tmp   []byte // an object's members while they are put in order
}

// span is one object member written to out: its key (quoted, canonical)
// is out[k:kEnd], the member (key, ':', value) out[k:end].
type span struct{ k, kEnd, end int }

var canonPool = sync.Pool{New: func() any { return new(canon) }}

// release returns c to the pool unless one request grew its buffers past
// what is worth keeping.
func (c *canon) release() {
	c.in = nil
	if cap(c.out) > 1<<20 || cap(c.tmp) > 1<<20 || cap(c.spans) > 1<<14 {
		return
	}
	c.spans = c.spans[:0]
	canonPool.Put(c)
}

func (c *canon) errf(format string, args ...any) error {
	return fmt.Errorf("%w: invalid JSON at offset %d: %s", ErrUncacheable, c.pos, fmt.Sprintf(format, args...))
}

func (c *canon) ws() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canon) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.errf("unexpected end")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth+1, false)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str()
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.lit("true")
	case b == 'f':
		return c.lit("false")
	case b == 'n':
		return c.lit("null")
	default:
		return c.errf("unexpected %q", b)
	}
}

func (c *canon) lit(s string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(s)) {
		return c.errf("unexpected literal")
	}
	c.pos += len(s)
	c.out = append(c.out, s...)
	return nil
}

func (c *canon) array(depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrUncacheable, MaxDepth)
	}
	c.pos++
	c.out = append(c.out, '[')
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for {
		c.ws()
		if err := c.value(depth); err != nil {
			return err
		}
		c.ws()
		if c.pos >= len(c.in) {
			return c.errf("unexpected end in an array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.errf("want , or ] in an array")
		}
	}
}

// object writes the object at c.pos with its members ordered by their
// canonical keys (an injective encoding of the decoded key, so the order
// depends only on the decoded keys, and equal keys are equal bytes).
func (c *canon) object(depth int, top bool) error {
	if depth > MaxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrUncacheable, MaxDepth)
	}
	c.pos++
	c.out = append(c.out, '{')
	start := len(c.out)
	base := len(c.spans)
	defer func() { c.spans = c.spans[:base] }()
	var seenDropped uint32
	c.ws()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		c.ws()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.errf("want a string key")
		}
		k := len(c.out)
		if err := c.str(); err != nil {
			return err
		}
		kEnd := len(c.out)
		c.ws()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.errf("want : after a key")
		}
		c.pos++
		c.out = append(c.out, ':')
		c.ws()
		if err := c.value(depth); err != nil {
			return err
		}
		keep := true
		if top {
			name := c.out[k+1 : kEnd-1]
			for i, d := range dropped {
				if string(name) == d {
					if seenDropped&(1<<i) != 0 {
						return fmt.Errorf("%w: duplicate key %q", ErrUncacheable, d)
					}
					seenDropped |= 1 << i
					c.out = c.out[:k]
					keep = false
					break
				}
			}
		}
		if keep {
			c.spans = append(c.spans, span{k, kEnd, len(c.out)})
		}
		c.ws()
		if c.pos >= len(c.in) {
			return c.errf("unexpected end in an object")
		}
		if c.in[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.in[c.pos] != '}' {
			return c.errf("want , or } in an object")
		}
		c.pos++
		break
	}
	members := c.spans[base:]
	out := c.out
	slices.SortFunc(members, func(a, b span) int {
		return bytes.Compare(out[a.k:a.kEnd], out[b.k:b.kEnd])
	})
	for i := 1; i < len(members); i++ {
		if bytes.Equal(out[members[i-1].k:members[i-1].kEnd], out[members[i].k:members[i].kEnd]) {
			return fmt.Errorf("%w: duplicate key %s", ErrUncacheable, out[members[i].k:members[i].kEnd])
		}
	}
	c.tmp = append(c.tmp[:0], c.out[start:]...)
	c.out = c.out[:start]
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.tmp[m.k-start:m.end-start]...)
	}
	c.out = append(c.out, '}')
	return nil
}

// str writes the string at c.pos re-encoded: only '"', '\\' and control
// characters escaped (controls as \u00xx), everything else as UTF-8. Invalid
// UTF-8 and unpaired surrogates are refused rather than replaced, so that
// distinct strings never share a form.
func (c *canon) str() error {
	c.pos++
	c.out = append(c.out, '"')
	for {
		i := c.pos
		for i < len(c.in) {
			b := c.in[i]
			if b < 0x20 || b == '"' || b == '\\' || b >= utf8.RuneSelf {
				break
			}
			i++
		}
		c.out = append(c.out, c.in[c.pos:i]...)
		c.pos = i
		if c.pos >= len(c.in) {
			return c.errf("unterminated string")
		}
		switch b := c.in[c.pos]; {
		case b == '"':
			c.pos++
			c.out = append(c.out, '"')
			return nil
		case b < 0x20:
			return c.errf("control character in a string")
		case b >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(c.in[c.pos:])
			if r == utf8.RuneError && n <= 1 {
				return c.errf("invalid UTF-8")
			}
			c.out = append(c.out, c.in[c.pos:c.pos+n]...)
			c.pos += n
		default: // '\\'
			if c.pos+1 >= len(c.in) {
				return c.errf("unterminated escape")
			}
			e := c.in[c.pos+1]
			c.pos += 2
			var r rune
			switch e {
			case '"', '\\', '/':
				r = rune(e)
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			case 'u':
				h, ok := c.hex4()
				if !ok {
					return c.errf("invalid \\u escape")
				}
				r = h
				if h >= 0xD800 && h < 0xDC00 {
					if c.pos+1 >= len(c.in) || c.in[c.pos] != '\\' || c.in[c.pos+1] != 'u' {
						return c.errf("unpaired surrogate")
					}
					c.pos += 2
					lo, ok := c.hex4()
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						return c.errf("unpaired surrogate")
					}
					r = 0x10000 + (h-0xD800)<<10 + (lo - 0xDC00)
				} else if h >= 0xDC00 && h <= 0xDFFF {
					return c.errf("unpaired surrogate")
				}
			default:
				return c.errf("invalid escape \\%c", e)
			}
			c.appendRune(r)
		}
	}
}

func (c *canon) hex4() (rune, bool) {
	if c.pos+4 > len(c.in) {
		return 0, false
	}
	var r rune
	for _, b := range c.in[c.pos : c.pos+4] {
		switch {
		case b >= '0' && b <= '9':
			r = r<<4 | rune(b-'0')
		case b >= 'a' && b <= 'f':
			r = r<<4 | rune(b-'a'+10)
		case b >= 'A' && b <= 'F':
			r = r<<4 | rune(b-'A'+10)
		default:
			return 0, false
		}
	}
	c.pos += 4
	return r, true
}

const hexDigits = "0123456789abcdef"

func (c *canon) appendRune(r rune) {
	switch {
	case r == '"' || r == '\\':
		c.out = append(c.out, '\\', byte(r))
	case r < 0x20:
		c.out = append(c.out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xF])
	default:
		c.out = utf8.AppendRune(c.out, r)
	}
}

// number writes the number at c.pos exactly, as its decimal value: "0" for
// any zero (the sign of a zero dropped), else an optional '-', the
// significant digits without leading or trailing zeros, 'e' and the
// exponent in decimal (1, 1.0 and 10e-1 are all "1e0"; 0.5 is "5e-1").
// Numerically equal literals give the same form, distinct values distinct
// forms, and no value passes through a float64.
func (c *canon) number() error {
	in := c.in
	p := c.pos
	start := len(c.out)
	if in[p] == '-' {
		p++
		c.out = append(c.out, '-')
	}
	digits := len(c.out)
	if p >= len(in) || in[p] < '0' || in[p] > '9' {
		c.pos = p
		return c.errf("invalid number")
	}
	if in[p] == '0' {
		p++
	} else {
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			if in[p] != '0' || len(c.out) > digits {
				c.out = append(c.out, in[p])
			}
			p++
		}
	}
	frac := 0
	if p < len(in) && in[p] == '.' {
		p++
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			c.pos = p
			return c.errf("invalid number: no digit after .")
		}
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			if in[p] != '0' || len(c.out) > digits {
				c.out = append(c.out, in[p])
			}
			frac++
			p++
		}
	}
	var exp int64
	if p < len(in) && (in[p] == 'e' || in[p] == 'E') {
		p++
		eneg := false
		if p < len(in) && (in[p] == '+' || in[p] == '-') {
			eneg = in[p] == '-'
			p++
		}
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			c.pos = p
			return c.errf("invalid number: no digit in the exponent")
		}
		n := 0
		for p < len(in) && in[p] >= '0' && in[p] <= '9' {
			if n > 0 || in[p] != '0' {
				n++
				if n > maxExpDigits {
					c.pos = p
					return fmt.Errorf("%w: number exponent too large at offset %d", ErrUncacheable, p)
				}
				exp = exp*10 + int64(in[p]-'0')
			}
			p++
		}
		if eneg {
			exp = -exp
		}
	}
	c.pos = p
	// Trailing zeros of the significant digits move into the exponent.
	end := len(c.out)
	for end > digits && c.out[end-1] == '0' {
		end--
	}
	if end == digits {
		c.out = append(c.out[:start], '0')
		return nil
	}
	exp += int64(len(c.out)-end) - int64(frac)
	c.out = append(c.out[:end], 'e')
	c.out = strconv.AppendInt(c.out, exp, 10)
	return nil
}
