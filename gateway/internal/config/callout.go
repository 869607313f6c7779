package config

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/callout/allow"
)

// Callout grants a plugin HTTP call-outs (the `http` service of
// dispatched calls; docs/POLICY.md, "Call-outs"). Without it the plugin
// cannot call out at all.
type Callout struct {
	// Allow lists the URL prefixes the plugin may call (at least one):
	// http or https URLs without userinfo, query or fragment. A call
	// matches a prefix when its scheme, host and port are the prefix's
	// and its path begins with the prefix's path at a segment boundary;
	// redirects are never followed.
	Allow []string `yaml:"allow"`
	// Timeout bounds one call, from its start to the answer's last byte
	// (default 2s, at most 1m).
	Timeout time.Duration `yaml:"timeout"`
	// MaxResponseBytes caps an answer's body (default 256KiB, at most
	// 16MiB); a larger one fails the call as too_large.
	MaxResponseBytes ByteSize `yaml:"max_response_bytes"`
	// MaxInFlight caps the plugin's calls in flight at once, all
	// requests together (default 64); a call beyond it fails at once as
	// busy.
	MaxInFlight int `yaml:"max_in_flight"`
	// HeadersEnv adds headers to every call: header name → the
	// environment variable holding its value (read at load; a missing
	// variable is a load error). The values are never shown to the plugin
	// nor logged; they replace the plugin's own headers of that name.
	HeadersEnv map[string]string `yaml:"headers_env"`

	// EnvValues are HeadersEnv's variables' values, by variable name;
	// set by validation, never logged.
	EnvValues map[string]string `yaml:"-"`
}

// Limits and defaults of plugins[].callout.
const (
	DefaultCalloutTimeout          = 2 * time.Second
	DefaultCalloutMaxResponseBytes = 256 << 10
	DefaultCalloutMaxInFlight      = 64
	maxCalloutTimeout              = time.Minute
	maxCalloutResponseBytes        = 16 << 20
)

func (c *Callout) applyDefaults() {
	setDefault(&c.Timeout, DefaultCalloutTimeout)
	setDefault(&c.MaxResponseBytes, DefaultCalloutMaxResponseBytes)
	setDefault(&c.MaxInFlight, DefaultCalloutMaxInFlight)
}

// validate checks c, at its YAML path at, and reads HeadersEnv's
// variables into EnvValues.
func (c *Callout) validate(at string, lookupEnv func(string) (string, bool), ps *Problems) {
	if len(c.Allow) == 0 {
		ps.add(at+".allow", "needs at least one URL prefix (without callout, the plugin cannot call out)")
	}
	for i, s := range c.Allow {
		if _, err := allow.Parse(s); err != nil {
			ps.add(fmt.Sprintf("%s.allow[%d]", at, i), "%v", err)
		}
	}
	if c.Timeout <= 0 || c.Timeout > maxCalloutTimeout {
		ps.add(at+".timeout", "must be between 0s (default %s) and %s, got %s", DefaultCalloutTimeout, maxCalloutTimeout, c.Timeout)
	}
	if c.MaxResponseBytes <= 0 || c.MaxResponseBytes > maxCalloutResponseBytes {
		ps.add(at+".max_response_bytes", "must be between 1 byte and 16MiB")
	}
	if c.MaxInFlight <= 0 {
		ps.add(at+".max_in_flight", "must be positive")
	}
	names := make([]string, 0, len(c.HeadersEnv))
	for name := range c.HeadersEnv {
		names = append(names, name)
	}
	sort.Strings(names) // problems in a stable order
	c.EnvValues = make(map[string]string, len(names))
	for _, name := range names {
		env := c.HeadersEnv[name]
		if !validHeaderName(name) {
			ps.add(at+".headers_env", "invalid header name %q", name)
			continue
		}
		switch strings.ToLower(name) {
		case "host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer":
			ps.add(at+".headers_env."+name, "is a header the host sets itself")
			continue
		}
		v, ok := lookupEnv(env)
		switch {
		case !ok || v == "":
			ps.add(at+".headers_env."+name, "environment variable %s is not set", env)
		case strings.ContainsAny(v, "\r\n\x00"):
			ps.add(at+".headers_env."+name, "the value of %s must not contain CR, LF or NUL", env)
		default:
			c.EnvValues[env] = v
		}
	}
}

// LookupEnv reads HeadersEnv's variables as validation read them.
func (c *Callout) LookupEnv(name string) (string, bool) {
	v, ok := c.EnvValues[name]
	return v, ok
}
