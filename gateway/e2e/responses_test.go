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
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// OpenAI's Responses API through the gateway, driven by the official Go
// SDK: to an OpenAI upstream (mock-1: passed through as it is) and to an
// Anthropic upstream (claude-x: translated to chat, then to the Messages
// API, and back).

// responsesClient is openai-go pointed at the gateway.
func responsesClient(gw string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(gw + "/v1/"), option.WithAPIKey("sk-client"), option.WithMaxRetries(0)}, opts...)...)
}

// responsesResult is what a client got from one Responses request.
type responsesResult struct {
	text, args, status, reason, callID string
	deltas                             string // the streamed text deltas, joined
	input, output                      int64
	events                             []string
	resp                               *responses.Response
}

// runResponses sends params with opts, streamed or not, and reads the
// reply as an SDK user would.
func runResponses(t *testing.T, client openai.Client, params responses.ResponseNewParams, stream bool, opts ...option.RequestOption) (responsesResult, error) {
	t.Helper()
	var r responsesResult
	if !stream {
		resp, err := client.Responses.New(context.Background(), params, opts...)
		if err != nil {
			return r, err
		}
		r.resp = resp
	} else {
		st := client.Responses.NewStreaming(context.Background(), params, opts...)
		var deltas, args strings.Builder
		seq := int64(-1)
		for st.Next() {
			ev := st.Current()
			if ev.SequenceNumber <= seq {
				t.Errorf("event %s numbered %d after %d", ev.Type, ev.SequenceNumber, seq)
			}
			seq = ev.SequenceNumber
			r.events = append(r.events, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.function_call_arguments.delta":
				args.WriteString(ev.Delta)
			case "response.completed", "response.incomplete":
				resp := ev.Response
				r.resp = &resp
			case "error":
				return r, fmt.Errorf("error event: %s %s", ev.Code, ev.Message)
			}
		}
		if err := st.Err(); err != nil {
			return r, err
		}
		r.deltas = deltas.String()
		if r.resp == nil {
			return r, errors.New("the stream did not end with the response")
		}
		if got := r.resp.OutputText(); got != r.deltas {
			t.Errorf("streamed text %q, but the final response holds %q", r.deltas, got)
		}
		if r.args != "" && args.String() != r.args {
			t.Errorf("streamed arguments %q", args.String())
		}
	}
	r.text, r.status, r.reason = r.resp.OutputText(), string(r.resp.Status), string(r.resp.IncompleteDetails.Reason)
	for _, it := range r.resp.Output {
		if it.Type == "function_call" {
			r.args, r.callID = it.AsFunctionCall().Arguments, it.CallID
		}
	}
	r.input, r.output = r.resp.Usage.InputTokens, r.resp.Usage.OutputTokens
	return r, nil
}

