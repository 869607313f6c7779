package provider

import (
	"bytes"
	"context"

	"github.com/tollgate/tollgate/gateway/internal/bedrock"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sigv4"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

func init() { Register(config.ProviderBedrock, newBedrock) }

// Bedrock speaks Amazon Bedrock's Converse API: chat requests translated
// by package bedrock to POST /model/{id}/converse (or /converse-stream),
// signed with SigV4 (package sigv4) unless the upstream has a Bedrock API
// key (api_key_env, sent as a bearer token by the upstream client).
type Bedrock struct{}

var (
	_ Adapter    = (*Bedrock)(nil)
	_ Translator = (*Bedrock)(nil)
)

func newBedrock(u *config.Upstream) (Binding, error) {
	// The client's Content-Type describes the OpenAI body, not the
	// Converse body Request writes.
	b := Binding{Adapter: &Bedrock{}, Withhold: withholdContentType}
	if u.APIKeyEnv != "" {
		return b, nil // Authorization: Bearer <key>, the client's static header
	}
	// Reads the environment and the shared config files; credentials are
	// fetched on the first request.
	auth, err := sigv4.Load(context.Background(), sigv4.Options{
		Upstream: u.Name, Region: u.Bedrock.Region, FetchTimeout: u.Timeouts.Connect})
	if err != nil {
		return Binding{}, err
	}
	b.Options = []upstream.Option{upstream.WithAuthorizer(auth)}
	return b, nil
}

// Serves implements Adapter: chat completions only.
func (*Bedrock) Serves(ep openai.Endpoint) bool { return ep == openai.ChatCompletions }

// Request implements Adapter: the model id goes in the path, the rest in
// a Converse body, sent as application/json (Bedrock's JSON protocol
// refuses a body of another type).
func (*Bedrock) Request(out *Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error {
	var err error
	if out.Body, err = bedrock.AppendRequest(out.Body, body); err != nil {
		return err
	}
	out.Path = bedrock.AppendPath(out.Path, model, stream)
	out.Header = append(out.Header, jsonContentType...)
	return nil
}

// amznErrorType is the header naming the exception of a Bedrock error
// reply.
const amznErrorType = "X-Amzn-Errortype"

var eventStreamType = []byte(bedrock.EventStreamContentType)

// IsStream implements Translator: ConverseStream replies are AWS event
// streams, not SSE.
func (*Bedrock) IsStream(status int, contentType []byte) bool {
	return status >= 200 && status < 300 && bytes.HasPrefix(contentType, eventStreamType)
}

// Reply implements Translator. Errors are mapped by the exception named
// in the X-Amzn-Errortype header (ThrottlingException, a 429; a 400
// ServiceQuotaExceededException, a 429; a 403 UnrecognizedClientException,
// a 401; a 429 ModelNotReadyException, a 503; ...), else the body's
// __type, else the status (package bedrock's table).
func (*Bedrock) Reply(dst []byte, status int, header Header, raw []byte, model string, created int64) ([]byte, int, error) {
	if status >= 200 && status < 300 {
		out, err := bedrock.AppendResponse(dst, raw, model, "", created)
		return out, status, err
	}
	e := bedrock.TranslateError(status, header.Peek(amznErrorType), raw)
	return e.AppendJSON(dst), e.Status, nil
}

// NewStream implements Translator.
func (*Bedrock) NewStream(maxEventBytes int) Stream {
	return bedrock.NewStreamReader(maxEventBytes)
}
