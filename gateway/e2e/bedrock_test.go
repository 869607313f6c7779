package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The Bedrock provider: the gateway in front of the mock speaking
// Converse/ConverseStream, which verifies every request's SigV4
// signature with the keys the gateway reads from the environment (the AWS
// SDK's default chain), driven by the OpenAI Go SDK.

const (
	bedrockKeyID   = "AKIDE2EBEDROCK"
	bedrockSecret  = "e2e/bedrock/secret"
	bedrockModelID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
)

// bedrockEnv puts static AWS credentials in the environment, and nothing
// else the default chain could find.
func bedrockEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": bedrockKeyID, "AWS_SECRET_ACCESS_KEY": bedrockSecret, "AWS_SESSION_TOKEN": "",
		"AWS_CONFIG_FILE": dir + "/config", "AWS_SHARED_CREDENTIALS_FILE": dir + "/credentials",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
	} {
		t.Setenv(k, v)
	}
}

// startBedrockMock serves the mock's Converse API, checking signatures,
// and records each request's path.
func startBedrockMock(t *testing.T, cfg mockllm.Config) (string, func() []string) {
	t.Helper()
	cfg.AWSSecretKeys = map[string]string{bedrockKeyID: bedrockSecret}
	m := mockllm.New(cfg)
	var mu sync.Mutex
	var paths []string
	u := startUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		m.ServeHTTP(w, r)
	})
	return u, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
}

// bedrockPolicy routes mock-1 to a bedrock upstream at mockURL, which
// knows it as bedrockModelID; extra is appended.
func bedrockPolicy(mockURL, extra string) string {
	return fmt.Sprintf(`
version: 1
server:
  max_body_bytes: 64KiB
  drain_timeout: 2s
upstreams:
  - name: aws
    provider: bedrock
    bedrock: {region: us-west-2}
    base_url: %s
    model_ids: {mock-1: %q}
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
routes:
  - models: ["mock-1"]
    upstream: aws
    retry: {attempts: 1}
%s`, mockURL, bedrockModelID, extra)
}

func sdkClient(gw, key string, headers ...string) *openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(gw + "/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0)}
	for i := 0; i+1 < len(headers); i += 2 {
		opts = append(opts, option.WithHeader(headers[i], headers[i+1]))
	}
	c := openai.NewClient(opts...)
	return &c
}

// weatherParams asks for the weather with one tool offered.
func weatherParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "mock-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello there, mock")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "mock_tool", Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})},
	}
}

// The mock's reply with these headers: "Let me check. Done." in 5-byte
// pieces around a tool call after 14 bytes whose arguments stream in two
// fragments; 4 output tokens (the text pieces), 6 input tokens ("Be
// brief." and "Hello there, mock": 26 characters).
var bedrockToolHeaders = []string{mockllm.HeaderText, "Let me check. Done.", mockllm.HeaderToolCallAt, "14",
	mockllm.HeaderToolCallArgs, `{"city":,"Paris"}`, mockllm.HeaderChunkSize, "5"}

