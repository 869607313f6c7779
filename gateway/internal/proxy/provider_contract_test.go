package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
)

// A made-up provider exercises the provider contract end to end: a path
// per model with a query, a body of its own, a stream that is not SSE
// (one "t:<text>" line per delta, then "end:<completion tokens>"), and
// per-request credentials.
const fakeProvider = "fake-test"

var fakeAuthFail atomic.Bool

func init() {
	config.RegisterProvider(fakeProvider, nil)
	provider.Register(fakeProvider, func(u *config.Upstream) (provider.Binding, error) {
		return provider.Binding{Adapter: fakeAdapter{}, Options: []upstream.Option{upstream.WithAuthorizer(fakeAuth{})}}, nil
	})
}

type fakeAuth struct{}

func (fakeAuth) AppendAuth(dst []byte, r *upstream.AuthRequest) ([]byte, error) {
	if fakeAuthFail.Load() {
		return dst, errors.New("fake token source: refused")
	}
	return fmt.Appendf(dst, "X-Fake-Sig: %s %s %d\r\n", r.Method, r.Path, len(r.Body)), nil
}

type fakeAdapter struct{}

func (fakeAdapter) Serves(ep openai.Endpoint) bool { return ep == openai.ChatCompletions }

func (fakeAdapter) Request(out *provider.Outbound, ep openai.Endpoint, model string, stream bool, body []byte) error {
	if bytes.Contains(body, []byte(`"n":2`)) {
		return &openai.Error{Status: 400, Type: openai.TypeInvalidRequest, Param: "n", Message: "n is not supported"}
	}
	out.Path = fmt.Appendf(out.Path, "/fake/%s?stream=%v", model, stream)
	out.Header = append(out.Header, "X-Fake: 1\r\n"...)
	out.Body = append(append(append(out.Body, `{"wrapped":`...), body...), '}')
	return nil
}

func (fakeAdapter) IsStream(status int, ct []byte) bool {
	return status == 200 && string(ct) == "application/x-fake-lines"
}

