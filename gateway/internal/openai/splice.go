package openai

import (
	"bytes"
	"errors"
)

// ErrNotObject is returned by AppendWithIncludeUsage when the body is not a
// well-formed JSON object.
var ErrNotObject = errors.New("openai: body is not a well-formed JSON object")

// includeUsagePath is the member path AppendWithIncludeUsage sets to true.
var includeUsagePath = []string{"stream_options", "include_usage"}

// AppendWithIncludeUsage appends to dst a copy of body in which
// stream_options.include_usage is true, and returns the extended slice.
//
// body must be a JSON object that RequestParser.Parse accepted; the result
// is then valid JSON equal in meaning to body plus that field. A single
// structural pass over the top-level members (values are skipped, never
// decoded) finds the "stream_options" keys, also when written with \u
// escapes. All other bytes are copied verbatim, never re-encoded:
//   - without a "stream_options" member (the common case), the member
//     "stream_options":{"include_usage":true} is spliced in before the final
//     '}';
//   - otherwise every "stream_options" member is rewritten in place: an
//     object gets each "include_usage" value replaced by true (or the
//     member added), any other value (null) becomes {"include_usage":true}.
//     Rewriting every occurrence keeps the result unambiguous whichever
//     duplicate a decoder picks.
//
// On malformed input it returns dst unchanged and ErrNotObject; it checks
// structure as it goes but is not a validator. It does not allocate
// unless dst must grow.
func AppendWithIncludeUsage(dst, body []byte) ([]byte, error) {
	start := skipSpace(body, 0)
	end := len(body)
	for end > start && isSpace(body[end-1]) {
		end--
	}
	if end-start < 2 || body[start] != '{' || body[end-1] != '}' {
		return dst, ErrNotObject
	}
	out := append(dst, body[:start]...)
	out, ok := appendSet(out, body[start:end], includeUsagePath)
	if !ok {
		return dst, ErrNotObject
	}
	return append(out, body[end:]...), nil
}

// appendSet appends obj, a JSON object spanning exactly '{' to '}', with
// every member path[0] rewritten so that the path ends in true; it adds the
// member when absent. ok is false if obj is malformed.
func appendSet(dst, obj []byte, path []string) ([]byte, bool) {
	i := skipSpace(obj, 1)
	if i >= len(obj) {
		return dst, false
	}
	if obj[i] == '}' {
		dst = append(dst, obj[:i]...)
		dst = appendMember(dst, path)
		return append(dst, obj[i:]...), true
	}
	copied, found := 0, false
	for {
		keyEnd, vs, ve, ok := member(obj, i)
		if !ok {
			return dst, false
		}
		if keyEquals(obj[i+1:keyEnd-1], path[0]) {
			found = true
			dst = append(dst, obj[copied:vs]...)
			switch {
			case len(path) == 1:
				dst = append(dst, "true"...)
			case obj[vs] == '{':
				if dst, ok = appendSet(dst, obj[vs:ve], path[1:]); !ok {
					return dst, false
				}
			default:
				dst = appendFreshValue(dst, path[1:])
			}
			copied = ve
		}
		var more bool
		if i, more, ok = afterMember(obj, ve); !ok {
			return dst, false
		}
		if !more {
			break
		}
	}
	if i != len(obj)-1 {
		return dst, false
	}
	if found {
		return append(dst, obj[copied:]...), true
	}
	dst = append(dst, obj[copied:i]...)
	dst = append(dst, ',')
	dst = appendMember(dst, path)
	return append(dst, obj[i:]...), true
}

// member reads the object member `"key": value` starting at obj[i]: the
// end of its key string and the bounds of its value; ok is false when obj
// has no well-formed member there.
func member(obj []byte, i int) (keyEnd, vs, ve int, ok bool) {
	if obj[i] != '"' {
		return 0, 0, 0, false
	}
	if keyEnd = skipString(obj, i); keyEnd < 0 {
		return 0, 0, 0, false
	}
	colon := skipSpace(obj, keyEnd)
	if colon >= len(obj) || obj[colon] != ':' {
		return 0, 0, 0, false
	}
	vs = skipSpace(obj, colon+1)
	ve = skipValue(obj, vs)
	return keyEnd, vs, ve, ve >= 0
}

// afterMember reads what follows a member's value, which ends at ve: after
// a comma, the index of the next member and more; at the object's closing
// brace, its index and not more; ok is false on anything else.
func afterMember(obj []byte, ve int) (i int, more, ok bool) {
	i = skipSpace(obj, ve)
	switch {
	case i >= len(obj):
		return i, false, false
	case obj[i] == '}':
		return i, false, true
	case obj[i] != ',':
		return i, false, false
	}
	i = skipSpace(obj, i+1)
	return i, true, i < len(obj)
}

// appendMember appends "path[0]":<fresh value for path[1:]>. Path elements
// are plain ASCII names that need no escaping.
func appendMember(dst []byte, path []string) []byte {
	dst = append(dst, '"')
	dst = append(dst, path[0]...)
	dst = append(dst, '"', ':')
	return appendFreshValue(dst, path[1:])
}

// appendFreshValue appends true for an empty path, else {<member>}.
func appendFreshValue(dst []byte, path []string) []byte {
	if len(path) == 0 {
		return append(dst, "true"...)
	}
	dst = append(dst, '{')
	dst = appendMember(dst, path)
	return append(dst, '}')
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// skipSpace returns the index of the first non-whitespace byte at or after
// i, or len(b).
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the JSON string starting with the
// quote at b[i], or -1 if it is unterminated.
func skipString(b []byte, i int) int {
	i++
	// Most strings are short keys and values: look at them byte by byte
	// before paying for IndexByte calls.
	for n := min(i+16, len(b)); i < n; i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	for i <= len(b) {
		n := bytes.IndexByte(b[i:], '"')
		if n < 0 {
			return -1
		}
		q := i + n
		k := q
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
	return -1
}

// structural marks the bytes skipValue must look at inside containers.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipValue returns the index just past the JSON value starting at b[i], or
// -1 if it is malformed or truncated. Scalars are delimited, not checked.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			if !structural[b[i]] {
				i++
				continue
			}
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	case '}', ']', ',', ':':
		return -1
	}
	start := i
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ':', '"', '{', '[', ' ', '\t', '\n', '\r':
			if i == start {
				return -1
			}
			return i
		}
		i++
	}
	return i
}

// keyEquals reports whether the raw (still escaped) JSON string content raw
// decodes to the ASCII string lit.
func keyEquals(raw []byte, lit string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == lit
	}
	j := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			i++
		} else {
			if i+1 >= len(raw) {
				return false
			}
			switch e := raw[i+1]; e {
			case '"', '\\', '/':
				c = e
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'u':
				if i+6 > len(raw) {
					return false
				}
				r, ok := hex4(raw[i+2 : i+6])
				if !ok || r >= 0x80 {
					return false // lit is ASCII
				}
				c = byte(r)
				i += 4
			default:
				return false
			}
			i += 2
		}
		if j >= len(lit) || lit[j] != c {
			return false
		}
		j++
	}
	return j == len(lit)
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