func TestResponsesSDK(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	const text = "The quick brown fox jumps over the lazy dog."
	_, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 7})
	_, openaiURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 7})
	gw, logs := startLoggingGateway(t, anthropicPolicy(anthURL, openaiURL, "", ""), anthropicVars)
	client := responsesClient(gw)
	weather := responses.ToolParamOfFunction("mock_tool", map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}}}, false)
	for _, model := range []string{"mock-1", "claude-x"} {
		for _, stream := range []bool{false, true} {
			for _, tool := range []bool{false, true} {
				name := fmt.Sprintf("%s stream=%v tool=%v", model, stream, tool)
				t.Run(name, func(t *testing.T) {
					id := strings.NewReplacer(" ", "-", "=", "-").Replace(name)
					params := responses.ResponseNewParams{
						Model:           model,
						Instructions:    openai.String("Answer briefly."),
						Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about foxes.")},
						MaxOutputTokens: openai.Int(200),
						Store:           openai.Bool(false),
					}
					opts := []option.RequestOption{option.WithHeader("X-Request-Id", id)}
					wantArgs := ""
					if tool {
						params.Tools = []responses.ToolUnionParam{weather}
						opts = append(opts, option.WithHeader(mockllm.HeaderToolCallAt, "10"), option.WithHeader(mockllm.HeaderToolCallArgs, "%7B%22a%22%3A,1%7D"))
						wantArgs = `{"a":1}`
					}
					r, err := runResponses(t, client, params, stream, opts...)
					if err != nil {
						t.Fatal(err)
					}
					if r.text != text || r.status != "completed" || r.args != wantArgs || (tool && r.callID == "") {
						t.Fatalf("text %q status %s args %q call %q, want %q completed %q", r.text, r.status, r.args, r.callID, text, wantArgs)
					}
					if r.input <= 0 || r.output <= 0 {
						t.Fatalf("usage: %d in, %d out", r.input, r.output)
					}
					// The gateway metered the usage the reply reported.
					_, endpoint, status, prompt, completion := accessLog(t, logs, id)
					if endpoint != "/v1/responses" || status != 200 || int64(prompt) != r.input || int64(completion) != r.output {
						t.Fatalf("access log: %s %d %d+%d tokens, the client got %d+%d", endpoint, status, prompt, completion, r.input, r.output)
					}
					if stream && r.events[0] != "response.created" {
						t.Errorf("first event %s", r.events[0])
					}
				})
			}
		}
	}

	t.Run("a tool result goes back", func(t *testing.T) {
		for _, model := range []string{"mock-1", "claude-x"} {
			out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temp":20}`)
			out.OfFunctionCallOutput.CallID = openai.String("call_mock")
			params := responses.ResponseNewParams{Model: model, Tools: []responses.ToolUnionParam{weather},
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
					responses.ResponseInputItemParamOfMessage("weather?", responses.EasyInputMessageRoleUser),
					responses.ResponseInputItemParamOfFunctionCall(`{"a":1}`, "call_mock", "mock_tool"),
					out,
				}}}
			r, err := runResponses(t, client, params, false)
			if err != nil || r.text != text {
				t.Fatalf("%s: %v %q", model, err, r.text)
			}
		}
	})

	t.Run("what an Anthropic upstream cannot do is refused", func(t *testing.T) {
		for _, tc := range []struct {
			params responses.ResponseNewParams
			param  string
		}{
			{responses.ResponseNewParams{Model: "claude-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
				Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}}, "tools[0].type"},
			{responses.ResponseNewParams{Model: "claude-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
				PreviousResponseID: openai.String("resp_1")}, "previous_response_id"},
			{responses.ResponseNewParams{Model: "claude-x", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
				Store: openai.Bool(true)}, "store"},
		} {
			_, err := client.Responses.New(context.Background(), tc.params)
			var e *openai.Error
			if !errors.As(err, &e) || e.StatusCode != 400 || e.Param != tc.param {
				t.Errorf("err = %v, want a 400 naming %s", err, tc.param)
			}
		}
	})

	t.Run("stored responses pass through", func(t *testing.T) {
		r, err := runResponses(t, client, responses.ResponseNewParams{Model: "mock-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := client.Responses.Get(context.Background(), r.resp.ID, responses.ResponseGetParams{})
		if err != nil || got.OutputText() != text {
			t.Fatalf("Get: %v", err)
		}
		items, err := client.Responses.InputItems.List(context.Background(), r.resp.ID, responses.InputItemListParams{})
		if err != nil || len(items.Data) != 1 {
			t.Fatalf("input items: %v %+v", err, items)
		}
		if err := client.Responses.Delete(context.Background(), r.resp.ID); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		_, err = client.Responses.Get(context.Background(), r.resp.ID, responses.ResponseGetParams{})
		var e *openai.Error
		if !errors.As(err, &e) || e.StatusCode != 404 {
			t.Fatalf("Get after Delete: %v", err)
		}
	})
}

// TestResponsesHoldback: the holdback guard stops a Responses stream on a
// marker URL, through both upstreams, exactly as it stops a chat stream:
// the text before the marker and the correction, then
// response.incomplete (content_filter); a clean URL passes whole.
func TestResponsesHoldback(t *testing.T) {
	guard, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	_, openaiURL := startMock(t, mockllm.Config{})
	probe, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback/testdata/usageprobe")
	if err != nil {
		t.Fatal(err)
	}
	pol := anthropicPolicy(anthURL, openaiURL, "", "") + fmt.Sprintf("plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n  - name: probe\n    path: %s\n",
		guard, hbConfig, probe)
	gw, logs := startLoggingGateway(t, pol, anthropicVars)
	client := responsesClient(gw)
	markerAt := strings.Index(hbText, hbMarker)
	clean := strings.ReplaceAll(hbText, hbMarker, "example.com")
	for _, model := range []string{"mock-1", "claude-x"} {
		for _, tc := range []struct {
			name, text, want, status string
			cuts                     []int
			toolAt                   int
			stream                   bool
		}{
			{"marker split", hbText, hbText[:markerAt] + hbCorrection, "incomplete", []int{markerAt + 3, markerAt + 9}, 0, true},
			{"clean URL", clean, clean, "completed", []int{10, 30, len(clean) - 3}, 0, true},
			{"clean URL then a tool call", clean, clean, "completed", []int{10, len(clean) - 2}, len(clean), true},
			// A whole reply is replaced, as a chat reply is (finish stop).
			{"marker in a whole reply", hbText, hbCorrection, "completed", []int{markerAt + 3}, 0, false},
		} {
			t.Run(model+" "+tc.name, func(t *testing.T) {
				id := strings.ReplaceAll("hb-resp-"+model+"-"+tc.name, " ", "-")
				opts := []option.RequestOption{option.WithHeader("X-Request-Id", id), option.WithHeader(mockllm.HeaderText, url.QueryEscape(tc.text)),
					option.WithHeader(mockllm.HeaderSplit, hbSplit(tc.cuts...))}
				if tc.toolAt > 0 {
					opts = append(opts, option.WithHeader(mockllm.HeaderToolCallAt, fmt.Sprint(tc.toolAt)))
				}
				params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw a cat")}, MaxOutputTokens: openai.Int(99)}
				r, err := runResponses(t, client, params, tc.stream, opts...)
				if err != nil {
					t.Fatal(err)
				}
				if r.text != tc.want || r.status != tc.status {
					t.Fatalf("text %q status %s, want %q %s (events %v)", r.text, r.status, tc.want, tc.status, r.events)
				}
				if tc.status == "incomplete" && r.reason != "content_filter" {
					t.Errorf("incomplete_details.reason %q", r.reason)
				}
				if tc.toolAt > 0 && r.callID == "" {
					t.Errorf("the tool call was lost: %v", r.events)
				}
				if sent, action, _ := (&hbGateway{logs: logs}).probe(t, id); sent != len(tc.want) ||
					(tc.text == hbText) != (action == "holdback:stopped" || action == "holdback:replaced") {
					t.Errorf("the gateway counted %d text bytes sent (client got %d), guard_action %q", sent, len(tc.want), action)
				}
			})
		}
	}
}

// TestResponsesHoldbackToolEvidence: a URL a tool produced (a
// function_call_output item of the Responses input) passes the guard.
func TestResponsesHoldbackToolEvidence(t *testing.T) {
	guard, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	_, openaiURL := startMock(t, mockllm.Config{})
	pol := anthropicPolicy(anthURL, openaiURL, "", "") + fmt.Sprintf("plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n", guard, hbConfig)
	gw, _ := startLoggingGateway(t, pol, anthropicVars)
	client := responsesClient(gw)
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"url":"` + hbURL + `"}`)
	out.OfFunctionCallOutput.CallID = openai.String("c1")
	for _, model := range []string{"mock-1", "claude-x"} {
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("draw a cat", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"prompt":"cat"}`, "c1", "draw"),
			out,
		}}}
		r, err := runResponses(t, client, params, true, option.WithHeader(mockllm.HeaderText, url.QueryEscape(hbText)), option.WithHeader(mockllm.HeaderChunkSize, "7"))
		if err != nil {
			t.Fatal(err)
		}
		if r.text != hbText || r.status != "completed" {
			t.Errorf("%s: text %q status %s, want the tool's URL passed", model, r.text, r.status)
		}
	}
}

