package openai

import (
	"encoding/binary"
	"errors"

	"github.com/valyala/fastjson"
)

// rawControlInString reports whether body, valid JSON to fastjson, holds a
// raw control character (U+0000 to U+001F) inside a string, which JSON
// forbids. fastjson's validator (v1.6.10) misses one that comes before an
// escape sequence in the same string: it checks only what follows the
// last escape. Bodies without any control byte — what SDKs send — cost one
// word-at-a-time pass; others (pretty-printed JSON) a scan of the strings.
func rawControlInString(body []byte) bool {
	if !hasControlByte(body) {
		return false
	}
	in, esc := false, false
	for _, c := range body {
		switch {
		case esc:
			esc = false
		case !in:
			in = c == '"'
		case c == '\\':
			esc = true
		case c == '"':
			in = false
		case c < 0x20:
			return true
		}
	}
	return false
}

// hasControlByte reports whether b holds a byte below 0x20, eight bytes
// at a time: (x - 0x20…20) &^ x & 0x80…80 is non-zero exactly when a byte
// of x is below 0x20.
func hasControlByte(b []byte) bool {
	for len(b) >= 8 {
		x := binary.LittleEndian.Uint64(b)
		if (x-0x2020202020202020)&^x&0x8080808080808080 != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// errRawControl is ValidateJSON's complaint about a raw control character.
var errRawControl = errors.New("a string contains a raw control character (escape it, e.g. \\n)")

// ValidateJSON reports whether b is valid JSON: fastjson.ValidateBytes, and
// no raw control character inside a string, which that validator misses
// before an escape sequence (rawControlInString). Every parser of a body or
// of a JSON value a client or an upstream sent validates with it.
func ValidateJSON(b []byte) error {
	if err := fastjson.ValidateBytes(b); err != nil {
		return err
	}
	if rawControlInString(b) {
		return errRawControl
	}
	return nil
}
