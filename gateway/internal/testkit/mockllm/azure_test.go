package mockllm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// staticToken is an Entra ID credential that hands out one token.
type staticToken struct{ token string }

func (s staticToken) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if len(o.Scopes) != 1 || o.Scopes[0] != "https://cognitiveservices.azure.com/.default" {
		return azcore.AccessToken{}, errors.New("unexpected scopes")
	}
	return azcore.AccessToken{Token: s.token, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// azureClient is openai-go in Azure mode pointed at the mock.
func azureClient(url, version string, auth option.RequestOption, extra ...option.RequestOption) openai.Client {
	opts := append([]option.RequestOption{azure.WithEndpoint(url, version), auth, azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0)}, extra...)
	return openai.NewClient(opts...)
}

// The official client in Azure mode (deployment paths with api-version,
// api-key or an Entra ID token) gets the same content as from the OpenAI
// routes: text, a streamed tool call, usage, embeddings.
func TestAzureOfficialClient(t *testing.T) {
	const text = "Hello from Azure, mock."
	srv := httptest.NewServer(New(Config{APIKey: "az-key", Text: text, ChunkSize: 5}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		auth option.RequestOption
	}{
		{"api-key", azure.WithAPIKey("az-key")},
		{"entra", azure.WithTokenCredential(staticToken{"az-key"})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := azureClient(srv.URL, "2024-10-21", tc.auth)
			params := openai.ChatCompletionNewParams{Model: "my-deployment", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			r, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if r.Choices[0].Message.Content != text || r.Model != "my-deployment" || r.Usage.CompletionTokens == 0 {
				t.Errorf("reply %+v", r)
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := c.Chat.Completions.NewStreaming(ctx, params, option.WithHeader(HeaderToolCallAt, "5"), option.WithHeader(HeaderToolCallArgs, `{"a":,1}`))
			var acc openai.ChatCompletionAccumulator
			chunks := 0
			for st.Next() {
				acc.AddChunk(st.Current())
				chunks++
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			m := acc.Choices[0].Message
			if m.Content != text || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Arguments != `{"a":1}` ||
				acc.Choices[0].FinishReason != "tool_calls" || acc.Usage.TotalTokens == 0 {
				t.Errorf("stream (%d chunks) message %+v finish %q usage %+v", chunks, m, acc.Choices[0].FinishReason, acc.Usage)
			}
			e, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "emb-deployment", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
			if err != nil || len(e.Data) != 1 || len(e.Data[0].Embedding) != DefaultEmbeddingDims {
				t.Errorf("embeddings %+v %v", e, err)
			}
		})
	}
}

// Azure's v1 API: /openai/v1/..., the deployment in the body's model.
func TestAzureV1API(t *testing.T) {
	srv := httptest.NewServer(New(Config{APIKey: "az-key", Text: "v1 says hi"}))
	t.Cleanup(srv.Close)
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/openai/v1/"), option.WithHeader("api-key", "az-key"), option.WithMaxRetries(0))
	r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "dep", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || r.Choices[0].Message.Content != "v1 says hi" || r.Model != "dep" {
		t.Fatalf("%+v %v", r, err)
	}
}

// What Azure checks: the api-version on deployment paths, the key, the
// route; a stream opens with the prompt filter chunk.
func TestAzureChecks(t *testing.T) {
	srv := httptest.NewServer(New(Config{APIKey: "az-key", Text: "abc"}))
	t.Cleanup(srv.Close)
	body := `{"messages":[{"role":"user","content":"hi"}]}`
	tests := []struct {
		name, path, header, body string
		status                   int
		want                     string
	}{
		{"no api-version", "/openai/deployments/d/chat/completions", "api-key: az-key", body, 404, `"code":"404"`},
		{"bad api-version", "/openai/deployments/d/chat/completions?api-version=latest", "api-key: az-key", body, 404, `Resource not found`},
		{"v1 bad api-version", "/openai/v1/chat/completions?api-version=2024-10-21", "api-key: az-key", `{"model":"d"` + body[1:], 400, `API version not supported`},
		{"no key", "/openai/deployments/d/chat/completions?api-version=2024-10-21", "", body, 401, `missing subscription key`},
		{"wrong key", "/openai/deployments/d/chat/completions?api-version=2024-10-21", "api-key: nope", body, 401, `invalid subscription key`},
		{"unknown operation", "/openai/deployments/d/assistants?api-version=2024-10-21", "api-key: az-key", body, 404, `Resource not found`},
		{"model from the deployment", "/openai/deployments/my%20dep/chat/completions?api-version=2024-10-21", "api-key: az-key", body, 200, `"model":"my dep"`},
		{"below /v1", "/v1/openai/deployments/d/chat/completions?api-version=2024-10-21", "api-key: az-key", body, 200, `"content":"abc"`},
		{"bearer token", "/openai/deployments/d/chat/completions?api-version=2025-01-01-preview", "Authorization: Bearer az-key", body, 200, `"content":"abc"`},
		{"stream", "/openai/deployments/d/chat/completions?api-version=2024-10-21", "api-key: az-key", `{"stream":true,` + body[1:], 200,
			`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+tt.path, strings.NewReader(tt.body))
			if k, v, ok := strings.Cut(tt.header, ": "); ok {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, b, tt.status, tt.want)
			}
			if tt.name == "stream" && (!strings.HasPrefix(string(b), "data: {\"choices\":[],") || !strings.HasSuffix(string(b), "data: [DONE]\n\n")) {
				t.Errorf("stream %s", b)
			}
		})
	}
}

// The Responses API where Azure has it, through the official client:
// Azure mode on a preview api-version (/openai/responses), and the v1 API
// (/openai/v1/responses); the stored response is found, listed and
// deleted below the same path.
func TestAzureResponses(t *testing.T) {
	const text = "Responses from Azure, mock."
	srv := httptest.NewServer(New(Config{APIKey: "az-key", Text: text, ChunkSize: 4}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client openai.Client
	}{
		{"preview", azureClient(srv.URL, "2025-04-01-preview", azure.WithAPIKey("az-key"))},
		{"v1", openai.NewClient(option.WithBaseURL(srv.URL+"/openai/v1/"), option.WithHeader("api-key", "az-key"), option.WithMaxRetries(0))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.client
			params := responses.ResponseNewParams{Model: "my-deployment", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
			r, err := c.Responses.New(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if r.OutputText() != text || r.Model != "my-deployment" || r.Usage.OutputTokens == 0 {
				t.Fatalf("response %+v", r)
			}
			st := c.Responses.NewStreaming(ctx, params, option.WithHeader(HeaderToolCallAt, "5"))
			var got strings.Builder
			completed := false
			for st.Next() {
				ev := st.Current()
				switch ev.Type {
				case "response.output_text.delta":
					got.WriteString(ev.Delta)
				case "response.completed":
					completed = ev.Response.Usage.TotalTokens > 0
				}
			}
			if err := st.Err(); err != nil || got.String() != text || !completed {
				t.Fatalf("stream: %v, text %q, completed with usage %v", err, got.String(), completed)
			}
			if g, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || g.OutputText() != text {
				t.Fatalf("Get: %v", err)
			}
			if items, err := c.Responses.InputItems.List(ctx, r.ID, responses.InputItemListParams{}); err != nil || len(items.Data) != 1 {
				t.Fatalf("input items: %v", err)
			}
			if err := c.Responses.Delete(ctx, r.ID); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			var e *openai.Error
			if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &e) || e.StatusCode != 404 {
				t.Fatalf("Get after Delete: %v", err)
			}
		})
	}
	// A GA api-version, or an earlier preview, has no Responses API.
	for _, v := range []string{"2024-10-21", "2025-01-01-preview"} {
		c := azureClient(srv.URL, v, azure.WithAPIKey("az-key"))
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: "d", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 {
			t.Errorf("api-version %s: %v, want a 404", v, err)
		}
	}
	// The key is checked.
	bad := azureClient(srv.URL, "2025-04-01-preview", azure.WithAPIKey("nope"))
	_, err := bad.Responses.New(ctx, responses.ResponseNewParams{Model: "d", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 401 {
		t.Errorf("wrong key: %v, want a 401", err)
	}
}
