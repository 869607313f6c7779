package anthropic

import (
	"errors"
	"strings"
)

// Wire constants of the Messages API.
const (
	// DefaultVersion is the anthropic-version header value the gateway
	// sends unless configured otherwise.
	DefaultVersion = "2023-06-01"
	// MessagesPath is the request path below the API root
	// (https://api.anthropic.com/v1), for translated and native requests.
	MessagesPath = "/messages"
)

// ErrBadHeaderValue is returned by AppendUpstreamHeaders for a key or
// version that cannot be sent in a header.
var ErrBadHeaderValue = errors.New("anthropic: header value contains CR, LF or NUL")

// AppendUpstreamHeaders appends the header lines every request to an
// Anthropic upstream carries, each ending in CRLF, in the form
// upstream.Request.Header and the upstream client's static headers use:
//
//	x-api-key: <apiKey>
//	anthropic-version: <version>
//
// An empty version means DefaultVersion; an empty apiKey writes no
// x-api-key line. Anthropic does not read "Authorization: Bearer", so the
// upstream client must send this instead of it. The request body must go
// with "content-type: application/json" (which the client's own
// Content-Type already is for any body the gateway accepted). On
// ErrBadHeaderValue dst is returned unchanged.
func AppendUpstreamHeaders(dst []byte, apiKey, version string) ([]byte, error) {
	if version == "" {
		version = DefaultVersion
	}
	if strings.ContainsAny(apiKey, "\r\n\x00") || strings.ContainsAny(version, "\r\n\x00") {
		return dst, ErrBadHeaderValue
	}
	if apiKey != "" {
		dst = append(dst, "x-api-key: "...)
		dst = append(dst, apiKey...)
		dst = append(dst, "\r\n"...)
	}
	dst = append(dst, "anthropic-version: "...)
	dst = append(dst, version...)
	return append(dst, "\r\n"...), nil
}
