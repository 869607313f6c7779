package callout

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/callout/allow"
)

// Grant defaults (the policy's zero values).
const (
	DefaultTimeout          = 2 * time.Second
	DefaultMaxResponseBytes = 256 << 10
	DefaultMaxInFlight      = 64
)

// GrantSpec is a plugin's grant as the policy states it
// (plugins[].callout); zero fields take the defaults.
type GrantSpec struct {
	Allow            []string
	Timeout          time.Duration
	MaxResponseBytes int64
	MaxInFlight      int
	// HeadersEnv maps a header name to the environment variable that holds
	// its value.
	HeadersEnv map[string]string
}

// Grant is what one plugin may call: immutable once built.
type Grant struct {
	allow            []allow.Prefix
	timeout          time.Duration
	maxResponseBytes int64
	maxInFlight      int64
	// header is added to every call, over the plugin's own headers of
	// the same name. Its values are secrets: never logged.
	header http.Header
}

// NewGrant builds the grant spec states, reading HeadersEnv's variables
// through lookupEnv (nil: none set). A missing variable is an error
// naming it; the value never appears in an error.
func NewGrant(spec GrantSpec, lookupEnv func(string) (string, bool)) (*Grant, error) {
	g := &Grant{timeout: spec.Timeout, maxResponseBytes: spec.MaxResponseBytes, maxInFlight: int64(spec.MaxInFlight),
		header: make(http.Header, len(spec.HeadersEnv))}
	if g.timeout == 0 {
		g.timeout = DefaultTimeout
	}
	if g.maxResponseBytes == 0 {
		g.maxResponseBytes = DefaultMaxResponseBytes
	}
	if g.maxInFlight == 0 {
		g.maxInFlight = DefaultMaxInFlight
	}
	if g.timeout < 0 || g.maxResponseBytes < 0 || g.maxInFlight < 0 {
		return nil, fmt.Errorf("callout: timeout, max_response_bytes and max_in_flight must not be negative")
	}
	if len(spec.Allow) == 0 {
		return nil, fmt.Errorf("callout.allow: at least one URL prefix is required")
	}
	for i, s := range spec.Allow {
		p, err := allow.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("callout.allow[%d]: %w", i, err)
		}
		g.allow = append(g.allow, p)
	}
	for name, env := range spec.HeadersEnv {
		v, ok := "", false
		if lookupEnv != nil {
			v, ok = lookupEnv(env)
		}
		if !ok {
			return nil, fmt.Errorf("callout.headers_env.%s: environment variable %s is not set", name, env)
		}
		if !ValidHeader([]byte(name), []byte(v)) {
			return nil, fmt.Errorf("callout.headers_env.%s: invalid header name, or the value of %s has CR, LF or NUL", name, env)
		}
		g.header.Set(name, v)
	}
	return g, nil
}

// Timeout is the grant's timeout of one call.
func (g *Grant) Timeout() time.Duration { return g.timeout }
