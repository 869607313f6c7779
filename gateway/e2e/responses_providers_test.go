package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// OpenAI's Responses API in front of the translated providers: a
// Responses request becomes a chat request, the Bedrock and Google
// adapters turn that into Converse and generateContent, and the replies
// come back as a Response or a Responses stream, with the built-in
// plugins of `make run`'s default policy on.

// responsesProviderModels are the client's models, one per provider.
var responsesProviderModels = []string{"bedrock-x", "gemini-x", "vertex-x"}

// responsesProvidersPolicy routes bedrock-x to a bedrock upstream at
// bedrockURL and gemini-x, vertex-x to Google's two APIs at googleURL,
// with a memory-store tenant (key tg-resp, and tg-resp-limited allowed
// two requests a minute), prices of 1 µ$ an input token and 10 µ$ an
// output token, and the four built-in plugins.
func responsesProvidersPolicy(bedrockURL, googleURL, credFile string) string {
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 64KiB
  drain_timeout: 2s
upstreams:
  - name: aws
    provider: bedrock
    bedrock: {region: us-west-2}
    base_url: %[1]s
    model_ids: {bedrock-x: %[4]q}
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
  - name: gemini
    provider: gemini
    base_url: %[2]s/v1beta
    api_key_env: GEMINI_API_KEY
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
    model_ids: {gemini-x: gemini-2.0-flash}
  - name: vertex
    provider: vertex
    base_url: %[2]s/v1
    vertex: {project: proj-1, location: us-central1, credentials_file: %[3]q}
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 2s, first_byte: 5s, idle: 5s, total: 30s}
    model_ids: {vertex-x: gemini-2.5-pro}
routes:
  - models: ["bedrock-x"]
    upstream: aws
    retry: {attempts: 1}
  - models: ["gemini-*"]
    upstream: gemini
  - models: ["vertex-*"]
    upstream: vertex
store:
  kind: memory
tenants:
  plans:
    - {id: metered, rpm: 1000, tpm: 1000000, monthly_budget_usd: 5, max_tokens: 1024}
  tenants:
    - id: acme
      plan: metered
      keys:
        - {id: k-1, key_sha256: %[5]s}
        - {id: k-limited, key_sha256: %[6]s, rpm: 2}
  prices:
    - {model: bedrock-x, input_usd_per_mtok: 1, output_usd_per_mtok: 10, effective_from: 2000-01-01T00:00:00Z}
    - {model: gemini-x, input_usd_per_mtok: 1, output_usd_per_mtok: 10, effective_from: 2000-01-01T00:00:00Z}
    - {model: vertex-x, input_usd_per_mtok: 1, output_usd_per_mtok: 10, effective_from: 2000-01-01T00:00:00Z}
