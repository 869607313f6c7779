package callout

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxCacheTTL bounds the TTL a `:cache` line may ask for.
const MaxCacheTTL = time.Hour

// Limits of the `http` request format.
const (
	maxMethodLen   = 16
	maxURLLen      = 8 << 10
	maxHeaderBytes = 8 << 10 // one header's name and value, as set_request_header
	maxHeaders     = 64
	maxCacheKeyLen = 512
)

// ErrBadRequest is wrapped by every error of ParseRequest.
var ErrBadRequest = errors.New("malformed http call request")

// Request is one parsed `http` service request (sdk/ABI.md, "Dispatched
// calls"):
//
//	METHOD SP URL LF
//	(NAME ": " VALUE LF)*
//	[":cache " TTL_MS SP KEY LF]
//	LF
//	BODY
//
// Its byte slices alias the bytes parsed.
type Request struct {
	Method, URL []byte
	Header      [][2][]byte
	// CacheKey is the `:cache` line's key (nil: not cached) and CacheTTL
	// its TTL, between 1ms and MaxCacheTTL.
	CacheKey []byte
	CacheTTL time.Duration
	Body     []byte
}

// ParseRequest parses b. Header names and values are checked as
// set_request_header checks them: RFC 9110 token names other than the
// framing headers the host owns (Host, Content-Length…), values without
// CR, LF or NUL.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	line, rest, ok := cutLine(b)
	if !ok {
		return r, fmt.Errorf("%w: no request line", ErrBadRequest)
	}
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return r, fmt.Errorf("%w: request line is not METHOD SP URL", ErrBadRequest)
	}
	r.Method, r.URL = line[:sp], line[sp+1:]
	if len(r.Method) > maxMethodLen || !isToken(r.Method) {
		return r, fmt.Errorf("%w: invalid method", ErrBadRequest)
	}
	if len(r.URL) == 0 || len(r.URL) > maxURLLen || !visible(r.URL) {
		return r, fmt.Errorf("%w: invalid URL (empty, too long, or with spaces or control bytes)", ErrBadRequest)
	}
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return r, fmt.Errorf("%w: no blank line before the body", ErrBadRequest)
		}
		if len(line) == 0 {
			r.Body = rest
			return r, nil
		}
		if r.CacheKey != nil {
			return r, fmt.Errorf("%w: the :cache line must be the last before the blank line", ErrBadRequest)
		}
		if bytes.HasPrefix(line, []byte(":cache ")) {
			if err := r.parseCache(line[len(":cache "):]); err != nil {
				return r, err
			}
			continue
		}
		if err := r.parseHeader(line); err != nil {
			return r, err
		}
	}
}

func (r *Request) parseHeader(line []byte) error {
	i := bytes.Index(line, []byte(": "))
	if i <= 0 {
		return fmt.Errorf("%w: header line is not NAME \": \" VALUE", ErrBadRequest)
	}
	name, val := line[:i], line[i+2:]
	if !ValidHeader(name, val) {
		return fmt.Errorf("%w: header %q is not allowed", ErrBadRequest, name)
	}
	if len(r.Header) == maxHeaders {
		return fmt.Errorf("%w: more than %d headers", ErrBadRequest, maxHeaders)
	}
	r.Header = append(r.Header, [2][]byte{name, val})
	return nil
}

func (r *Request) parseCache(b []byte) error {
	sp := bytes.IndexByte(b, ' ')
	if sp <= 0 {
		return fmt.Errorf("%w: :cache line is not TTL_MS SP KEY", ErrBadRequest)
	}
	ms, err := strconv.ParseUint(string(b[:sp]), 10, 32)
	if err != nil || ms == 0 || time.Duration(ms)*time.Millisecond > MaxCacheTTL || b[0] == '+' {
		return fmt.Errorf("%w: :cache TTL must be 1 to %d milliseconds", ErrBadRequest, MaxCacheTTL.Milliseconds())
	}
	key := b[sp+1:]
	if len(key) == 0 || len(key) > maxCacheKeyLen {
		return fmt.Errorf("%w: :cache key must be 1 to %d bytes", ErrBadRequest, maxCacheKeyLen)
	}
	r.CacheTTL, r.CacheKey = time.Duration(ms)*time.Millisecond, key
	return nil
}

// Append appends r in the request format to dst: the inverse of
// ParseRequest.
func (r *Request) Append(dst []byte) []byte {
	dst = append(dst, r.Method...)
	dst = append(dst, ' ')
	dst = append(dst, r.URL...)
	dst = append(dst, '\n')
	for _, h := range r.Header {
		dst = append(dst, h[0]...)
		dst = append(dst, ": "...)
		dst = append(dst, h[1]...)
		dst = append(dst, '\n')
	}
	if r.CacheKey != nil {
		dst = append(dst, ":cache "...)
		dst = strconv.AppendInt(dst, r.CacheTTL.Milliseconds(), 10)
		dst = append(dst, ' ')
		dst = append(dst, r.CacheKey...)
		dst = append(dst, '\n')
	}
	dst = append(dst, '\n')
	return append(dst, r.Body...)
}

func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, b, false
	}
	return b[:i], b[i+1:], true
}

// ValidHeader accepts RFC 9110 token names, except the framing headers
// the host owns, and values without CR, LF or NUL: the rule of the ABI's
// set_request_header, so a plugin cannot inject headers.
func ValidHeader(name, val []byte) bool {
	if len(name) == 0 || len(name)+len(val) > maxHeaderBytes || !isToken(name) {
		return false
	}
	switch string(bytes.ToLower(name)) {
	case "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer":
		return false
	}
	return bytes.IndexAny(val, "\r\n\x00") < 0
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

// visible reports whether b has only visible ASCII bytes (no space, no
// control byte).
func visible(b []byte) bool {
	for _, c := range b {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}
