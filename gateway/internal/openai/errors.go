package openai

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Error types used in the "type" field of error bodies.
const (
	// TypeInvalidRequest marks a client error: bad body, unknown model, ...
	TypeInvalidRequest = "invalid_request_error"
	// TypeServer marks a failure inside the gateway.
	TypeServer = "server_error"
	// TypeUpstream marks a failure to get an answer from the upstream.
	TypeUpstream = "upstream_error"
	// TypeInsufficientQuota marks a request refused by a quota or budget.
	TypeInsufficientQuota = "insufficient_quota"
)

// Error is the one error type that becomes an OpenAI-style error body at the
// edge. The gateway answers with status Status and the body AppendJSON
// produces. Constructors below cover the common cases; a literal is fine
// for others.
type Error struct {
	Status  int    // HTTP status code
	Type    string // e.g. "invalid_request_error", "server_error", "insufficient_quota"
	Code    string // machine-readable code; rendered as null when empty
	Param   string // offending request parameter; rendered as null when empty
	Message string // human-readable message, shown to the client as is
}

// Error returns "<type> (<status>): <message>" for logs.
func (e *Error) Error() string {
	return e.Type + " (" + strconv.Itoa(e.Status) + "): " + e.Message
}

// AppendJSON appends the OpenAI error body
//
//	{"error":{"message":...,"type":...,"param":...,"code":...}}
//
// to dst and returns the extended slice. Strings are escaped as JSON
// strings (invalid UTF-8 becomes U+FFFD); empty Param and Code render as
// null. It does not allocate unless dst must grow.
func (e *Error) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = AppendJSONString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = AppendJSONString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, e.Code)
	return append(dst, "}}"...)
}

func appendStringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendJSONString(dst, s)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as a quoted JSON string to dst; see
// AppendJSONEscaped.
func AppendJSONString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	dst = AppendJSONEscaped(dst, s)
	return append(dst, '"')
}

// AppendJSONEscaped appends s escaped for the inside of a JSON string: '"',
// '\\' and control characters are escaped, U+2028 and U+2029 too (so the
// result is also safe inside JavaScript), and invalid UTF-8 becomes U+FFFD:
// the result is valid JSON whatever the input bytes. It does not allocate
// unless dst must grow.
func AppendJSONEscaped[S ~string | ~[]byte](dst []byte, s S) []byte {
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

// BadRequest returns a 400 invalid_request_error about parameter param
// (may be "") with a message formatted like fmt.Sprintf (used verbatim when
// no args are given). Code is left empty.
func BadRequest(param, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Param: param, Message: msg}
}

// NotFoundModel returns the 404 for a model the gateway does not route,
// with code "model_not_found".
func NotFoundModel(model string) *Error {
	return &Error{
		Status:  http.StatusNotFound,
		Type:    TypeInvalidRequest,
		Code:    "model_not_found",
		Message: "The model `" + model + "` does not exist or is not routed by this gateway.",
	}
}

// TooLarge returns the 413 for a request body longer than limit bytes,
// with code "request_too_large".
func TooLarge(limit int) *Error {
	return &Error{
		Status:  http.StatusRequestEntityTooLarge,
		Type:    TypeInvalidRequest,
		Code:    "request_too_large",
		Message: "The request body is too large: the limit is " + strconv.Itoa(limit) + " bytes.",
	}
}

// UpstreamUnreachable returns the 502 for an upstream that could not be
// reached or answered garbage, with code "upstream_unreachable".
func UpstreamUnreachable(msg string) *Error {
	return &Error{Status: http.StatusBadGateway, Type: TypeUpstream, Code: "upstream_unreachable", Message: msg}
}

// UpstreamTimeout returns the 504 for an upstream that did not answer in
// time, with code "upstream_timeout".
func UpstreamTimeout(msg string) *Error {
	return &Error{Status: http.StatusGatewayTimeout, Type: TypeUpstream, Code: "upstream_timeout", Message: msg}
}

// Internal returns a 500 server_error with no code.
func Internal(msg string) *Error {
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Message: msg}
}