func TestBedrockOpenAISDK(t *testing.T) {
	bedrockEnv(t)
	mockURL, paths := startBedrockMock(t, mockllm.Config{})
	_, gw := startGateway(t, bedrockPolicy(mockURL, ""), nil)
	ctx := context.Background()
	client := sdkClient(gw, "unused", bedrockToolHeaders...)

	t.Run("chat with a tool call", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(ctx, weatherParams())
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if resp.Model != "mock-1" || c.Message.Content != "Let me check. Done." || c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
			t.Fatalf("model %q, content %q, finish %q, %d tool calls", resp.Model, c.Message.Content, c.FinishReason, len(c.Message.ToolCalls))
		}
		if tc := c.Message.ToolCalls[0]; tc.Function.Name != "mock_tool" || tc.Function.Arguments != `{"city":"Paris"}` || tc.ID != "tooluse_mock" {
			t.Errorf("tool call %+v", tc)
		}
		if u := resp.Usage; u.PromptTokens != 6 || u.CompletionTokens != 4 || u.TotalTokens != 10 {
			t.Errorf("usage %d+%d=%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
		}
	})
	t.Run("stream with a tool call", func(t *testing.T) {
		p := weatherParams()
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		st := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		for st.Next() {
			acc.AddChunk(st.Current())
			chunks++
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		c := acc.Choices[0]
		if acc.Model != "mock-1" || c.Message.Content != "Let me check. Done." || c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || chunks < 8 {
			t.Fatalf("model %q, content %q, finish %q, %d tool calls, %d chunks", acc.Model, c.Message.Content, c.FinishReason, len(c.Message.ToolCalls), chunks)
		}
		if tc := c.Message.ToolCalls[0]; tc.Function.Name != "mock_tool" || tc.Function.Arguments != `{"city":"Paris"}` {
			t.Errorf("tool call %+v", tc)
		}
		if u := acc.Usage; u.PromptTokens != 6 || u.CompletionTokens != 4 || u.TotalTokens != 10 {
			t.Errorf("usage %d+%d=%d", u.PromptTokens, u.CompletionTokens, u.TotalTokens)
		}
	})
	want := "/model/" + url.PathEscape(bedrockModelID)
	want = strings.ReplaceAll(want, ":", "%3A")
	if got := paths(); len(got) != 2 || got[0] != want+"/converse" || got[1] != want+"/converse-stream" {
		t.Errorf("upstream paths %q, want %s/converse then /converse-stream", got, want)
	}

}

// TestBedrockErrors: Bedrock's errors, and requests Converse cannot
// express, reach the OpenAI SDK as OpenAI errors.
func TestBedrockErrors(t *testing.T) {
	bedrockEnv(t)
	mockURL, _ := startBedrockMock(t, mockllm.Config{})
	_, gw := startGateway(t, bedrockPolicy(mockURL, ""), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		hdr    []string
		params func(*openai.ChatCompletionNewParams)
		status int
		code   string
		param  string
	}{
		{"throttled", []string{mockllm.HeaderFailStatus, "429"}, nil, 429, "rate_limit_exceeded", ""},
		{"unavailable", []string{mockllm.HeaderFailStatus, "503"}, nil, 503, "overloaded", ""},
		{"model timeout", []string{mockllm.HeaderFailStatus, "408"}, nil, 504, "upstream_timeout", ""},
		{"access denied", []string{mockllm.HeaderFailStatus, "403"}, nil, 403, "permission_denied", ""},
		// The exception Bedrock names in X-Amzn-Errortype decides, not the
		// status alone.
		{"quota exceeded", []string{mockllm.HeaderFailStatus, "400", mockllm.HeaderBedrockErrorType, "ServiceQuotaExceededException"}, nil, 429, "rate_limit_exceeded", ""},
		{"model not ready", []string{mockllm.HeaderFailStatus, "429", mockllm.HeaderBedrockErrorType, "ModelNotReadyException"}, nil, 503, "overloaded", ""},
		{"unrecognized client", []string{mockllm.HeaderFailStatus, "403", mockllm.HeaderBedrockErrorType, "UnrecognizedClientException"}, nil, 401, "invalid_api_key", ""},
		{"validation", []string{mockllm.HeaderFailStatus, "400", mockllm.HeaderBedrockErrorType, "ValidationException"}, nil, 400, "", ""},
		{"n > 1 refused", nil, func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(2) }, 400, "", "n"},
		{"json_object refused", nil, func(p *openai.ChatCompletionNewParams) {
			p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		}, 400, "", "response_format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := weatherParams()
			if tc.params != nil {
				tc.params(&p)
			}
			_, err := sdkClient(gw, "unused", tc.hdr...).Chat.Completions.New(ctx, p)
			var e *openai.Error
			if !errors.As(err, &e) || e.StatusCode != tc.status || e.Code != tc.code || e.Param != tc.param {
				t.Fatalf("err %v, want %d code %q param %q", err, tc.status, tc.code, tc.param)
			}
		})
	}
}

