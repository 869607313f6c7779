package anthropic

import (
	"strconv"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// JSON writing. Every string this package writes goes through
// appendString, which yields valid JSON whatever the input bytes: fastjson's
// own encoder is not used because it writes Go escapes such as \x01 for
// control characters, which JSON does not have.

const hexDigits = "0123456789abcdef"

// appendString appends s as a quoted JSON string.
func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendEscaped appends s escaped for the inside of a JSON string: '"',
// '\\' and control characters are escaped, U+2028 and U+2029 too (so the
// result is also safe inside JavaScript), and invalid UTF-8 becomes
// U+FFFD. It does not allocate unless dst must grow.
func appendEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// decodeRune is utf8.DecodeRune for strings and byte slices alike.
func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	var b [utf8.UTFMax]byte
	n := copy(b[:], s)
	return utf8.DecodeRune(b[:n])
}

// appendValue appends v re-encoded as compact JSON. Strings and keys are
// re-escaped with appendString; numbers are copied as written, so v must
// come from input that passed fastjson.Validate (the lenient parser alone
// accepts "nan" and "+1").
func appendValue(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		first := true
		o.Visit(func(key []byte, vv *fastjson.Value) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, key)
			dst = append(dst, ':')
			dst = appendValue(dst, vv)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		a, _ := v.Array()
		dst = append(dst, '[')
		for i, vv := range a {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, vv)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return appendString(dst, s)
	default: // numbers, true, false, null
		return v.MarshalTo(dst)
	}
}

// isNull reports an absent or null member.
func isNull(v *fastjson.Value) bool {
	return v == nil || v.Type() == fastjson.TypeNull
}

// stringOf returns v's unescaped string and true, or nil and false when v
// is not a string.
func stringOf(v *fastjson.Value) ([]byte, bool) {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil, false
	}
	s, _ := v.StringBytes()
	return s, true
}

// appendUsage appends the OpenAI usage object for u.
func appendUsage(dst []byte, u Usage) []byte {
	prompt := u.PromptTokens()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, prompt, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.OutputTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, prompt+u.OutputTokens, 10)
	if u.CacheReadInputTokens > 0 {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheReadInputTokens, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}
