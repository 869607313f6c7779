// Package allow owns the URL prefixes a policy grants a plugin's call-outs
// (plugins[].callout.allow): parsing a prefix, and deciding whether a
// target URL falls under it.
//
// Matching is on the parsed URL, never on the string: the scheme, host and
// port must be equal (a missing port is the scheme's default), and the
// target's path must start with the prefix's path at a segment boundary
// (a prefix /v1/mod allows /v1/mod and /v1/mod/x, not /v1/moderations).
// A target with userinfo, a fragment, dot segments ("." or "..", encoded
// or not) or a scheme other than http and https is refused whatever the
// prefixes, so a plugin cannot step out of a granted path or smuggle
// credentials.
package allow

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Prefix is one parsed allow entry. The zero Prefix allows nothing.
type Prefix struct {
	scheme, host, port string
	path               string // decoded, begins with "/"
	raw                string
}

// String returns the prefix as written in the policy.
func (p Prefix) String() string { return p.raw }

// Errors of Target.
var (
	ErrScheme   = errors.New("scheme must be http or https")
	ErrUserinfo = errors.New("must not carry userinfo")
	ErrFragment = errors.New("must not carry a fragment")
	ErrDotPath  = errors.New("path must not contain . or .. segments")
	ErrNoHost   = errors.New("must have a host")
)

// Parse parses an allow prefix: an absolute http or https URL without
// userinfo, query or fragment. An empty path is "/" (the whole host).
func Parse(s string) (Prefix, error) {
	u, err := parse(s)
	if err != nil {
		return Prefix{}, err
	}
	if u.RawQuery != "" || u.ForceQuery {
		return Prefix{}, fmt.Errorf("allow prefix %q: must not carry a query", s)
	}
	p := Prefix{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: port(u), path: u.Path, raw: s}
	if p.path == "" {
		p.path = "/"
	}
	if dotSegments(p.path) {
		return Prefix{}, fmt.Errorf("allow prefix %q: %w", s, ErrDotPath)
	}
	return p, nil
}

// Target parses a call-out's URL and checks what every target must be,
// whatever the prefixes.
func Target(s string) (*url.URL, error) {
	u, err := parse(s)
	if err != nil {
		return nil, err
	}
	if dotSegments(u.Path) {
		return nil, fmt.Errorf("url %q: %w", redact(s), ErrDotPath)
	}
	return u, nil
}

func parse(s string) (*url.URL, error) {
	if strings.ContainsAny(s, "#") {
		return nil, fmt.Errorf("url %q: %w", redact(s), ErrFragment)
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", redact(s), errors.Unwrap(err))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("url %q: %w", redact(s), ErrScheme)
	case u.User != nil || strings.Contains(u.Host, "@"):
		return nil, fmt.Errorf("url %q: %w", redact(s), ErrUserinfo)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("url %q: %w", redact(s), ErrNoHost)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || p[0] == '+' {
			return nil, fmt.Errorf("url %q: invalid port %q", redact(s), p)
		}
	}
	return u, nil
}

// Allows reports whether u, a URL Target accepted, is under p.
func (p Prefix) Allows(u *url.URL) bool {
	if p.raw == "" || u.Scheme != p.scheme || port(u) != p.port || !strings.EqualFold(u.Hostname(), p.host) {
		return false
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, p.path) {
		return false
	}
	return strings.HasSuffix(p.path, "/") || len(path) == len(p.path) || path[len(p.path)] == '/'
}

// Any reports whether one of ps allows u.
func Any(ps []Prefix, u *url.URL) bool {
	for _, p := range ps {
		if p.Allows(u) {
			return true
		}
	}
	return false
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return strings.TrimLeft(p, "0")
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// dotSegments reports whether a decoded path has a "." or ".." segment
// (or a backslash, which some servers read as a separator).
func dotSegments(path string) bool {
	if strings.Contains(path, `\`) {
		return true
	}
	for seg := range strings.SplitSeq(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// redact drops a URL's query string, which may carry secrets, for errors
// and logs.
func redact(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i]
	}
	return s
}

// Redact returns s without its query string and fragment: the form of a
// URL that logs and errors may show.
func Redact(s string) string { return redact(s) }