plugins:
  - name: preflight
    builtin: preflight
  - name: ratelimit
    builtin: ratelimit
    config: {default_max_tokens: 64}
  - name: budget
    builtin: budget
    config: {default_max_tokens: 64}
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: %[7]s
`, bedrockURL, googleURL, credFile, bedrockModelID, sha("tg-resp"), sha("tg-resp-limited"), hbConfig)
}

// startResponsesProviders starts both mocks, the token server and the
// gateway in front, and returns the gateway's URL and its logs.
func startResponsesProviders(t *testing.T, cfg mockllm.Config) (string, *lockedBuffer) {
	t.Helper()
	bedrockEnv(t)
	bedrockURL, _ := startBedrockMock(t, cfg)
	google := startGoogleMock(t, cfg)
	tokenURL, _ := startTokenServer(t)
	return startLoggingGateway(t, responsesProvidersPolicy(bedrockURL, google.url, serviceAccountFile(t, tokenURL)), googleVars)
}

func TestResponsesProviders(t *testing.T) {
	const text = "The quick brown fox jumps over the lazy dog."
	gw, logs := startResponsesProviders(t, mockllm.Config{Text: text, ChunkSize: 7})
	client := responsesClient(gw, option.WithAPIKey("tg-resp"))
	tool := responses.ToolParamOfFunction("mock_tool", map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)
	for _, model := range responsesProviderModels {
		for _, stream := range []bool{false, true} {
			for _, withTool := range []bool{false, true} {
				name := fmt.Sprintf("%s stream=%v tool=%v", model, stream, withTool)
				t.Run(name, func(t *testing.T) {
					id := "rp-" + strings.NewReplacer(" ", "-", "=", "-").Replace(name)
					params := responses.ResponseNewParams{
						Model:           model,
						Instructions:    openai.String("Answer briefly."),
						Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about foxes.")},
						MaxOutputTokens: openai.Int(200),
						Store:           openai.Bool(false),
					}
					opts := []option.RequestOption{option.WithHeader("X-Request-Id", id)}
					wantArgs := ""
					if withTool {
						params.Tools = []responses.ToolUnionParam{tool}
						// The arguments arrive in two fragments.
						opts = append(opts, option.WithHeader(mockllm.HeaderToolCallAt, "10"), option.WithHeader(mockllm.HeaderToolCallArgs, "%7B%22city%22%3A,%22Paris%22%7D"))
						wantArgs = `{"city":"Paris"}`
					}
					r, err := runResponses(t, client, params, stream, opts...)
					if err != nil {
						t.Fatal(err)
					}
					if r.text != text || r.status != "completed" || r.args != wantArgs || (withTool && r.callID == "") {
						t.Fatalf("text %q status %s args %q call %q, want %q completed %q (events %v)", r.text, r.status, r.args, r.callID, text, wantArgs, r.events)
					}
					if r.resp.Model != model {
						t.Errorf("model %q, want the client's %q", r.resp.Model, model)
					}
					if r.input <= 0 || r.output <= 0 || r.resp.Usage.TotalTokens != r.input+r.output {
						t.Fatalf("usage: %d in, %d out, %d total", r.input, r.output, r.resp.Usage.TotalTokens)
					}
					if stream && r.events[0] != "response.created" {
						t.Errorf("first event %s", r.events[0])
					}
					// The gateway metered, and the budget settled, the usage
					// the provider reported.
					tenant, endpoint, status, prompt, completion := accessLog(t, logs, id)
					if tenant != "acme" || endpoint != "/v1/responses" || status != 200 || int64(prompt) != r.input || int64(completion) != r.output {
						t.Fatalf("access log: %s %s %d %d+%d tokens, the client got %d+%d", tenant, endpoint, status, prompt, completion, r.input, r.output)
					}
					if cost := accessCost(t, logs, id); cost != r.input+10*r.output {
						t.Errorf("settled %d µ$, the usage reported costs %d", cost, r.input+10*r.output)
					}
				})
			}
		}
	}

	t.Run("a tool result goes back", func(t *testing.T) {
		for _, model := range responsesProviderModels {
			for _, stream := range []bool{false, true} {
				out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp":20}`)
				out.OfFunctionCallOutput.CallID = openai.String("call_mock")
				params := responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{tool},
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
						responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
						responses.ResponseInputItemParamOfFunctionCall(`{"city":"Paris"}`, "call_mock", "mock_tool"),
						out,
					}}}
				r, err := runResponses(t, client, params, stream)
				if err != nil || r.text != text || r.status != "completed" {
					t.Fatalf("%s stream=%v: %v %q %s", model, stream, err, r.text, r.status)
				}
			}
		}
	})
}

