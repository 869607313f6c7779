package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The gemini and vertex providers: OpenAI chat requests translated to
// Google's generateContent and back, against the mock's Gemini API and
// Vertex AI paths, driven by the OpenAI Go SDK. The Vertex upstream gets
// its OAuth token from a service account key whose token endpoint is a
// local server, as Google's would be.

// googleCred is what the mock requires: the Gemini API key, and the
// access token the token server hands out for Vertex.
const googleCred = "goog-upstream-secret"

// googleMock is the mock model and the request paths it was sent.
type googleMock struct {
	mock  *mockllm.Server
	url   string
	paths chan string
}

func startGoogleMock(t *testing.T, cfg mockllm.Config) *googleMock {
	t.Helper()
	cfg.APIKey = googleCred
	g := &googleMock{mock: mockllm.New(cfg), paths: make(chan string, 256)}
	g.url = startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case g.paths <- r.URL.RequestURI():
		default:
		}
		g.mock.ServeHTTP(w, r)
	})
	return g
}

// startTokenServer serves Google's OAuth token endpoint, handing out
// googleCred; fetches counts the tokens handed out.
func startTokenServer(t *testing.T) (tokenURL string, fetches *atomic.Int32) {
	t.Helper()
	fetches = new(atomic.Int32)
	u := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || r.Form.Get("assertion") == "" {
			http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
			return
		}
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"expires_in":3600,"token_type":"Bearer"}`, googleCred)
	})
	return u + "/token", fetches
}

// serviceAccountFile writes a service account key whose token_uri is
// tokenURL.
func serviceAccountFile(t *testing.T, tokenURL string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "proj-1", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "gateway@proj-1.iam.gserviceaccount.com", "token_uri": tokenURL,
	})
	name := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// googlePolicy routes gemini-* to a gemini upstream and vertex-* to a
// vertex one, both at the mock; extra is appended.
func googlePolicy(mockURL, credFile, extra string) string {
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 64KiB
  drain_timeout: 2s
upstreams:
  - name: gemini
    provider: gemini
    base_url: %[1]s/v1beta
    api_key_env: GEMINI_API_KEY
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
    model_ids: {gemini-x: gemini-2.0-flash}
  - name: vertex
    provider: vertex
    base_url: %[1]s/v1
    vertex: {project: proj-1, location: us-central1, credentials_file: %[2]q}
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
    model_ids: {vertex-x: gemini-2.5-pro}
routes:
  - models: ["gemini-*"]
    upstream: gemini
  - models: ["vertex-*"]
    upstream: vertex
%[3]s`, mockURL, credFile, extra)
}

var googleVars = map[string]string{"GEMINI_API_KEY": googleCred}

// googleWorld is the mock, the token server and a gateway in front.
type googleWorld struct {
	mock    *googleMock
	fetches *atomic.Int32
	gw      string
	logs    *lockedBuffer
}

func startGoogleWorld(t *testing.T, cfg mockllm.Config, extra string) *googleWorld {
	t.Helper()
	m := startGoogleMock(t, cfg)
	tokenURL, fetches := startTokenServer(t)
	gw, logs := startLoggingGateway(t, googlePolicy(m.url, serviceAccountFile(t, tokenURL), extra), googleVars)
	return &googleWorld{mock: m, fetches: fetches, gw: gw, logs: logs}
}

// client is the OpenAI Go SDK pointed at the gateway.
func (w *googleWorld) client(key string, hdr ...string) openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(w.gw + "/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0)}
	for i := 0; i+1 < len(hdr); i += 2 {
		opts = append(opts, option.WithHeader(hdr[i], hdr[i+1]))
	}
	return openai.NewClient(opts...)
}

// upstreamPath is the path the model of the client's name goes to.
func upstreamPath(model string, stream bool) string {
	p := "/v1beta/models/gemini-2.0-flash"
	if strings.HasPrefix(model, "vertex") {
		p = "/v1/projects/proj-1/locations/us-central1/publishers/google/models/gemini-2.5-pro"
	}
	if stream {
		return p + ":streamGenerateContent?alt=sse"
	}
	return p + ":generateContent"
}

