package mcp

import (
	"strconv"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Refusal is what a refused request's JSON-RPC error carries in data: the
// HTTP status, type and code the same refusal has on the gateway's other
// endpoints, so a client (or its operator) reads one vocabulary.
type Refusal struct {
	Status int
	Type   string
	Code   string
	// RetryAfter is the seconds to wait before retrying a 429 (0: not
	// said), the Retry-After header's value elsewhere.
	RetryAfter int64
}

// AppendError appends a JSON-RPC error response to dst: id is the
// request's id as sent (empty: null, for a message that had none or could
// not be read), data the refusal behind it (nil: none).
func AppendError(dst, id []byte, code int, message string, data *Refusal) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":`...)
	dst = openai.AppendJSONString(dst, message)
	if data != nil {
		dst = append(dst, `,"data":{"status":`...)
		dst = strconv.AppendInt(dst, int64(data.Status), 10)
		if data.Type != "" {
			dst = append(dst, `,"type":`...)
			dst = openai.AppendJSONString(dst, data.Type)
		}
		if data.Code != "" {
			dst = append(dst, `,"code":`...)
			dst = openai.AppendJSONString(dst, data.Code)
		}
		if data.RetryAfter > 0 {
			dst = append(dst, `,"retry_after":`...)
			dst = strconv.AppendInt(dst, data.RetryAfter, 10)
		}
		dst = append(dst, '}')
	}
	return append(dst, "}}"...)
}

// RefusalCode is the JSON-RPC error code of a refusal with HTTP status:
// CodeUnavailable for the gateway's and the server's failures (5xx),
// CodeRefused for every other refusal (a plan, a limit, a budget, a
// guard, a cancel).
func RefusalCode(status int) int {
	if status >= 500 {
		return CodeUnavailable
	}
	return CodeRefused
}
