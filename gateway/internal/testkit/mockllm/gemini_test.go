package mockllm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"google.golang.org/genai"

	"github.com/tollgate/tollgate/gateway/internal/gemini"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// googleToken is a token provider for the genai client's Vertex backend.
type googleToken string

func (s googleToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: string(s), Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

// genaiClient returns Google's own client for the mock at srv, speaking
// the Gemini API with key, or Vertex AI with token as its OAuth token.
func genaiClient(t *testing.T, srv *httptest.Server, vertex bool, cred string, h http.Header) *genai.Client {
	t.Helper()
	cc := &genai.ClientConfig{HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL + "/", Headers: h}}
	if vertex {
		cc.Backend, cc.Project, cc.Location = genai.BackendVertexAI, "proj-1", "us-central1"
		cc.HTTPOptions.APIVersion = "v1"
		cc.Credentials = auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: googleToken(cred)})
	} else {
		cc.Backend, cc.APIKey = genai.BackendGeminiAPI, cred
		cc.HTTPClient = srv.Client()
	}
	c, err := genai.NewClient(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// genaiResult is what a genai call brought back.
type genaiResult struct {
	text, finish, calls string
	prompt, output      int32
	events              int
}

func genaiGenerate(t *testing.T, c *genai.Client, stream bool, maxTokens int32) (genaiResult, error) {
	t.Helper()
	var cfg *genai.GenerateContentConfig
	if maxTokens > 0 {
		cfg = &genai.GenerateContentConfig{MaxOutputTokens: maxTokens}
	}
	contents := []*genai.Content{genai.NewContentFromText("Hello there, mock", genai.RoleUser)}
	var r genaiResult
	add := func(resp *genai.GenerateContentResponse) {
		r.events++
		if len(resp.Candidates) > 0 && resp.Candidates[0].Content != nil {
			for _, part := range resp.Candidates[0].Content.Parts {
				r.text += part.Text
			}
		}
		for _, fc := range resp.FunctionCalls() {
			r.calls += fc.Name + "(" + mapString(fc.Args) + ")"
		}
		if len(resp.Candidates) > 0 && resp.Candidates[0].FinishReason != "" {
			r.finish = string(resp.Candidates[0].FinishReason)
		}
		if u := resp.UsageMetadata; u != nil {
			r.prompt, r.output = u.PromptTokenCount, u.CandidatesTokenCount
		}
	}
	if !stream {
		resp, err := c.Models.GenerateContent(context.Background(), "gemini-mock", contents, cfg)
		if err != nil {
			return r, err
		}
		add(resp)
		return r, nil
	}
	for resp, err := range c.Models.GenerateContentStream(context.Background(), "gemini-mock", contents, cfg) {
		if err != nil {
			return r, err
		}
		add(resp)
	}
	return r, nil
}

func mapString(m map[string]any) string {
	var b strings.Builder
	for k, v := range m { // one key in these tests
		b.WriteString(k + "=" + strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(toString(v), "\n", ""), " ", "")))
	}
	return b.String()
}

func toString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return itoa(int(v))
	}
	return "?"
}

func TestGenaiClient(t *testing.T) {
	const text = "Hello, \"Gemini\" — from the mock."
	tests := []struct {
		name      string
		header    http.Header
		maxTokens int32
		want      genaiResult
		events    int // streamed
	}{
		{name: "generated tokens", header: http.Header{HeaderTokens: {"3"}},
			want: genaiResult{text: "tok0 tok1 tok2 ", finish: "STOP", prompt: 4, output: 3}, events: 3},
		{name: "text in pieces", header: http.Header{HeaderText: {url.QueryEscape(text)}, HeaderChunkSize: {"8"}},
			want: genaiResult{text: text, finish: "STOP", prompt: 4, output: 5}, events: 5},
		{name: "max tokens", header: http.Header{HeaderTokens: {"10"}}, maxTokens: 2,
			want: genaiResult{text: "tok0 tok1 ", finish: "MAX_TOKENS", prompt: 4, output: 2}, events: 2},
		{name: "function call", header: http.Header{HeaderText: {"abcdef"}, HeaderChunkSize: {"3"},
			HeaderToolCallAt: {"3"}, HeaderToolCallArgs: {url.QueryEscape(`{"city":`) + "," + url.QueryEscape(`"Paris"}`)}},
			want: genaiResult{text: "abcdef", finish: "STOP", calls: "mock_tool(city=Paris)", prompt: 4, output: 2}, events: 3},
	}
	for _, vertex := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			for _, tc := range tests {
				name := map[bool]string{false: "gemini/", true: "vertex/"}[vertex] + map[bool]string{false: "whole/", true: "stream/"}[stream] + tc.name
				t.Run(name, func(t *testing.T) {
					srv := httptest.NewServer(New(Config{APIKey: "secret-1"}))
					defer srv.Close()
					got, err := genaiGenerate(t, genaiClient(t, srv, vertex, "secret-1", tc.header), stream, tc.maxTokens)
					if err != nil {
						t.Fatal(err)
					}
					want := tc.want
					want.events = 1
					if stream {
						want.events = tc.events
					}
					if got != want {
						t.Fatalf("got %+v\nwant %+v", got, want)
					}
				})
			}
		}
	}
}

