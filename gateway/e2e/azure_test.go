package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// The gateway in front of the mock speaking Azure OpenAI, driven by the
// OpenAI SDK as a client: deployment paths with api-version and the
// api-key, model_ids naming the deployment, chat streamed and not, tool
// calls, usage; and the built-in plugins at work as for an OpenAI
// upstream (rate limit, budget settled from Azure's usage, holdback).

const (
	azureKey    = "az-secret-key"
	azureTenant = "tg_az_tenant_key_0123456789"
	azureLimit  = "tg_az_limited_key_0123456789"
)

var azureVars = map[string]string{"AZ_KEY": azureKey, "AZ_TENANT_KEY": azureTenant, "AZ_LIMITED_KEY": azureLimit}

// azureRequest is what the Azure mock was sent.
type azureRequest struct{ uri, apiKey, auth string }

// startAzureMock serves the mock (Azure routes, key required) and
// records each request's URI and credentials.
func startAzureMock(t *testing.T, cfg mockllm.Config) (string, func() []azureRequest) {
	t.Helper()
	cfg.APIKey = azureKey
	m := mockllm.New(cfg)
	var mu sync.Mutex
	var seen []azureRequest
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, azureRequest{r.URL.RequestURI(), r.Header.Get("Api-Key"), r.Header.Get("Authorization")})
		mu.Unlock()
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, func() []azureRequest {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// azurePolicy: gpt-4o served by deployment gpt4o-prod, the built-in
// plugins on two keys (one limited to 3 requests a minute); prices of 1
// µ$ per prompt token and 10 µ$ per completion token with replies of at
// most 64 tokens (the catalog says 16,384 for gpt-4o), a budget of 20,000 µ$.
func azurePolicy(mockURL string) string {
	return fmt.Sprintf(`
version: 1
server:
  drain_timeout: 2s
upstreams:
  - name: azure
    provider: azure
    base_url: %s
    api_key_env: AZ_KEY
    azure: {api_version: "2024-10-21"}
    model_ids: {gpt-4o: gpt4o-prod}
    forward_headers: ["x-mock-*"]
    timeouts: {connect: 1s, first_byte: 5s, idle: 5s, total: 30s}
routes:
  - models: [gpt-4o]
    upstream: azure
store:
  kind: memory
tenants:
  plans:
    - {id: p, rpm: 1000, tpm: 10000000, monthly_budget_usd: 0.02, allowed_models: ["gpt-*"]}
  tenants:
    - id: az
      plan: p
      keys:
        - {id: main, key_env: AZ_TENANT_KEY}
        - {id: limited, key_env: AZ_LIMITED_KEY, rpm: 3}
  prices:
    - {model: gpt-4o, input_usd_per_mtok: 1, output_usd_per_mtok: 10, max_output_tokens: 64}
plugins:
  - {name: preflight, builtin: preflight}
  - {name: ratelimit, builtin: ratelimit, config: {default_max_tokens: 64}}
  - {name: budget, builtin: budget, config: {default_max_tokens: 64}}
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: %s
`, mockURL, hbConfig)
}

// setAzureKeys puts the tenants' keys where the memory store reads them.
func setAzureKeys(t *testing.T) {
	t.Setenv("AZ_TENANT_KEY", azureTenant)
	t.Setenv("AZ_LIMITED_KEY", azureLimit)
}

func azureSDK(gw, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(gw+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

var costRE = regexp.MustCompile(`request_id=(\S+) .*prompt_tokens=(\d+) completion_tokens=(\d+) .*cost_micros=(\d+)`)

// azureCost waits for request id's access log line and returns its
// token counts and cost.
func azureCost(t *testing.T, logs *lockedBuffer, id string) (prompt, completion, cost int) {
	t.Helper()
	accessLog(t, logs, id)
	for _, m := range costRE.FindAllStringSubmatch(logs.String(), -1) {
		if m[1] == id {
			fmt.Sscan(m[2], &prompt)
			fmt.Sscan(m[3], &completion)
			fmt.Sscan(m[4], &cost)
			return
		}
	}
	t.Fatalf("no cost for %s in\n%s", id, logs.String())
	return
}

func TestAzureUpstream(t *testing.T) {
	const text = "Azure says hello, deterministically."
	setAzureKeys(t)
	mockURL, seen := startAzureMock(t, mockllm.Config{Text: text, ChunkSize: 6})
	gw, logs := startLoggingGateway(t, azurePolicy(mockURL), azureVars)
	c := azureSDK(gw, azureTenant)
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}
	wantURI := "/openai/deployments/gpt4o-prod/chat/completions?api-version=2024-10-21"
	checkSent := func(t *testing.T) {
		t.Helper()
		s := seen()
		if len(s) != 1 || s[0].uri != wantURI || s[0].apiKey != azureKey || s[0].auth != "" {
			t.Errorf("the mock saw %+v, want one request to %s with the upstream's api-key only", s, wantURI)
		}
	}

	t.Run("chat", func(t *testing.T) {
		r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs},
			option.WithHeader("X-Request-Id", "az-chat"))
		if err != nil {
			t.Fatal(err)
		}
		// Azure's reply passes as sent: it names the deployment's model.
		if r.Choices[0].Message.Content != text || r.Model != "gpt4o-prod" || r.Usage.CompletionTokens == 0 || r.Usage.PromptTokens == 0 {
			t.Errorf("reply %+v", r)
		}
		checkSent(t)
		prompt, completion, cost := azureCost(t, logs, "az-chat")
		if prompt != int(r.Usage.PromptTokens) || completion != int(r.Usage.CompletionTokens) || cost != prompt+10*completion {
			t.Errorf("logged %d+%d tokens costing %d µ$, Azure reported %+v", prompt, completion, cost, r.Usage)
		}
	})

	t.Run("stream with a tool call", func(t *testing.T) {
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			Tools:         []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "mock_tool"})}},
			option.WithHeader(mockllm.HeaderToolCallAt, "6"), option.WithHeader(mockllm.HeaderToolCallArgs, `{"city":, "Paris"}`),
			option.WithHeader("X-Request-Id", "az-stream"))
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		m := acc.Choices[0].Message
		if m.Content != text || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "mock_tool" ||
			m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("message %+v finish %q", m, acc.Choices[0].FinishReason)
		}
		checkSent(t)
		prompt, completion, cost := azureCost(t, logs, "az-stream")
		if acc.Usage.CompletionTokens == 0 || prompt != int(acc.Usage.PromptTokens) || completion != int(acc.Usage.CompletionTokens) || cost != prompt+10*completion {
			t.Errorf("logged %d+%d tokens costing %d µ$, the stream reported %+v", prompt, completion, cost, acc.Usage)
		}
	})

	t.Run("stream without usage asked", func(t *testing.T) {
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}, option.WithHeader("X-Request-Id", "az-nousage"))
		var got strings.Builder
		for st.Next() {
			ch := st.Current()
			if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
				t.Error("a usage chunk the client did not ask for")
			}
			for _, ch := range ch.Choices {
				got.WriteString(ch.Delta.Content)
			}
		}
		if err := st.Err(); err != nil || got.String() != text {
			t.Errorf("text %q err %v", got.String(), err)
		}
		seen()
		if _, completion, _ := azureCost(t, logs, "az-nousage"); completion == 0 {
			t.Error("the usage the gateway asked Azure for was not settled")
		}
	})

	t.Run("holdback stops a marker URL", func(t *testing.T) {
		markerAt := strings.Index(hbText, hbMarker)
		st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs},
			option.WithHeader(mockllm.HeaderText, url.QueryEscape(hbText)), option.WithHeader(mockllm.HeaderSplit, hbSplit(markerAt+3, markerAt+9)))
		var got strings.Builder
		finish := ""
		for st.Next() {
			for _, ch := range st.Current().Choices {
				got.WriteString(ch.Delta.Content)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
			}
		}
		if err := st.Err(); err != nil || got.String() != hbText[:markerAt]+hbCorrection || finish != "content_filter" {
			t.Errorf("text %q finish %q err %v", got.String(), finish, err)
		}
		seen()
	})

	t.Run("budget settled from usage, then refused", func(t *testing.T) {
		// Spent so far: the three settled requests above and the stopped
		// one, far below the 20,000 µ$ budget; each request holds at least
		// 64 tokens at 10 µ$ and its prompt's bound (its body's bytes and
		// the template's, and 1,024 tokens of tool-use instructions for the
		// one with a tool), or grows its hold as it streams: settled at
		// their holds, the four would have left little room for this one.
		if _, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs}); err != nil {
			t.Fatalf("a request within the budget: %v", err)
		}
		_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, MaxTokens: openai.Int(2000)})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "insufficient_quota" {
			t.Errorf("a request whose hold exceeds what is left: %v", err)
		}
		seen()
	})

	t.Run("rate limited", func(t *testing.T) {
		lc := azureSDK(gw, azureLimit)
		var statuses []int
		for range 4 {
			_, err := lc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: msgs, MaxTokens: openai.Int(5)})
			var e *openai.Error
			switch {
			case err == nil:
				statuses = append(statuses, 200)
			case errors.As(err, &e):
				statuses = append(statuses, e.StatusCode)
			default:
				t.Fatal(err)
			}
		}
		if fmt.Sprint(statuses) != "[200 200 200 429]" {
			t.Errorf("statuses %v, want the 4th refused", statuses)
		}
		if n := len(seen()); n != 3 {
			t.Errorf("%d requests reached Azure, want 3", n)
		}
	})
}

// A wrong key is Azure's 401, passed to the client as an upstream error.
func TestAzureUpstreamAuthFailure(t *testing.T) {
	setAzureKeys(t)
	mockURL, _ := startAzureMock(t, mockllm.Config{})
	vars := map[string]string{"AZ_KEY": "wrong", "AZ_TENANT_KEY": azureTenant, "AZ_LIMITED_KEY": azureLimit}
	gw, _ := startLoggingGateway(t, azurePolicy(mockURL), vars)
	c := azureSDK(gw, azureTenant)
	_, err := c.Chat.Completions.New(context.Background(),
		openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 401 || !strings.Contains(e.RawJSON(), "invalid subscription key") {
		t.Errorf("err %v", err)
	}
}
