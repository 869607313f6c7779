package provider

import "strings"

// AppendPassthroughPath addresses OpenAI's passthrough endpoints on Azure
// OpenAI (the proxy finds the method by type assertion; see
// proxy/passthru.go). p is the OpenAI path below /v1 with the client's
// query, model the deployment:
//
//	/images/generations      → /openai/deployments/{model}/images/generations?api-version=V
//	/audio/transcriptions    → /openai/deployments/{model}/audio/transcriptions?api-version=V
//	/files/file-1?limit=2    → /openai/files/file-1?limit=2&api-version=V
//	/batches/b-1/cancel      → /openai/batches/b-1/cancel?api-version=V
//
// and with api_version v1 to /openai/v1 followed by p. Azure has no
// /moderations (content filtering is part of every deployment): not
// addressed, so the proxy answers 400 unsupported_endpoint.
func (a *Azure) AppendPassthroughPath(dst []byte, p, model string) ([]byte, bool) {
	path, query, _ := strings.Cut(p, "?")
	stored := strings.HasPrefix(path, "/files") || strings.HasPrefix(path, "/batches")
	if !stored && !strings.HasPrefix(path, "/images/") && !strings.HasPrefix(path, "/audio/") {
		return dst, false
	}
	if a.v1 {
		dst = append(append(dst, "/openai/v1"...), p...)
		return dst, true
	}
	dst = append(dst, "/openai"...)
	if !stored {
		dst = append(dst, "/deployments/"...)
		dst = AppendPathEscaped(dst, model)
	}
	dst = append(append(dst, path...), '?')
	if query != "" {
		dst = append(append(dst, query...), '&')
	}
	return append(append(dst, "api-version="...), a.version...), true
}
