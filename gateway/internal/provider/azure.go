package provider

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func init() { Register(config.ProviderAzure, newAzure) }

// Azure speaks Azure OpenAI: OpenAI's bodies and replies, on Azure's
// paths. With a dated api_version a request goes to the deployment named
// by the upstream's model id,
//
//	/openai/deployments/{deployment}/chat/completions?api-version=2024-10-21
//
// and with api_version v1 to /openai/v1/chat/completions, the deployment
// in the body's model (the proxy has put the model_ids name there). Its
// replies and streams are OpenAI's, so Azure is an Adapter without a
// Translator. Credentials: api-key, or an Entra ID bearer token
// (azure_entra.go).
//
// The Responses API (POST /v1/responses) is Azure's own where it has one,
// and the request passes as it is, its deployment in the body's model:
//
//	api_version                    path
//	v1                             /openai/v1/responses
//	2025-03-01-preview or later    /openai/responses?api-version={api_version}
//	a GA date, an earlier preview  none: the proxy sends a chat request
//
// The stored responses (GET and DELETE /v1/responses/{id}, GET
// /v1/responses/{id}/input_items) are below the same path (ResponseStore).
type Azure struct {
	v1      bool
	version string // api_version (azure_passthru.go)
	// suffix holds each endpoint's path after the deployment, query
	// included (deployments), or its whole path (v1).
	suffix [openai.Embeddings + 1]string
	// responses is the Responses API's path, query excluded; empty when
	// the api_version has none. query is the query a deployment-API
	// request carries ("api-version=..."), empty for v1.
	responses, query string
}

// azureResponsesSince is the first dated api-version (a preview) with the
// Responses API.
const azureResponsesSince = "2025-03-01-preview"

var _ Adapter = (*Azure)(nil)

// azureScope is the Entra ID scope of Azure OpenAI (Cognitive Services).
const azureScope = "https://cognitiveservices.azure.com/.default"

func newAzure(u *config.Upstream) (Binding, error) {
	a := newAzureAdapter(u.Azure)
	b := Binding{Adapter: a}
	if u.Azure != nil && u.Azure.Auth == config.AzureAuthEntra {
		cred, err := azureCredential()
		if err != nil {
			return Binding{}, fmt.Errorf("Entra ID: DefaultAzureCredential: %w", err)
		}
		auth := newEntraAuth(cred, u.Timeouts.Connect)
		b.Options = []upstream.Option{upstream.WithAuthorizer(auth)}
		b.Close = auth.close
		return b, nil
	}
	b.Options = []upstream.Option{upstream.WithKeyHeader("api-key")}
	return b, nil
}

// azureCredential is the Entra ID credential chain (replaced in tests).
var azureCredential = func() (azcore.TokenCredential, error) { return azidentity.NewDefaultAzureCredential(nil) }

func newAzureAdapter(c *config.Azure) *Azure {
	version := config.DefaultAzureAPIVersion
	if c != nil && c.APIVersion != "" {
		version = c.APIVersion
	}
	a := &Azure{v1: version == config.AzureAPIV1, version: version}
	switch {
	case a.v1:
		a.responses = "/openai/v1/responses"
	case strings.HasSuffix(version, "-preview") && version >= azureResponsesSince:
		a.responses, a.query = "/openai/responses", "api-version="+version
	}
	for ep, op := range map[openai.Endpoint]string{openai.ChatCompletions: "chat/completions", openai.Completions: "completions", openai.Embeddings: "embeddings"} {
		if a.v1 {
			a.suffix[ep] = "/openai/v1/" + op
		} else {
			a.suffix[ep] = "/" + op + "?api-version=" + version
		}
	}
	return a
}

// Serves implements Adapter: chat completions, completions, embeddings,
// and the Responses API where the api_version has it.
func (a *Azure) Serves(ep openai.Endpoint) bool {
	return ep >= openai.ChatCompletions && ep <= openai.Embeddings || ep == openai.Responses && a.responses != ""
}

// Request implements Adapter: the path only; the body goes as it is.
func (a *Azure) Request(out *Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error {
	if ep == openai.Responses {
		if a.responses == "" {
			return fmt.Errorf("azure: api-version without the Responses API")
		}
		out.Path = append(out.Path, a.responses...)
		if a.query != "" {
			out.Path = append(append(out.Path, '?'), a.query...)
		}
		return nil
	}
	if a.v1 {
		out.Path = append(out.Path, a.suffix[ep]...)
		return nil
	}
	out.Path = append(out.Path, "/openai/deployments/"...)
	out.Path = AppendPathEscaped(out.Path, model)
	out.Path = append(out.Path, a.suffix[ep]...)
	return nil
}

// ResponseStore is an Adapter whose upstream keeps the Responses API's
// objects; the proxy finds it by type assertion for GET and DELETE
// /v1/responses/{id}.
type ResponseStore interface {
	// AppendStoredPath appends the upstream path (and query) of
	// /v1/responses/{rest} asked with the client's query (may be empty),
	// or returns dst unchanged when the upstream has no such objects.
	AppendStoredPath(dst, rest, query []byte) []byte
}

var _ ResponseStore = (*Azure)(nil)

// AppendStoredPath implements ResponseStore: below the Responses path,
// the deployment API's api-version before the client's query.
func (a *Azure) AppendStoredPath(dst, rest, query []byte) []byte {
	if a.responses == "" {
		return dst
	}
	dst = append(append(append(dst, a.responses...), '/'), rest...)
	switch {
	case a.query != "" && len(query) > 0:
		dst = append(append(append(append(dst, '?'), a.query...), '&'), query...)
	case a.query != "":
		dst = append(append(dst, '?'), a.query...)
	case len(query) > 0:
		dst = append(append(dst, '?'), query...)
	}
	return dst
}

// AppendPathEscaped appends s escaped as one path segment: RFC 3986's
// unreserved characters as they are, every other byte as %XX (a "/" or
// ":" in a model id included).
func AppendPathEscaped(dst []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			dst = append(dst, c)
		default:
			dst = append(dst, '%', hex[c>>4], hex[c&15])
		}
	}
	return dst
}
