package config

import (
	"fmt"
	"path"
	"strings"
)

// DefaultAnthropicVersion is the anthropic-version header sent to anthropic
// upstreams unless anthropic_version says otherwise.
const DefaultAnthropicVersion = "2023-06-01"

// validateAnthropic checks what only an anthropic upstream has. Anthropic
// reads its key from x-api-key and needs anthropic-version; both are the
// gateway's to send, so the static headers may not set them, and neither
// is forwarded from the client by forward_headers (on /v1/messages the
// gateway forwards the client's anthropic-version and anthropic-beta
// itself).
func (u *Upstream) validateAnthropic(at string, ps *Problems) {
	if u.AnthropicVersion == "" {
		u.AnthropicVersion = DefaultAnthropicVersion
	} else if !validHeaderValue(u.AnthropicVersion) {
		ps.add(at+".anthropic_version", "%q is not a valid header value (a date such as %s)", u.AnthropicVersion, DefaultAnthropicVersion)
	}
	for i, h := range u.ForwardHeaders {
		for _, name := range []string{"anthropic-version", "anthropic-beta"} {
			if ok, _ := path.Match(strings.ToLower(h), name); ok {
				ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, i), "%q matches %s, which the gateway sends itself for provider %s", h, name, ProviderAnthropic)
			}
		}
	}
	for k := range u.Headers {
		switch strings.ToLower(k) {
		case "x-api-key":
			ps.add(at+".headers."+k, "is set from api_key_env for provider %s", ProviderAnthropic)
		case "anthropic-version":
			ps.add(at+".headers."+k, "is set from anthropic_version for provider %s", ProviderAnthropic)
		}
	}
}

// validHeaderValue accepts visible ASCII and inner spaces.
func validHeaderValue(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}
