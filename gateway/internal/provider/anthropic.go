package provider

import (
	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func init() { Register(config.ProviderAnthropic, newAnthropic) }

// Anthropic speaks Anthropic's Messages API: chat requests translated by
// package anthropic. The proxy also finds it by type to serve POST
// /v1/messages natively (the client's body and Anthropic's events pass
// through, anthropic-version and anthropic-beta from the client).
type Anthropic struct {
	header []byte // "anthropic-version: <version>\r\nContent-Type: application/json\r\n"
	// Version is the anthropic-version sent when the client chose none.
	Version string
}

var (
	_ Adapter    = (*Anthropic)(nil)
	_ Translator = (*Anthropic)(nil)
)

func newAnthropic(u *config.Upstream) (Binding, error) {
	v := u.AnthropicVersion
	if v == "" {
		v = anthropic.DefaultVersion
	}
	a := &Anthropic{Version: v, header: []byte("anthropic-version: " + v + "\r\n" + jsonContentType)}
	// Anthropic reads its key from x-api-key, not Authorization.
	// The body is JSON the gateway wrote or checked as JSON (the native
	// endpoint): the client's Content-Type (curl's form type by default)
	// does not describe it.
	return Binding{Adapter: a, Options: []upstream.Option{upstream.WithKeyHeader("x-api-key")}, Withhold: withholdContentType}, nil
}

// Serves implements Adapter: chat completions only.
func (a *Anthropic) Serves(ep openai.Endpoint) bool { return ep == openai.ChatCompletions }

// Request implements Adapter. The model is the body's (the proxy has put
// the upstream's id there); stream is the body's stream member.
func (a *Anthropic) Request(out *Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error {
	var err error
	if out.Body, err = anthropic.AppendRequest(out.Body, body, 0); err != nil {
		return err
	}
	out.Path = append(out.Path, anthropic.MessagesPath...)
	out.Header = append(out.Header, a.header...)
	return nil
}

// IsStream implements Translator: Anthropic streams are SSE.
func (a *Anthropic) IsStream(status int, contentType []byte) bool {
	return IsSSE(status, contentType)
}

// Reply implements Translator.
func (a *Anthropic) Reply(dst []byte, status int, _ Header, raw []byte, model string, created int64) ([]byte, int, error) {
	if status >= 200 && status < 300 {
		out, err := anthropic.AppendResponse(dst, raw, model, "", created)
		return out, status, err
	}
	e := anthropic.TranslateError(status, raw)
	return e.AppendJSON(dst), e.Status, nil
}

// NewStream implements Translator.
func (a *Anthropic) NewStream(maxEventBytes int) Stream {
	return anthropic.NewStreamReader(maxEventBytes)
}