// chat sends one chat request, streamed (with usage) or not, and returns
// the completion (a stream's accumulated).
func chat(t *testing.T, c openai.Client, params openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	ctx := context.Background()
	if !stream {
		resp, err := c.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatalf("%s: %v", params.Model, err)
		}
		return *resp
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		acc.AddChunk(s.Current())
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s stream: %v", params.Model, err)
	}
	return acc.ChatCompletion
}

const googleText = "Twelve bytes of text, more or less."

// TestGoogleChat: text, finish reason and usage come back through both
// providers, streamed and not, under the client's model name, from the
// upstream's model id; the Vertex token is fetched once and reused.
func TestGoogleChat(t *testing.T) {
	w := startGoogleWorld(t, mockllm.Config{Text: googleText, ChunkSize: 5}, "")
	c := w.client("unused")
	for _, model := range []string{"gemini-x", "vertex-x"} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s stream=%v", model, stream)
			got := chat(t, c, openai.ChatCompletionNewParams{
				Model:    model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("Hello there, mock")},
			}, stream)
			if len(got.Choices) != 1 || got.Choices[0].Message.Content != googleText || got.Choices[0].FinishReason != "stop" || got.Model != model {
				t.Errorf("%s: %+v", name, got)
			}
			// The mock counts a token per 4 prompt bytes (25) and one
			// per event (7 of 5 bytes).
			if u := got.Usage; u.PromptTokens != 6 || u.CompletionTokens != 7 || u.TotalTokens != 13 {
				t.Errorf("%s: usage %+v, want 6+7", name, u)
			}
			if p := <-w.mock.paths; p != upstreamPath(model, stream) {
				t.Errorf("%s: upstream path %s, want %s", name, p, upstreamPath(model, stream))
			}
		}
	}
	if n := w.fetches.Load(); n != 1 {
		t.Errorf("%d OAuth token fetches, want 1", n)
	}
}

// TestGoogleTools: a function call comes back as an OpenAI tool call with
// its arguments intact, streamed and not, and the tool's result goes back
// as a functionResponse named after the call.
func TestGoogleTools(t *testing.T) {
	w := startGoogleWorld(t, mockllm.Config{}, "")
	seen := recordRequests(w.mock.mock)
	c := w.client("unused", mockllm.HeaderText, url.QueryEscape("Let me check."), mockllm.HeaderToolCallAt, "13",
		mockllm.HeaderToolCallArgs, url.QueryEscape(`{"city":`)+","+url.QueryEscape(`"Paris","days":[1,2]}`))
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
		Name:        "mock_tool",
		Description: openai.String("Weather by city."),
		Parameters: openai.FunctionParameters{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}},
			"required":   []string{"city"}},
	})}
	for _, model := range []string{"gemini-x", "vertex-x"} {
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s stream=%v", model, stream)
			msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}
			got := chat(t, c, openai.ChatCompletionNewParams{Model: model, Messages: msgs, Tools: tools}, stream)
			req := <-seen
			if !strings.Contains(string(req.body), `"functionDeclarations":[{"name":"mock_tool","description":"Weather by city.","parameters":{`) ||
				!strings.Contains(string(req.body), `"days":{"items":{"type":"INTEGER"},"type":"ARRAY"}},"required":["city"],"type":"OBJECT"}`) {
				t.Errorf("%s: upstream request %s", name, req.body)
			}
			m := got.Choices[0].Message
			if m.Content != "Let me check." || len(m.ToolCalls) != 1 || got.Choices[0].FinishReason != "tool_calls" {
				t.Fatalf("%s: %+v", name, got.Choices[0])
			}
			call := m.ToolCalls[0]
			if call.Function.Name != "mock_tool" || call.Function.Arguments != `{"city":"Paris","days":[1,2]}` || !strings.HasPrefix(call.ID, "call_") {
				t.Errorf("%s: tool call %+v", name, call)
			}
			// The tool's result goes back, matched to the call by name.
			msgs = append(msgs, m.ToParam(), openai.ToolMessage("18C and sunny", call.ID))
			got = chat(t, c, openai.ChatCompletionNewParams{Model: model, Messages: msgs, Tools: tools}, stream)
			req = <-seen
			if len(got.Choices) != 1 || !strings.Contains(string(req.body),
				`{"role":"user","parts":[{"functionResponse":{"name":"mock_tool","response":{"output":"18C and sunny"}}}]}`) ||
				!strings.Contains(string(req.body), `{"functionCall":{"name":"mock_tool","args":{"city":"Paris","days":[1,2]}},"thoughtSignature":`) {
				t.Errorf("%s: follow-up sent %s", name, req.body)
			}
			<-w.mock.paths
			<-w.mock.paths
		}
	}
}

