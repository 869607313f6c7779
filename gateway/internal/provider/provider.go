package provider

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// Adapter addresses and encodes requests for one upstream API. It is
// shared by every request to its upstream and must be safe for concurrent
// use; it holds no per-request state.
type Adapter interface {
	// Serves reports whether the upstream has an equivalent of ep.
	Serves(ep openai.Endpoint) bool
	// Request fills out, which arrives empty (its buffers' capacity
	// kept), for one attempt of an OpenAI request to ep: model is the
	// upstream's model id, stream whether the client asked for a stream,
	// body the OpenAI JSON (borrowed: valid during the call, never
	// written). A refusal is an *openai.Error naming the param.
	Request(out *Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error
}

// Translator is an Adapter whose upstream does not reply in OpenAI's
// format; the proxy finds it by type assertion when the upstream is bound.
type Translator interface {
	// IsStream reports whether a reply with this status and Content-Type
	// is a stream, to be read through NewStream's reader.
	IsStream(status int, contentType []byte) bool
	// Reply appends to dst the OpenAI body for a whole reply raw with
	// status and header, and returns it with the status for the client.
	// raw and header are borrowed for the call.
	Reply(dst []byte, status int, header Header, raw []byte, model string, created int64) ([]byte, int, error)
	// NewStream returns a reader of streamed replies; events larger than
	// maxEventBytes are errors.
	NewStream(maxEventBytes int) Stream
}

// RetryAdvisor is a Translator whose error replies may say in their body
// when to retry (Google's RetryInfo). For an error reply without a
// Retry-After header the proxy asks it, and a delay it reports goes to
// the client as Retry-After (whole seconds). The proxy's own retries still
// go by the reply's status and headers.
type RetryAdvisor interface {
	// RetryAfter returns the delay an error reply raw with status asks
	// for, in seconds (> 0), or ok false. raw is borrowed for the call.
	RetryAfter(status int, raw []byte) (seconds int, ok bool)
}

// Header reads the fields of an upstream reply's header (the proxy passes
// fasthttp's ResponseHeader): Peek returns a field's value, nil when the
// reply has none; the value is borrowed.
type Header interface {
	Peek(key string) []byte
}

// Stream reads a provider's streamed reply as OpenAI chat.completion.chunk
// SSE. It is reused: Reset starts a new reply; Reset(nil, "", "", 0,
// false) drops the reference to the last one.
type Stream interface {
	io.Reader
	Reset(src io.Reader, model, id string, created int64, includeUsage bool)
}

// Outbound is the request an Adapter builds for an upstream.
type Outbound struct {
	// Path is relative to the upstream's base URL, escaped, and may carry
	// a query ("/models/gemini-2.0-flash:generateContent").
	Path []byte
	// Header holds extra header lines, each ending in CRLF.
	Header []byte
	// Body is the request body; left empty, the OpenAI body is sent.
	Body []byte
}

// Reset empties o for the next request, keeping its buffers unless a
// huge request grew them.
func (o *Outbound) Reset() {
	for _, b := range []*[]byte{&o.Path, &o.Header, &o.Body} {
		if cap(*b) > 1<<20 {
			*b = nil
		}
		*b = (*b)[:0]
	}
}

// Binding is how the proxy talks to one upstream.
type Binding struct {
	// Adapter is nil for an OpenAI-compatible upstream.
	Adapter Adapter
	// Options configure the upstream's client (key header, authorizer).
	Options []upstream.Option
	// Close releases what the factory started (nil: nothing).
	Close func()
	// Withhold are client headers (lower case) that never reach the
	// upstream, whatever forward_headers says: the adapter writes its own
	// (e.g. the Content-Type of a body it built).
	Withhold []string
}

// A translated body is JSON the gateway wrote: the client's Content-Type
// (curl's form type by default, or none) described the OpenAI body, not it.
// Translating adapters withhold the client's and write this one.
const jsonContentType = "Content-Type: application/json\r\n"

var withholdContentType = []string{"content-type"}

// Factory binds an upstream of its provider; u was validated by config.
type Factory func(u *config.Upstream) (Binding, error)

var (
	mu        sync.RWMutex
	factories = map[string]Factory{}
)

// Register makes f bind the upstreams of provider name. It is called from
// init functions; registering a name twice panics.
func Register(name string, f Factory) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := factories[name]; dup {
		panic("provider: " + name + " registered twice")
	}
	factories[name] = f
}

// Bind returns the Binding of upstream u: the zero Binding for openai.
func Bind(u *config.Upstream) (Binding, error) {
	if u.Provider == config.ProviderOpenAI || u.Provider == "" {
		return Binding{}, nil
	}
	mu.RLock()
	f, ok := factories[u.Provider]
	mu.RUnlock()
	if !ok {
		return Binding{}, fmt.Errorf("upstream %q: provider %q is not supported by this build", u.Name, u.Provider)
	}
	b, err := f(u)
	if err != nil {
		return Binding{}, fmt.Errorf("upstream %q (provider %s): %w", u.Name, u.Provider, err)
	}
	return b, nil
}

// IsSSE reports a 2xx reply of type text/event-stream: a stream for
// OpenAI-compatible upstreams and most translated ones.
func IsSSE(status int, contentType []byte) bool {
	return status >= 200 && status < 300 && bytes.HasPrefix(contentType, textEventStream)
}

var textEventStream = []byte("text/event-stream")