// TestBedrockStreamException: an exception Bedrock sends mid-stream
// reaches the client as an OpenAI error event after the text before it,
// and the OpenAI SDK reports it.
func TestBedrockStreamException(t *testing.T) {
	bedrockEnv(t)
	mockURL, _ := startBedrockMock(t, mockllm.Config{Text: "Some text before it breaks.", ChunkSize: 5})
	_, gw := startGateway(t, bedrockPolicy(mockURL, ""), nil)
	status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		mockllm.HeaderBedrockException, "modelStreamErrorException@3")
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	last := events[len(events)-1]
	text, done := sseText(t, body)
	if status != 200 || text != "Some text " || done ||
		last != `data: {"error":{"message":"mock: modelStreamErrorException","type":"upstream_error","param":null,"code":"model_error"}}` {
		t.Fatalf("%d, text %q, [DONE] %v, last event %s\n%s", status, text, done, last, body)
	}
	st := sdkClient(gw, "unused", mockllm.HeaderBedrockException, "throttlingException").Chat.Completions.NewStreaming(context.Background(),
		openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	n := 0
	for st.Next() {
		n++
	}
	if err := st.Err(); err == nil || !strings.Contains(err.Error(), "mock: throttlingException") || n != 2 {
		t.Fatalf("%d chunks, then %v", n, err)
	}
}

