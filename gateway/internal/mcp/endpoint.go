package mcp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The older HTTP+SSE transport (MCP 2024-11-05): a client GETs the
// server's event stream, whose first event, "endpoint", carries the URI
// reference the client POSTs its messages to (the session lives in it,
// typically as a query parameter). The gateway rewrites that event so
// the client POSTs to the gateway, with the server's path and query in a
// token of the gateway's message URL; any replica then forwards a POST to
// the server's configured origin and the path the token carries, with no
// state of its own (docs/adr/0029-mcp-gateway.md).

// MaxEndpointTarget bounds a server's message path and query: what the
// gateway puts on a request line, and the token's length in its URL.
const MaxEndpointTarget = 4096

// ErrEndpoint is the cause of an endpoint the gateway refuses: one on
// another origin than the server's configured URL (nothing the server
// says may send the gateway elsewhere), not a URI reference, or a path
// no request line can carry.
var ErrEndpoint = errors.New("mcp: the server's endpoint is refused")

// ResolveEndpoint resolves a server's endpoint event data ref against
// its configured URL base and returns the request target to POST to on
// base's origin: the path (escaped, "/" when empty) and the query. An
// endpoint on another origin (scheme, host or port) is refused.
func ResolveEndpoint(base *url.URL, ref string) (string, error) {
	u, err := base.Parse(strings.TrimSpace(ref))
	if err != nil {
		return "", fmt.Errorf("%w: not a URI reference", ErrEndpoint)
	}
	if !sameOrigin(base, u) || u.User != nil {
		return "", fmt.Errorf("%w: %s://%s is not the server's origin %s://%s", ErrEndpoint, u.Scheme, u.Host, base.Scheme, base.Host)
	}
	target := u.EscapedPath()
	if target == "" {
		target = "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		target += "?" + u.RawQuery
	}
	if !validTarget(target) {
		return "", fmt.Errorf("%w: the path is not one a request line can carry", ErrEndpoint)
	}
	return target, nil
}

// sameOrigin compares two absolute URLs' origins: scheme, host (in any
// case) and port, a missing port being the scheme's default.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// validTarget accepts an origin-form request target: a path starting
// with '/', of printable ASCII without spaces (EscapedPath and a query
// the server sent escaped), at most MaxEndpointTarget bytes, without a
// fragment.
func validTarget(t string) bool {
	if len(t) == 0 || len(t) > MaxEndpointTarget || t[0] != '/' {
		return false
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// AppendEndpointToken appends to dst the token of a request target: its
// base64url encoding (no padding), safe in a query parameter. The token
// is not secret nor signed: a client that forges one reaches another path
// on the same origin, never another origin.
func AppendEndpointToken(dst []byte, target string) []byte {
	return base64.RawURLEncoding.AppendEncode(dst, []byte(target))
}

// ParseEndpointToken is the request target a token carries, checked as
// ResolveEndpoint checks one. ErrEndpoint when it is not a token the
// gateway could have issued.
func ParseEndpointToken(tok []byte) (string, error) {
	if len(tok) == 0 || len(tok) > base64.RawURLEncoding.EncodedLen(MaxEndpointTarget) {
		return "", ErrEndpoint
	}
	b, err := base64.RawURLEncoding.AppendDecode(nil, tok)
	if err != nil || !validTarget(string(b)) {
		return "", ErrEndpoint
	}
	return string(b), nil
}

// RewriteEndpointEvent appends to dst the server-sent event ev (its lines
// up to and including the blank line ending it, CutEvent) with its data
// replaced by the gateway's message URL for it: messageURL followed by
// the token of the server's endpoint resolved against base, which is
// returned as target. target "" (and dst as it was) when ev is not an
// "endpoint" event with data (one without is not dispatched to a
// client); err (ErrEndpoint) when the gateway refuses it. The event's other lines (id, retry, comments) are
// kept in place.
//
// An event holding a CR not followed by LF is refused whatever its type:
// the SSE spec ends a line there, CutEvent does not, so a client could
// read an endpoint event in what the gateway read as another one — and
// POST its gateway key wherever it says.
func RewriteEndpointEvent(dst, ev []byte, base *url.URL, messageURL string) (_ []byte, target string, err error) {
	if i := bytes.IndexByte(ev, '\r'); i >= 0 && bareCR(ev[i:]) {
		return dst, "", fmt.Errorf("%w: an event has a CR line end", ErrEndpoint)
	}
	var data []byte
	endpoint := false
	for rest := ev; len(rest) > 0; {
		var line []byte
		line, rest = cutLine(rest)
		if d, ok := dataField(line); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(append(data, d...), 0)[:len(data)+len(d)] // non-nil, even empty
		} else if name, ok := field(line, "event"); ok {
			endpoint = string(name) == "endpoint" // the last event field counts
		}
	}
	if !endpoint || data == nil {
		return dst, "", nil
	}
	if target, err = ResolveEndpoint(base, string(data)); err != nil {
		return dst, "", err
	}
	wrote := false
	for rest := ev; len(rest) > 0; {
		n := len(rest)
		var line []byte
		line, rest = cutLine(rest)
		if _, ok := dataField(line); ok {
			if !wrote {
				dst = append(append(dst, "data: "...), messageURL...)
				dst = append(AppendEndpointToken(dst, target), '\n')
				wrote = true
			}
			continue
		}
		dst = append(dst, ev[len(ev)-n:len(ev)-len(rest)]...)
	}
	return dst, target, nil
}

// bareCR reports whether b holds a CR not followed by LF.
func bareCR(b []byte) bool {
	for i, c := range b {
		if c == '\r' && (i+1 == len(b) || b[i+1] != '\n') {
			return true
		}
	}
	return false
}
