package provider

import (
	"net/url"
	"strings"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/gemini"
	"github.com/tollgate/tollgate/gateway/internal/googleauth"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func init() {
	Register(config.ProviderGemini, newGemini)
	Register(config.ProviderVertex, newVertex)
}

// Gemini speaks Google's generateContent API, chat requests translated by
// package gemini, for both of Google's services: the Gemini API (models
// under /models/, the key in x-goog-api-key) and Vertex AI (models under
// /projects/{p}/locations/{l}/publishers/google/models/, an OAuth token
// per request).
type Gemini struct {
	prefix string // the path up to the model id
}

var (
	_ Adapter    = (*Gemini)(nil)
	_ Translator = (*Gemini)(nil)
)

func newGemini(u *config.Upstream) (Binding, error) {
	return Binding{Adapter: &Gemini{prefix: "/models/"}, Options: []upstream.Option{upstream.WithKeyHeader("x-goog-api-key")}, Withhold: withholdContentType}, nil
}

func newVertex(u *config.Upstream) (Binding, error) {
	v := u.Vertex
	if v == nil {
		v = &config.Vertex{}
	}
	// The first fetch of a token blocks the request that needs it; the
	// connect timeout bounds it as it bounds reaching the upstream.
	ts, err := googleauth.New(googleauth.Options{CredentialsFile: v.CredentialsFile, Timeout: u.Timeouts.Connect})
	if err != nil {
		return Binding{}, err
	}
	prefix := "/projects/" + url.PathEscape(v.Project) + "/locations/" + url.PathEscape(v.Location) + "/publishers/google/models/"
	return Binding{Adapter: &Gemini{prefix: prefix}, Options: []upstream.Option{upstream.WithAuthorizer(bearer{ts})}, Withhold: withholdContentType}, nil
}

// bearer writes a Vertex request's OAuth token.
type bearer struct{ ts *googleauth.TokenSource }

var _ upstream.Authorizer = bearer{}

// AppendAuth implements upstream.Authorizer.
func (b bearer) AppendAuth(dst []byte, r *upstream.AuthRequest) ([]byte, error) {
	return b.ts.AppendHeader(dst, r.Now)
}

// Serves implements Adapter: chat completions only.
func (g *Gemini) Serves(ep openai.Endpoint) bool { return ep == openai.ChatCompletions }

// Request implements Adapter. The model goes in the path (a "models/"
// prefix, as Google's clients write model names, is dropped), and stream
// chooses the method.
func (g *Gemini) Request(out *Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error {
	var err error
	if out.Body, err = gemini.AppendRequest(out.Body, body); err != nil {
		return err
	}
	out.Path = append(out.Path, g.prefix...)
	out.Path = AppendPathEscaped(out.Path, strings.TrimPrefix(model, "models/"))
	if stream {
		out.Path = append(out.Path, ":streamGenerateContent?alt=sse"...)
	} else {
		out.Path = append(out.Path, ":generateContent"...)
	}
	out.Header = append(out.Header, jsonContentType...)
	return nil
}

// IsStream implements Translator: alt=sse streams are SSE.
func (g *Gemini) IsStream(status int, contentType []byte) bool { return IsSSE(status, contentType) }

// Reply implements Translator.
func (g *Gemini) Reply(dst []byte, status int, _ Header, raw []byte, model string, created int64) ([]byte, int, error) {
	if status >= 200 && status < 300 {
		out, err := gemini.AppendResponse(dst, raw, model, "", created)
		return out, status, err
	}
	e := gemini.TranslateError(status, raw)
	return e.AppendJSON(dst), e.Status, nil
}

var _ RetryAdvisor = (*Gemini)(nil)

// RetryAfter implements RetryAdvisor: the retryDelay of the reply's
// google.rpc.RetryInfo, which Google sends with RESOURCE_EXHAUSTED instead
// of a Retry-After header.
func (g *Gemini) RetryAfter(status int, raw []byte) (int, bool) {
	return gemini.RetryDelay(raw)
}

// NewStream implements Translator.
func (g *Gemini) NewStream(maxEventBytes int) Stream { return gemini.NewStreamReader(maxEventBytes) }