// TestBedrockSignatureRefused: with credentials the upstream does not
// accept, Bedrock's 403 InvalidSignatureException reaches the client as
// an OpenAI 401 invalid_api_key, with Bedrock's message.
func TestBedrockSignatureRefused(t *testing.T) {
	bedrockEnv(t)
	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	mockURL, _ := startBedrockMock(t, mockllm.Config{})
	_, gw := startGateway(t, bedrockPolicy(mockURL, ""), nil)
	status, _, body := post(t, gw+"/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`)
	if status != 401 || !strings.Contains(string(body), "signature we calculated does not match") || !strings.Contains(string(body), `"code":"invalid_api_key"`) {
		t.Fatalf("%d %s", status, body)
	}
}

// TestBedrockBuiltinPlugins runs the built-in plugins of `make run`'s
// default policy in front of Bedrock: preflight, ratelimit (the fourth
// request of a key allowed 3 a minute is a 429), budget, and holdback
// stopping a stream on a marker URL.
func TestBedrockBuiltinPlugins(t *testing.T) {
	bedrockEnv(t)
	mockURL, _ := startBedrockMock(t, mockllm.Config{InterToken: time.Millisecond})
	const marker = "oaidalleapiprodscus.blob.core.windows.net"
	pol := bedrockPolicy(mockURL, `
store:
  kind: memory
tenants:
  plans:
    - {id: demo, rpm: 60, tpm: 1000000, monthly_budget_usd: 5, max_tokens: 1024, allowed_models: ["mock-*"]}
  tenants:
    - id: demo
      plan: demo
      keys:
        - {id: demo, key_env: BEDROCK_DEMO_KEY, prefix: tg_demo}
        - {id: demo-limited, key_env: BEDROCK_LIMITED_KEY, prefix: tg_demo, rpm: 3}
  prices:
    - {model: mock-1, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.60}
plugins:
  - {name: preflight, builtin: preflight}
  - {name: ratelimit, builtin: ratelimit, config: {default_max_tokens: 64}}
  - {name: budget, builtin: budget, config: {default_max_tokens: 64}}
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: {markers: [`+marker+`], case_insensitive: true}
`)
	key, limited := "tg_demo_"+strings.Repeat("a", 48), "tg_demo_"+strings.Repeat("b", 48)
	t.Setenv("BEDROCK_DEMO_KEY", key)
	t.Setenv("BEDROCK_LIMITED_KEY", limited)
	gw, logs := startLoggingGateway(t, pol, map[string]string{"BEDROCK_DEMO_KEY": key, "BEDROCK_LIMITED_KEY": limited})
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there, mock")}}

	t.Run("ratelimit", func(t *testing.T) {
		var got []int
		for range 4 {
			_, err := sdkClient(gw, limited).Chat.Completions.New(ctx, params)
			var e *openai.Error
			switch {
			case err == nil:
				got = append(got, 200)
			case errors.As(err, &e):
				got = append(got, e.StatusCode)
			default:
				t.Fatal(err)
			}
		}
		if fmt.Sprint(got) != "[200 200 200 429]" {
			t.Errorf("statuses %v, want [200 200 200 429]", got)
		}
	})
	t.Run("usage settled", func(t *testing.T) {
		client := sdkClient(gw, key, mockllm.HeaderText, "Twelve bytes of text, more or less.", mockllm.HeaderChunkSize, "5", "X-Request-Id", "bedrock-usage")
		resp, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		// 4 input tokens ("Hello there, mock"), 7 output (35 bytes in
		// 5-byte pieces): what the access log records and the limits settle.
		tenant, _, status, prompt, completion := accessLog(t, logs, "bedrock-usage")
		if resp.Usage.PromptTokens != 4 || resp.Usage.CompletionTokens != 7 || tenant != "demo" || status != 200 || prompt != 4 || completion != 7 {
			t.Errorf("usage %+v; access log tenant %s status %d tokens %d+%d", resp.Usage, tenant, status, prompt, completion)
		}
	})
	t.Run("holdback stops a stream on the marker", func(t *testing.T) {
		text := "Here is your image: https://" + marker + "/private/img.png enjoy!"
		client := sdkClient(gw, key, mockllm.HeaderText, url.QueryEscape(text), mockllm.HeaderChunkSize, "7")
		st := client.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		c := acc.Choices[0]
		if strings.Contains(strings.ToLower(c.Message.Content), marker) || !strings.HasPrefix(c.Message.Content, "Here is your image: ") || c.FinishReason != "content_filter" {
			t.Errorf("content %q, finish %q", c.Message.Content, c.FinishReason)
		}
	})
}

// TestBedrockBudgetLedger: the budget settles, and the Postgres call log
// records, the tokens Bedrock reported, streamed and not.
func TestBedrockBudgetLedger(t *testing.T) {
	bedrockEnv(t)
	w := newBudgetWorld(t, 1_000_000)
	mockURL, _ := startBedrockMock(t, mockllm.Config{Text: "Twelve bytes of text, more or less.", ChunkSize: 5})
	pol := bedrockPolicy(mockURL, w.stores("")+`plugins:
  - {name: preflight, builtin: preflight}
  - {name: budget, builtin: budget}
`)
	_, gw := startGateway(t, pol, map[string]string{"TOLLGATE_DATABASE_URL": w.dsn, "TG_TEST_SPOOL": t.TempDir()})
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: "mock-1", MaxTokens: openai.Int(50), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello there, mock")}}
	ids := []string{"led-bedrock", "led-bedrock-stream"}
	if _, err := sdkClient(gw, w.key, "X-Request-Id", ids[0]).Chat.Completions.New(ctx, params); err != nil {
		t.Fatal(err)
	}
	st := sdkClient(gw, w.key, "X-Request-Id", ids[1]).Chat.Completions.NewStreaming(ctx, params)
	for st.Next() {
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	w.waitRows(t, int64(len(ids)))
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// 4 prompt tokens at 1 µ$, 7 completion tokens at 10 µ$.
	const cost = 4*inputMicrosPerMTok/1_000_000 + 7*outputMicrosPerMTok/1_000_000
	for _, id := range ids {
		var prompt, completion, micros int64
		var up, model string
		if err := conn.QueryRow(ctx, `SELECT prompt_tokens, completion_tokens, cost_micros, upstream, model FROM call_log WHERE request_id = $1`, id).
			Scan(&prompt, &completion, &micros, &up, &model); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if prompt != 4 || completion != 7 || micros != cost || up != "aws" || model != "mock-1" {
			t.Errorf("%s: call_log %d+%d tokens, %d µ$, upstream %q, model %q; want 4+7, %d µ$, aws, mock-1", id, prompt, completion, micros, up, model, cost)
		}
	}
	spent, holds := w.counter(t)
	if spent != fmt.Sprint(len(ids)*cost) || (holds != "0" && holds != "") {
		t.Errorf("budget counter spent %s, held %s; want %d spent, nothing held", spent, holds, len(ids)*cost)
	}
}
