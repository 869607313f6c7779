package mcp

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

// EndpointKey signs the tokens of the gateway's message URLs and checks
// them: a token is its request target (base64url, no padding), '.', and
// the first 16 bytes of HMAC-SHA256(key, server NUL target) (base64url),
// so a client can POST only where a server's endpoint event pointed —
// not to another path of the server, with the server's credentials the
// gateway adds, and not with another server's token. Replicas accept each
// other's tokens when they share the key (mcp.endpoint_key); a random key
// is this process's alone. Safe for concurrent use.
type EndpointKey struct{ k [32]byte }

// NewEndpointKey derives a key from secret (SHA-256), or makes a random
// one when secret is empty.
func NewEndpointKey(secret string) *EndpointKey {
	k := &EndpointKey{}
	if secret == "" {
		if _, err := rand.Read(k.k[:]); err != nil {
			panic("mcp: no randomness for an endpoint key: " + err.Error())
		}
		return k
	}
	k.k = sha256.Sum256([]byte("tollgate mcp endpoint\x00" + secret))
	return k
}

// strictB64 reads a token's parts: one encoding per value (the unused
// bits of the last character must be zero).
var strictB64 = base64.RawURLEncoding.Strict()

// tokenMAC is the length of a token's MAC, in bytes.
const tokenMAC = 16

func (k *EndpointKey) mac(dst []byte, server, target string) []byte {
	m := hmac.New(sha256.New, k.k[:])
	m.Write([]byte(server))
	m.Write([]byte{0})
	m.Write([]byte(target))
	return m.Sum(dst)[:len(dst)+tokenMAC]
}

// AppendToken appends to dst the token of a request target of server,
// safe in a query parameter.
func (k *EndpointKey) AppendToken(dst []byte, server, target string) []byte {
	dst = base64.RawURLEncoding.AppendEncode(dst, []byte(target))
	dst = append(dst, '.')
	var buf [sha256.Size]byte
	return base64.RawURLEncoding.AppendEncode(dst, k.mac(buf[:0], server, target))
}

// ParseToken is the request target a token of server carries, checked as
// ResolveEndpoint checks one. ErrEndpoint when it is not a token this key
// signed for server (the MAC is compared in constant time).
func (k *EndpointKey) ParseToken(tok []byte, server string) (string, error) {
	i := bytes.LastIndexByte(tok, '.')
	if i <= 0 || len(tok) > base64.RawURLEncoding.EncodedLen(MaxEndpointTarget)+1+base64.RawURLEncoding.EncodedLen(tokenMAC) {
		return "", ErrEndpoint
	}
	for j, c := range tok {
		// The alphabet only: the decoder would skip CR and LF.
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && j == i) {
			return "", ErrEndpoint
		}
	}
	b, err := strictB64.AppendDecode(nil, tok[:i])
	if err != nil || !validTarget(string(b)) {
		return "", ErrEndpoint
	}
	var got, want [sha256.Size]byte
	sig, err := strictB64.AppendDecode(got[:0], tok[i+1:])
	if err != nil || !hmac.Equal(sig, k.mac(want[:0], server, string(b))) {
		return "", ErrEndpoint
	}
	return string(b), nil
}

// RewriteEndpointEvent appends to dst the server-sent event ev (its lines
// up to and including the blank line ending it, CutEvent) with its data
// replaced by the gateway's message URL for it: messageURL followed by
// the token (key's, for server) of the server's endpoint resolved
// against base, which is returned as target. target "" (and dst as it was) when ev is not an
// "endpoint" event with data (one without is not dispatched to a
// client); err (ErrEndpoint) when the gateway refuses it. The event's other lines (id, retry, comments) are
// kept in place.
//
// An event holding a CR not followed by LF is refused whatever its type:
// the SSE spec ends a line there, CutEvent does not, so a client could
// read an endpoint event in what the gateway read as another one — and
// POST its gateway key wherever it says.
func RewriteEndpointEvent(dst, ev []byte, base *url.URL, messageURL string, key *EndpointKey, server string) (_ []byte, target string, err error) {
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
	url := key.AppendToken([]byte(messageURL), server, target) // one line: no CR or LF in either
	return AppendEvent(dst, ev, url), target, nil
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
