package convo

import (
	"unicode/utf8"
)

// A TextSpan is where a record's TEXT lies in the body: the byte range of
// the one JSON string literal, quotes included, that it was decoded from.
// Start is -1 for a record whose TEXT is not one string literal (an
// Anthropic tool_use's input, which is raw JSON; a tool result
// concatenated from several parts or copies; a part with no text at all):
// such a TEXT cannot be replaced in place.
type TextSpan struct{ Start, End int }

// Rewritable reports whether the span names a string literal.
func (sp TextSpan) Rewritable() bool { return sp.Start >= 0 && sp.End > sp.Start }

// Splice appends to dst body with the string literal at sp replaced by
// text encoded as a JSON string, and returns it. sp must be a rewritable
// span of body, as AppendSpans gave it; text should be valid UTF-8 (an
// invalid byte is written as U+FFFD, so the result stays valid JSON).
// Only the literal changes: the rest of body is copied byte for byte.
func Splice(dst, body []byte, sp TextSpan, text string) []byte {
	dst = append(dst, body[:sp.Start]...)
	dst = AppendString(dst, text)
	return append(dst, body[sp.End:]...)
}

const hexDigits = "0123456789abcdef"

// AppendString appends text to dst as a JSON string literal: quote and
// backslash escaped, control characters as \n, \r, \t or \u00XX, U+2028
// and U+2029 as \u2028 and \u2029 (JavaScript's line terminators), an
// invalid UTF-8 byte as \ufffd; everything else as it is. It decodes, as
// encoding/json decodes, to text (with U+FFFD for invalid bytes).
func AppendString(dst []byte, text string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, text[start:i]...)
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
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, text[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, text[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, text[start:]...)
	return append(dst, '"')
}