// TestResponsesRateLimit: Responses requests are counted by the rate
// limiter like chat requests: the plan's rpm, then 429.
func TestResponsesRateLimit(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{Tokens: 2})
	_, gw := startGateway(t, limitedPolicy(t, mockURL, "", 3, 0, `{}`), nil)
	client := responsesClient(gw, option.WithAPIKey("tg_rl_1"))
	params := responses.ResponseNewParams{Model: "mock-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	for i := 0; i < 3; i++ {
		if _, err := runResponses(t, client, params, i%2 == 1); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	_, err := client.Responses.New(context.Background(), params)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 {
		t.Fatalf("fourth request: %v, want a 429", err)
	}
	bad := responsesClient(gw, option.WithAPIKey("tg_wrong"))
	if _, err := bad.Responses.New(context.Background(), params); !errors.As(err, &e) || e.StatusCode != 401 {
		t.Fatalf("unknown key: %v, want a 401", err)
	}
	if _, err := bad.Responses.Get(context.Background(), "resp_x", responses.ResponseGetParams{}); !errors.As(err, &e) || e.StatusCode != 401 {
		t.Fatalf("GET with an unknown key: %v, want a 401", err)
	}
}

// TestResponsesPlugins: holding, replacing, stopping and failing on a
// Responses stream and a whole Response, through both upstreams: the
// client always gets a well-formed reply whose final response holds the
// text it was streamed, and the gateway counts what it sent.
func TestResponsesPlugins(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	const text = "The quick brown fox jumps over the lazy dog."
	_, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 5})
	_, openaiURL := startMock(t, mockllm.Config{Text: text, ChunkSize: 5})
	gateway := func(t *testing.T, config string) (openai.Client, *lockedBuffer) {
		probe, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback/testdata/usageprobe")
		if err != nil {
			t.Fatal(err)
		}
		pol := anthropicPolicy(anthURL, openaiURL, "", "") + "plugins:\n" + testPlugin(t, "fail_closed", config) + fmt.Sprintf("  - name: probe\n    path: %s\n", probe)
		gw, logs := startLoggingGateway(t, pol, anthropicVars)
		return responsesClient(gw), logs
	}
	params := func(model string) responses.ResponseNewParams {
		return responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, MaxOutputTokens: openai.Int(99)}
	}
	for _, tc := range []struct {
		name, config     string
		stream, tool     bool
		want, status     string
		wantErr, hasCall bool
	}{
		{name: "hold everything", config: `{"chunk":"hold"}`, stream: true, tool: true, want: text, status: "completed", hasCall: true},
		{name: "replace upper", config: `{"chunk":"replace_upper"}`, stream: true, tool: true, want: strings.ToUpper(text), status: "completed", hasCall: true},
		{name: "stop at the first event", config: `{"chunk":"stop:[withheld]","finish_reason":"content_filter"}`, stream: true, want: "[withheld]", status: "incomplete"},
		{name: "trap mid-stream", config: `{"chunk":"trap"}`, stream: true, wantErr: true},
		{name: "whole reply replaced", config: `{"chunk":"replace_upper"}`, tool: true, want: strings.ToUpper(text), status: "completed", hasCall: true},
		{name: "whole reply stopped", config: `{"chunk":"stop:[withheld]","finish_reason":"content_filter"}`, want: "[withheld]", status: "incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, logs := gateway(t, tc.config)
			for _, model := range []string{"mock-1", "claude-x"} {
				id := strings.ReplaceAll("plug-"+model+"-"+tc.name, " ", "-")
				opts := []option.RequestOption{option.WithHeader("X-Request-Id", id)}
				if tc.tool {
					opts = append(opts, option.WithHeader(mockllm.HeaderToolCallAt, "10"))
				}
				r, err := runResponses(t, client, params(model), tc.stream, opts...)
				if tc.wantErr {
					if err == nil {
						t.Errorf("%s: no error, text %q", model, r.text)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", model, err)
				}
				if r.text != tc.want || r.status != tc.status || (r.callID != "") != tc.hasCall {
					t.Errorf("%s: text %q status %s call %q, want %q %s (events %v)", model, r.text, r.status, r.callID, tc.want, tc.status, r.events)
				}
				if tc.status == "incomplete" && r.reason != "content_filter" {
					t.Errorf("%s: incomplete_details.reason %q", model, r.reason)
				}
				if sent := sentBytes(t, logs, id); sent != len(tc.want) {
					t.Errorf("%s: the gateway counted %d text bytes sent, the client got %d", model, sent, len(tc.want))
				}
			}
		})
	}
}