func (fakeAdapter) Reply(dst []byte, status int, _ provider.Header, raw []byte, model string, created int64) ([]byte, int, error) {
	if status != 200 {
		return fmt.Appendf(dst, `{"error":{"message":"fake says %s","type":"upstream_error"}}`, raw), status, nil
	}
	return fmt.Appendf(dst, `{"id":"f","object":"chat.completion","created":%d,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		created, model, raw), status, nil
}

func (fakeAdapter) NewStream(int) provider.Stream { return &fakeStream{} }

// fakeStream turns the fake line stream into OpenAI chunks.
type fakeStream struct {
	br          *bufio.Reader
	model       string
	usage, done bool
	out         []byte
}

func (s *fakeStream) Reset(src io.Reader, model, id string, created int64, includeUsage bool) {
	s.br, s.model, s.usage, s.done, s.out = nil, model, includeUsage, false, s.out[:0]
	if src != nil {
		s.br = bufio.NewReader(src)
	}
}

func (s *fakeStream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.done || s.br == nil {
			return 0, io.EOF
		}
		line, err := s.br.ReadString('\n')
		if err != nil {
			return 0, io.ErrUnexpectedEOF
		}
		line = strings.TrimSuffix(line, "\n")
		if t, ok := strings.CutPrefix(line, "t:"); ok {
			s.out = fmt.Appendf(s.out, "data: {\"id\":\"f\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", s.model, t)
			continue
		}
		n, _ := strings.CutPrefix(line, "end:")
		s.out = fmt.Appendf(s.out, "data: {\"id\":\"f\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", s.model)
		if s.usage {
			s.out = fmt.Appendf(s.out, "data: {\"id\":\"f\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%s,\"total_tokens\":9}}\n\n", s.model, n)
		}
		s.out = append(s.out, "data: [DONE]\n\n"...)
		s.done = true
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	if len(s.out) == 0 {
		s.out = s.out[:0:0]
	}
	return n, nil
}

// fakeHit is what the fake upstream received.
type fakeHit struct{ path, sig, fake, body string }

func TestProviderContract(t *testing.T) {
	hits := make(chan fakeHit, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- fakeHit{r.URL.RequestURI(), r.Header.Get("X-Fake-Sig"), r.Header.Get("X-Fake"), string(b)}
		if r.URL.Query().Get("stream") == "true" {
			w.Header().Set("Content-Type", "application/x-fake-lines")
			io.WriteString(w, "t:Hel\nt:lo\nend:6\n")
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "Hello")
	}))
	t.Cleanup(up.Close)
	g := startTestGateway(t, routingPolicy(`
  - name: f
    provider: `+fakeProvider+`
    base_url: `+up.URL+`/base
    model_ids: {m: up-m}
`, `- {models: [m, other], upstream: f}`))

	t.Run("whole reply, model mapped", func(t *testing.T) {
		r := g.chat(t, "m", false)
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		var c struct {
			Model   string
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(r.body), &c); err != nil || c.Model != "m" || c.Choices[0].Message.Content != "Hello" {
			t.Errorf("reply %s (err %v)", r.body, err)
		}
		h := <-hits
		wantBody := `{"wrapped":{"model":"up-m","stream":false,"messages":[{"role":"user","content":"hi"}]}}`
		if h.path != "/base/fake/up-m?stream=false" || h.fake != "1" || h.body != wantBody {
			t.Errorf("upstream got %+v", h)
		}
		if want := fmt.Sprintf("POST /base/fake/up-m?stream=false %d", len(wantBody)); h.sig != want {
			t.Errorf("signature %q, want %q", h.sig, want)
		}
	})
	t.Run("stream not SSE, model unmapped", func(t *testing.T) {
		r := g.chat(t, "other", true)
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d type %q: %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		// The usage chunk the gateway asked for is not the client's.
		want := `data: {"id":"f","object":"chat.completion.chunk","model":"other","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"f","object":"chat.completion.chunk","model":"other","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}` + "\n\n" +
			`data: {"id":"f","object":"chat.completion.chunk","model":"other","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
			"data: [DONE]\n\n"
		if r.body != want {
			t.Errorf("stream\n%s\nwant\n%s", r.body, want)
		}
		if h := <-hits; h.path != "/base/fake/other?stream=true" || !strings.Contains(h.body, `"stream_options":{"include_usage":true}`) {
			t.Errorf("upstream got %+v", h)
		}
		if m := g.log.line(t, r.id); m["completion_tokens"].Int64() != 6 || m["model"].String() != "other" {
			t.Errorf("access log %v", m)
		}
	})
	t.Run("refused by the adapter", func(t *testing.T) {
		id := "rt-refused"
		resp, err := http.Post(g.url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"n"`) {
			t.Errorf("%s: status %d: %s", id, resp.StatusCode, b)
		}
	})
	t.Run("unserved endpoint", func(t *testing.T) {
		resp, err := http.Post(g.url+"/v1/embeddings", "application/json", strings.NewReader(`{"model":"m","input":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"code":"unsupported_endpoint"`) || !strings.Contains(string(b), "a fake-test upstream") {
			t.Errorf("status %d: %s", resp.StatusCode, b)
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		fakeAuthFail.Store(true)
		defer fakeAuthFail.Store(false)
		r := g.chat(t, "m", false)
		if r.status != 502 || !strings.Contains(r.body, `"code":"upstream_credentials"`) ||
			!strings.Contains(r.body, `credentials for the upstream \"f\": fake token source: refused`) {
			t.Errorf("status %d: %s", r.status, r.body)
		}
	})
	if len(hits) != 0 {
		t.Errorf("%d unexpected upstream requests", len(hits))
	}
}

// model_ids on an OpenAI upstream: the body's model is the upstream's id;
// the reply passes as the upstream sent it.
func TestModelIDsOpenAI(t *testing.T) {
	h := &hits{}
	up := newFakeUpstream(t, "o", h, step{})
	g := startTestGateway(t, routingPolicy(upstreamYAML("o", up.url, "model_ids: {gpt-x: served-x}"), `- {models: [gpt-x, gpt-y], upstream: o}`))
	for _, tc := range []struct{ model, sent string }{{"gpt-x", "served-x"}, {"gpt-y", "gpt-y"}} {
		r := g.chat(t, tc.model, false)
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if b := h.bodyOf(r.id, "o"); !strings.Contains(b, `"model":"`+tc.sent+`"`) {
			t.Errorf("%s: upstream body %s", tc.model, b)
		}
	}
}