func TestGenaiClientErrors(t *testing.T) {
	tests := []struct {
		name   string
		vertex bool
		cred   string
		header http.Header
		code   int
		status string
	}{
		{"wrong key", false, "nope", nil, 400, "INVALID_ARGUMENT"},
		{"wrong token", true, "nope", nil, 401, "UNAUTHENTICATED"},
		{"injected 429", false, "secret-1", http.Header{HeaderFailStatus: {"429"}}, 429, "RESOURCE_EXHAUSTED"},
		{"injected 503 on vertex", true, "secret-1", http.Header{HeaderFailStatus: {"503"}}, 503, "UNAVAILABLE"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(New(Config{APIKey: "secret-1"}))
			defer srv.Close()
			_, err := genaiGenerate(t, genaiClient(t, srv, tc.vertex, tc.cred, tc.header), false, 0)
			var ae genai.APIError
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.Status != tc.status {
				t.Fatalf("err = %#v, want %d %s", err, tc.code, tc.status)
			}
		})
	}
}

func TestGeminiRoute(t *testing.T) {
	tests := []struct {
		path          string
		model, method string
		vertex, ok    bool
	}{
		{"/v1beta/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash", "generateContent", false, true},
		{"/v1/models/m:streamGenerateContent", "m", "streamGenerateContent", false, true},
		{"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash", "generateContent", true, true},
		{"/v1/models/m:countTokens", "", "", false, false},
		{"/v1/models/:generateContent", "", "", false, false},
		{"/v1/projects/p/locations/l/publishers/meta/models/m:generateContent", "", "", false, false},
		{"/v1/chat/completions", "", "", false, false},
	}
	for _, tc := range tests {
		model, method, vertex, ok := geminiRoute(tc.path)
		if model != tc.model || method != tc.method || vertex != tc.vertex || ok != tc.ok {
			t.Errorf("geminiRoute(%q) = %q %q %v %v", tc.path, model, method, vertex, ok)
		}
	}
}

// TestGenerateContentThroughTranslator reads the mock's streams with the
// gateway's own translator: text, the tool call and usage come through,
// and a cut stream is an error.
func TestGenerateContentThroughTranslator(t *testing.T) {
	srv := httptest.NewServer(New(Config{APIKey: "k"}))
	defer srv.Close()
	body := `{"contents":[{"role":"user","parts":[{"text":"Hello there, mock"}]}]}`
	tests := []struct {
		name               string
		header             http.Header
		text, args, finish string
		prompt, output     int64
		wantErr            error
	}{
		{"text and tool", http.Header{HeaderText: {"abcdef"}, HeaderChunkSize: {"2"}, HeaderToolCallAt: {"4"},
			HeaderToolCallArgs: {url.QueryEscape(`{"q":1}`)}}, "abcdef", `{"q":1}`, "tool_calls", 4, 3, nil},
		{"cut", http.Header{HeaderTokens: {"5"}, HeaderCutAfter: {"2"}}, "tok0 tok1 ", "", "", 0, 0, io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1beta/models/m:streamGenerateContent?alt=sse", strings.NewReader(body))
			req.Header = tc.header.Clone()
			req.Header.Set("X-Goog-Api-Key", "k")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := gemini.NewStreamReader(0)
			r.Reset(resp.Body, "m", "id", 1, true)
			out, err := io.ReadAll(r)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var text, args, finish string
			var u openai.Usage
			var cp openai.ChunkParser
			var c openai.Chunk
			for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
				d, ok := sse.AppendData(nil, ev)
				if !ok || sse.IsDone(d) {
					continue
				}
				if err := cp.Parse(d, &c); err != nil {
					t.Fatal(err)
				}
				text += string(c.Text)
				for _, tc := range c.ToolCalls {
					args += string(tc.Arguments)
				}
				if c.FinishReason != nil {
					finish = string(c.FinishReason)
				}
				if c.Usage.Present {
					u = c.Usage
				}
			}
			if text != tc.text || args != tc.args || finish != tc.finish || u.PromptTokens != tc.prompt || u.CompletionTokens != tc.output {
				t.Fatalf("text %q args %q finish %q usage %+v", text, args, finish, u)
			}
		})
	}
}

func TestGenerateContentFunctionTurns(t *testing.T) {
	srv := httptest.NewServer(New(Config{}))
	defer srv.Close()
	call := `{"functionCall":{"name":"f","args":{}}}`
	resp := `{"functionResponse":{"name":"f","response":{"output":"x"}}}`
	tests := []struct {
		name, contents string
		status         int
	}{
		{"answered", `{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[` + call + `,` + call + `]},{"role":"user","parts":[` + resp + `,` + resp + `]}`, 200},
		{"call last", `{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[` + call + `]}`, 200},
		{"one of two answered", `{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[` + call + `,` + call + `]},{"role":"user","parts":[` + resp + `]}`, 400},
		{"not answered", `{"role":"user","parts":[{"text":"q"}]},{"role":"model","parts":[` + call + `]},{"role":"user","parts":[{"text":"and?"}]}`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.Post(srv.URL+"/v1beta/models/m:generateContent", "application/json", strings.NewReader(`{"contents":[`+tc.contents+`]}`))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if r.StatusCode != tc.status || (tc.status == 400 && !strings.Contains(string(body), `"status":"INVALID_ARGUMENT"`)) {
				t.Fatalf("%d %s", r.StatusCode, body)
			}
		})
	}
}