// TestResponsesBudget: a Responses request is held against the tenant's
// budget by its max_output_tokens and settled from the usage its
// response.completed (or Response object) reports: input tokens at 1 µ$,
// output tokens at 10 µ$, exactly.
func TestResponsesBudget(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 30})
	_, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""))
	client := responsesClient(gw, option.WithAPIKey(w.key))
	var want int64
	for i, stream := range []bool{false, true} {
		r, err := runResponses(t, client, responses.ResponseNewParams{Model: "mock-1", MaxOutputTokens: openai.Int(100),
			Instructions: openai.String("You are terse."), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there, model")}}, stream)
		if err != nil {
			t.Fatal(err)
		}
		if r.output != 30 || r.input <= 0 {
			t.Fatalf("usage %d in, %d out", r.input, r.output)
		}
		want += r.input*inputMicrosPerMTok/1_000_000 + r.output*outputMicrosPerMTok/1_000_000
		w.waitRows(t, int64(i+1))
		if _, sum, _ := w.ledger(t); sum != want {
			t.Fatalf("after %d requests the ledger holds %d µ$, the usage reported costs %d", i+1, sum, want)
		}
	}
	if spent, holds := w.counter(t); spent != fmt.Sprint(want) || (holds != "0" && holds != "") {
		t.Fatalf("budget counter %s, held %s; want %d spent and nothing held", spent, holds, want)
	}
	// A request whose hold alone passes the budget is refused.
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "mock-1", MaxOutputTokens: openai.Int(1_000_000),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "insufficient_quota" {
		t.Fatalf("over-budget hold: %v", err)
	}
}

// TestResponsesAzure: an Azure upstream (its adapter serves chat, not the
// Responses API) gets a Responses request as a chat request on its
// deployment path, and the reply comes back as a Response; the built-in
// plugins (holdback among them) run on it as on any other.
func TestResponsesAzure(t *testing.T) {
	setAzureKeys(t)
	const text = "Foxes are small omnivores."
	mockURL, seen := startAzureMock(t, mockllm.Config{Text: text, ChunkSize: 6})
	gw, logs := startLoggingGateway(t, azurePolicy(mockURL), azureVars)
	client := azureSDK(gw, azureTenant)
	for _, stream := range []bool{false, true} {
		id := fmt.Sprintf("az-resp-%v", stream)
		r, err := runResponses(t, client, responses.ResponseNewParams{Model: "gpt-4o", MaxOutputTokens: openai.Int(50),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("foxes?")}}, stream,
			option.WithHeader("X-Request-Id", id), option.WithHeader(mockllm.HeaderToolCallAt, "5"))
		if err != nil {
			t.Fatal(err)
		}
		// The chat mock carries its tool call in streams only.
		if r.text != text || r.status != "completed" || (r.callID != "") != stream || r.input <= 0 || r.output <= 0 {
			t.Fatalf("stream %v: %+v", stream, r)
		}
		reqs := seen()
		if len(reqs) != 1 || !strings.HasPrefix(reqs[0].uri, "/openai/deployments/gpt4o-prod/chat/completions?api-version=") {
			t.Fatalf("the upstream saw %+v", reqs)
		}
		if prompt, completion, cost := azureCost(t, logs, id); int64(prompt) != r.input || int64(completion) != r.output || cost != prompt+10*completion {
			t.Fatalf("metered %d+%d tokens for %d µ$, the reply said %d+%d", prompt, completion, cost, r.input, r.output)
		}
	}
	markerAt := strings.Index(hbText, hbMarker)
	r, err := runResponses(t, client, responses.ResponseNewParams{Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw")}}, true,
		option.WithHeader(mockllm.HeaderText, url.QueryEscape(hbText)), option.WithHeader(mockllm.HeaderSplit, hbSplit(markerAt+3, markerAt+9)))
	if err != nil || r.text != hbText[:markerAt]+hbCorrection || r.status != "incomplete" || r.reason != "content_filter" {
		t.Fatalf("holdback on Azure: %v %+v", err, r)
	}
}

// TestResponsesHoldbackStored: a response the guard stopped or rewrote
// at creation is stored upstream as the model wrote it; GET
// /v1/responses/{id} reads it through the same guard, so the marker URL
// the client was kept from does not come back by retrieving it.
func TestResponsesHoldbackStored(t *testing.T) {
	guard, err := wasmbuild.Cached(repoRoot(t) + "/plugins/holdback")
	if err != nil {
		t.Fatal(err)
	}
	_, anthURL := startAnthropicMock(t, mockllm.Config{})
	_, openaiURL := startMock(t, mockllm.Config{})
	pol := anthropicPolicy(anthURL, openaiURL, "", "") + fmt.Sprintf("plugins:\n  - name: holdback\n    path: %s\n    on_error: fail_closed\n    config: %s\n", guard, hbConfig)
	gw, logs := startLoggingGateway(t, pol, anthropicVars)
	client := responsesClient(gw)
	clean := strings.ReplaceAll(hbText, hbMarker, "example.com")
	for _, tc := range []struct {
		name, text, want string
		stream           bool
	}{
		{"marker, whole", hbText, hbCorrection, false},
		{"marker, stream", hbText, hbCorrection, true},
		{"clean", clean, clean, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := responses.ResponseNewParams{Model: "mock-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("draw a cat")}}
			r, err := runResponses(t, client, params, tc.stream, option.WithHeader(mockllm.HeaderText, url.QueryEscape(tc.text)))
			if err != nil {
				t.Fatal(err)
			}
			getID := strings.ReplaceAll("stored-get-"+tc.name, " ", "-")
			getID = strings.ReplaceAll(getID, ",", "")
			got, err := client.Responses.Get(context.Background(), r.resp.ID, responses.ResponseGetParams{}, option.WithHeader("X-Request-Id", getID))
			if err != nil {
				t.Fatal(err)
			}
			if text := got.OutputText(); text != tc.want {
				t.Fatalf("GET %s: output_text %q, want %q", r.resp.ID, text, tc.want)
			}
			// The GET names no model and generates nothing: its log line
			// (and its rate-limit settlement) must not carry the model or
			// the token estimate of an earlier request.
			// Replayed as events, the stored reply would pass the guard
			// unread: refused.
			var e *openai.Error
			if err := client.Get(context.Background(), "responses/"+r.resp.ID+"?stream=true", nil, nil); !errors.As(err, &e) || e.StatusCode != 400 || e.Param != "stream" {
				t.Errorf("GET ?stream=true: %v, want a 400 naming stream", err)
			}
			if _, _, _, prompt, completion := accessLog(t, logs, getID); prompt != 0 || completion != 0 {
				t.Errorf("GET counted %d prompt and %d completion tokens, want none", prompt, completion)
			}
			if !strings.Contains(logs.String(), "request_id="+getID+` tenant="" key_id="" endpoint=/v1/responses model="" `) {
				t.Errorf("GET's access log line names a model:\n%s", logs.String())
			}
		})
	}
}
