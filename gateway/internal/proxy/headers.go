package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// alwaysForwarded are the client headers every upstream receives.
var alwaysForwarded = []string{"content-type", "accept", "user-agent", "openai-beta"}

// headerFilter decides which client headers reach one upstream. Names are
// lower case; patterns are path.Match globs over lower-case names.
type headerFilter struct {
	names    map[string]struct{}
	patterns []string
	// withheld are names no pattern lets through either (see withhold).
	withheld map[string]struct{}
}

func newHeaderFilter(forward []string) *headerFilter {
	f := &headerFilter{names: make(map[string]struct{})}
	for _, n := range alwaysForwarded {
		f.names[n] = struct{}{}
	}
	for _, h := range forward {
		h = strings.ToLower(h)
		if isGlob(h) {
			f.patterns = append(f.patterns, h)
		} else {
			f.names[h] = struct{}{}
		}
	}
	for n := range neverForwarded {
		delete(f.names, n)
	}
	return f
}

// neverForwarded are credentials and framing: the gateway's own, whatever
// the policy says.
var neverForwarded = map[string]struct{}{
	"authorization": {}, "proxy-authorization": {}, "cookie": {}, "host": {}, "content-length": {},
	"transfer-encoding": {}, "connection": {}, "keep-alive": {}, "te": {}, "trailer": {}, "upgrade": {},
	"x-api-key": {}, "api-key": {}, "x-request-id": {}, "accept-encoding": {}, "expect": {},
}

func (f *headerFilter) allows(lower []byte) bool {
	if _, ok := f.names[string(lower)]; ok {
		return true
	}
	if len(f.patterns) == 0 {
		return false
	}
	s := string(lower)
	if _, never := neverForwarded[s]; never {
		return false
	}
	if _, own := f.withheld[s]; own {
		return false
	}
	for _, p := range f.patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// withhold keeps the client headers names (lower case) from the upstream
// whatever the policy lists: headers the gateway sets itself. Call it
// before the filter is used.
func (f *headerFilter) withhold(names ...string) {
	if f.withheld == nil {
		f.withheld = make(map[string]struct{}, len(names))
	}
	for _, n := range names {
		delete(f.names, n)
		f.withheld[n] = struct{}{}
	}
}

// appendForwarded appends the allowed client headers as "Name: value\r\n"
// lines, leaving out those named in override (set by plugins). fasthttp
// has already rejected CR, LF and NUL in header values.
func (f *headerFilter) appendForwarded(dst []byte, h *fasthttp.RequestHeader, scratch []byte, override []wasmhost.Header) ([]byte, []byte) {
	for k, v := range h.All() {
		scratch = append(scratch[:0], k...)
		lowerASCII(scratch)
		if !f.allows(scratch) || overridden(scratch, override) {
			continue
		}
		dst = append(dst, k...)
		dst = append(dst, ": "...)
		dst = append(dst, v...)
		dst = append(dst, "\r\n"...)
	}
	return dst, scratch
}

func overridden(lower []byte, set []wasmhost.Header) bool {
	for _, h := range set {
		if bytes.EqualFold(h.Name, lower) {
			return true
		}
	}
	return false
}

func lowerASCII(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// requestIDs makes request ids: a random per-process prefix and a counter,
// unique across replicas without a syscall per request.
type requestIDs struct {
	prefix []byte
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: append([]byte("req_"), hex.EncodeToString(b[:])...)}
}

func (g *requestIDs) append(dst []byte) []byte {
	dst = append(dst, g.prefix...)
	dst = append(dst, '_')
	return strconv.AppendUint(dst, g.n.Add(1), 36)
}

// validRequestID accepts a client's X-Request-Id when it is 1–128
// characters of [A-Za-z0-9._:-]; anything else is replaced.
func validRequestID(b []byte) bool {
	if len(b) == 0 || len(b) > 128 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}
