package config

import (
	"fmt"
	"path"
	"strings"
)

// Google's generateContent API, served two ways: the Gemini API (an API
// key) and Vertex AI (OAuth tokens, a project and a location in the
// path). Package gemini translates for both; package provider addresses
// them.

func init() {
	RegisterProvider(ProviderGemini, (*Upstream).validateGemini)
	RegisterProvider(ProviderVertex, (*Upstream).validateVertex)
}

// DefaultGeminiBaseURL is a gemini upstream's base_url unless set.
const DefaultGeminiBaseURL = "https://generativelanguage.googleapis.com/v1beta"

// VertexBaseURL is a vertex upstream's default base_url for location:
// the global endpoint for "global", the regional one otherwise.
func VertexBaseURL(location string) string {
	if location == "global" {
		return "https://aiplatform.googleapis.com/v1"
	}
	return "https://" + location + "-aiplatform.googleapis.com/v1"
}

// validateGemini checks a gemini upstream: the key goes in x-goog-api-key,
// which is the gateway's to send.
func (u *Upstream) validateGemini(at string, ps *Problems) {
	if u.BaseURL == "" {
		u.BaseURL = DefaultGeminiBaseURL
	}
	u.reserveHeaders(at, ps, ProviderGemini, "x-goog-api-key", "api_key_env")
}

// validateVertex checks a vertex upstream's project and location (they
// go in the request path) and that nothing else sets its credentials.
func (u *Upstream) validateVertex(at string, ps *Problems) {
	v := u.Vertex
	if v == nil {
		ps.add(at+".vertex", "is required for provider %s: {project: PROJECT_ID, location: us-central1}", ProviderVertex)
		return
	}
	if !pathSegment(v.Project, ":.") {
		ps.add(at+".vertex.project", "must be a Google Cloud project id (letters, digits, '-', '.', ':'), got %q", v.Project)
	}
	if !pathSegment(v.Location, "") {
		ps.add(at+".vertex.location", "must be a Vertex AI location such as us-central1 or global, got %q", v.Location)
	} else if u.BaseURL == "" {
		u.BaseURL = VertexBaseURL(strings.ToLower(v.Location))
	}
	if strings.ContainsAny(v.CredentialsFile, "\r\n\x00") {
		ps.add(at+".vertex.credentials_file", "must be a file path")
	}
	if u.APIKeyEnv != "" {
		ps.add(at+".api_key_env", "is not used by provider %s: requests carry OAuth tokens from vertex.credentials_file or Application Default Credentials", ProviderVertex)
	}
	u.reserveHeaders(at, ps, ProviderVertex, "authorization", "the OAuth token")
}

// pathSegment accepts a non-empty string of ASCII letters, digits, '-'
// and the extra bytes: safe as a path segment as it stands.
func pathSegment(s, extra string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || strings.IndexByte(extra, c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// reserveHeaders refuses static headers and forwarded client headers
// named header, which the gateway sets itself (from source).
func (u *Upstream) reserveHeaders(at string, ps *Problems, provider, header, source string) {
	for k := range u.Headers {
		if strings.EqualFold(k, header) {
			ps.add(at+".headers."+k, "is set from %s for provider %s", source, provider)
		}
	}
	for i, h := range u.ForwardHeaders {
		if ok, _ := path.Match(strings.ToLower(h), header); ok {
			ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, i), "%q matches %s, which the gateway sends itself for provider %s", h, header, provider)
		}
	}
}