// TestGoogleRefusalsAndErrors: what Gemini cannot express is refused
// with a 400 naming the parameter before anything is sent; Google's
// errors reach the client as OpenAI errors with their status, a quota
// error's RetryInfo as Retry-After.
func TestGoogleRefusalsAndErrors(t *testing.T) {
	w := startGoogleWorld(t, mockllm.Config{}, "")
	for _, tc := range []struct {
		name, model, body string
		hdr               []string
		status            int
		param, code       string
		retryAfter        string
	}{
		{"n=2", "gemini-x", `{"model":"gemini-x","n":2,"messages":[{"role":"user","content":"x"}]}`, nil, 400, "n", "", ""},
		{"$ref schema", "vertex-x", `{"model":"vertex-x","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}}}}}]}`,
			nil, 400, "tools[0].function.parameters.properties.a.$ref", "", ""},
		{"quota", "gemini-x", `{"model":"gemini-x","messages":[{"role":"user","content":"x"}]}`, []string{mockllm.HeaderFailStatus, "429"}, 429, "", "rate_limit_exceeded", "1"},
		{"vertex quota", "vertex-x", `{"model":"vertex-x","messages":[{"role":"user","content":"x"}]}`, []string{mockllm.HeaderFailStatus, "429"}, 429, "", "rate_limit_exceeded", "1"},
		{"unavailable", "vertex-x", `{"model":"vertex-x","stream":true,"messages":[{"role":"user","content":"x"}]}`, []string{mockllm.HeaderFailStatus, "503"}, 503, "", "unavailable", "1"},
	} {
		status, hdr, body := post(t, w.gw+"/v1/chat/completions", tc.body, tc.hdr...)
		if got := hdr.Get("Retry-After"); got != tc.retryAfter {
			t.Errorf("%s: Retry-After %q, want %q", tc.name, got, tc.retryAfter)
		}
		var e struct {
			Error struct {
				Message string
				Param   *string
				Code    *string
			}
		}
		if err := json.Unmarshal(body, &e); err != nil || status != tc.status || e.Error.Message == "" ||
			(tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param)) ||
			(tc.code != "" && (e.Error.Code == nil || *e.Error.Code != tc.code)) {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
		if n := len(w.mock.paths); tc.status == 400 && n != 0 {
			t.Errorf("%s: a refused request reached the upstream", tc.name)
		}
	}
}

// TestGoogleVertexNoToken: when the token endpoint refuses, a Vertex
// request gets a 502 naming the upstream and the credentials file, never
// the key, and nothing reaches the upstream.
func TestGoogleVertexNoToken(t *testing.T) {
	m := startGoogleMock(t, mockllm.Config{})
	tokenURL := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
	})
	cred := serviceAccountFile(t, tokenURL+"/token")
	_, gw := startGateway(t, googlePolicy(m.url, cred, ""), googleVars)
	status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"vertex-x","messages":[{"role":"user","content":"hi"}]}`)
	key, _ := os.ReadFile(cred)
	var e struct {
		Error struct{ Message, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil || status != 502 || e.Error.Code != "upstream_credentials" ||
		!strings.Contains(e.Error.Message, `"vertex"`) || !strings.Contains(e.Error.Message, "credentials file "+cred) ||
		strings.Contains(string(body), "PRIVATE KEY") || strings.Contains(string(body), string(key[len(key)/2:len(key)/2+40])) {
		t.Fatalf("%d %s", status, body)
	}
	if n := len(m.paths); n != 0 {
		t.Fatalf("%d requests reached the upstream", n)
	}
}