// TestResponsesProvidersPlugins: the rate limiter refuses the third
// request of a key allowed two a minute, and holdback stops a Responses
// stream (and replaces a whole Response) on a marker URL, through every
// translated provider.
func TestResponsesProvidersPlugins(t *testing.T) {
	gw, _ := startResponsesProviders(t, mockllm.Config{})
	ctx := context.Background()

	t.Run("ratelimit", func(t *testing.T) {
		limited := responsesClient(gw, option.WithAPIKey("tg-resp-limited"))
		for i, model := range []string{"bedrock-x", "gemini-x", "vertex-x"} {
			_, err := limited.Responses.New(ctx, responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			var e *openai.Error
			if i < 2 && err != nil {
				t.Fatalf("request %d to %s: %v", i, model, err)
			}
			if i == 2 && (!errors.As(err, &e) || e.StatusCode != 429) {
				t.Fatalf("third request: %v, want a 429", err)
			}
		}
	})

	t.Run("holdback", func(t *testing.T) {
		client := responsesClient(gw, option.WithAPIKey("tg-resp"))
		markerAt := strings.Index(hbText, hbMarker)
		clean := strings.ReplaceAll(hbText, hbMarker, "example.com")
		for _, model := range responsesProviderModels {
			for _, tc := range []struct {
				name, text, want, status string
				cuts                     []int
				stream                   bool
			}{
				{"marker split", hbText, hbText[:markerAt] + hbCorrection, "incomplete", []int{markerAt + 3, markerAt + 9}, true},
				{"clean URL", clean, clean, "completed", []int{10, 30, len(clean) - 3}, true},
				{"marker in a whole reply", hbText, hbCorrection, "completed", []int{markerAt + 3}, false},
			} {
				t.Run(model+" "+tc.name, func(t *testing.T) {
					params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw a cat")}, MaxOutputTokens: openai.Int(99)}
					r, err := runResponses(t, client, params, tc.stream, option.WithHeader(mockllm.HeaderText, url.QueryEscape(tc.text)),
						option.WithHeader(mockllm.HeaderSplit, hbSplit(tc.cuts...)))
					if err != nil {
						t.Fatal(err)
					}
					if r.text != tc.want || r.status != tc.status {
						t.Fatalf("text %q status %s, want %q %s (events %v)", r.text, r.status, tc.want, tc.status, r.events)
					}
					if tc.status == "incomplete" && r.reason != "content_filter" {
						t.Errorf("incomplete_details.reason %q", r.reason)
					}
				})
			}
		}
	})
}

// TestResponsesAzureNative: an Azure upstream whose api_version has the
// Responses API (v1, or a 2025-03-01-preview or later) gets a Responses
// request as it is, on its Responses path, the deployment named in the
// body's model; the reply and its events pass back, metered from the
// usage Azure reported, and holdback stops a stream on a marker URL. The
// stored response is found, listed and deleted there.
func TestResponsesAzureNative(t *testing.T) {
	setAzureKeys(t)
	const text = "Foxes are small omnivores."
	for _, tc := range []struct{ version, path, query string }{
		{"v1", "/openai/v1/responses", ""},
		{"2025-04-01-preview", "/openai/responses", "?api-version=2025-04-01-preview"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			mockURL, seen := startAzureMock(t, mockllm.Config{Text: text, ChunkSize: 6})
			// The plan lists no models: a stored-response request names none.
			pol := strings.NewReplacer(`api_version: "2024-10-21"`, fmt.Sprintf("api_version: %q", tc.version),
				"monthly_budget_usd: 0.02", "monthly_budget_usd: 5", `, allowed_models: ["gpt-*"]`, "").Replace(azurePolicy(mockURL))
			gw, logs := startLoggingGateway(t, pol, azureVars)
			client := azureSDK(gw, azureTenant)
			tool := responses.ToolParamOfFunction("mock_tool", map[string]any{"type": "object"}, false)
			var last *responses.Response
			for _, stream := range []bool{false, true} {
				id := fmt.Sprintf("az-native-%s-%v", tc.version, stream)
				r, err := runResponses(t, client, responses.ResponseNewParams{Model: "gpt-4o", MaxOutputTokens: openai.Int(50), Tools: []responses.ToolUnionParam{tool},
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("foxes?")}}, stream,
					option.WithHeader("X-Request-Id", id), option.WithHeader(mockllm.HeaderToolCallAt, "5"), option.WithHeader(mockllm.HeaderToolCallArgs, "%7B%22a%22%3A,1%7D"))
				if err != nil {
					t.Fatal(err)
				}
				if r.text != text || r.status != "completed" || r.args != `{"a":1}` || r.callID == "" || r.input <= 0 || r.output <= 0 {
					t.Fatalf("stream %v: text %q status %s args %q call %q usage %d+%d", stream, r.text, r.status, r.args, r.callID, r.input, r.output)
				}
				// The deployment answered under its own name, as Azure does.
				if r.resp.Model != "gpt4o-prod" {
					t.Errorf("model %q, want the deployment's", r.resp.Model)
				}
				if reqs := seen(); len(reqs) != 1 || reqs[0].uri != tc.path+tc.query || reqs[0].apiKey != azureKey {
					t.Fatalf("the upstream saw %+v, want %s%s", reqs, tc.path, tc.query)
				}
				if prompt, completion, cost := azureCost(t, logs, id); int64(prompt) != r.input || int64(completion) != r.output || cost != prompt+10*completion {
					t.Fatalf("metered %d+%d tokens for %d µ$, the reply said %d+%d", prompt, completion, cost, r.input, r.output)
				}
				last = r.resp
			}

			markerAt := strings.Index(hbText, hbMarker)
			r, err := runResponses(t, client, responses.ResponseNewParams{Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw")}}, true,
				option.WithHeader(mockllm.HeaderText, url.QueryEscape(hbText)), option.WithHeader(mockllm.HeaderSplit, hbSplit(markerAt+3, markerAt+9)))
			if err != nil || r.text != hbText[:markerAt]+hbCorrection || r.status != "incomplete" || r.reason != "content_filter" {
				t.Fatalf("holdback on Azure: %v text %q status %s reason %s", err, r.text, r.status, r.reason)
			}
			seen()

			ctx := context.Background()
			got, err := client.Responses.Get(ctx, last.ID, responses.ResponseGetParams{})
			if err != nil || got.OutputText() != text {
				t.Fatalf("Get: %v", err)
			}
			items, err := client.Responses.InputItems.List(ctx, last.ID, responses.InputItemListParams{Limit: openai.Int(5)})
			if err != nil || len(items.Data) != 1 {
				t.Fatalf("input items: %v %+v", err, items)
			}
			if err := client.Responses.Delete(ctx, last.ID); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			var e *openai.Error
			if _, err := client.Responses.Get(ctx, last.ID, responses.ResponseGetParams{}); !errors.As(err, &e) || e.StatusCode != 404 {
				t.Fatalf("Get after Delete: %v", err)
			}
			sep := "?"
			if tc.query != "" {
				sep = tc.query + "&"
			}
			want := []string{tc.path + "/" + last.ID + tc.query, tc.path + "/" + last.ID + "/input_items" + sep + "limit=5",
				tc.path + "/" + last.ID + tc.query, tc.path + "/" + last.ID + tc.query}
			var uris []string
			for _, r := range seen() {
				uris = append(uris, r.uri)
			}
			if fmt.Sprint(uris) != fmt.Sprint(want) {
				t.Errorf("stored-response requests went to %q, want %q", uris, want)
			}
		})
	}
}
