package mockllm

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// responsesClient is the official OpenAI client pointed at a mock.
func responsesClient(t *testing.T, cfg Config, opts ...option.RequestOption) (openai.Client, *Server) {
	t.Helper()
	s := New(cfg)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	opts = append([]option.RequestOption{option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0)}, opts...)
	return openai.NewClient(opts...), s
}

func TestResponsesWithOfficialClient(t *testing.T) {
	tests := []struct {
		name      string
		headers   map[string]string
		max       int64
		wantText  string
		wantCall  string // arguments of the function call ("" for none)
		wantState string
	}{
		{name: "generated tokens", wantText: "tok0 tok1 tok2 tok3 ", headers: map[string]string{HeaderTokens: "4"}, wantState: "completed"},
		{name: "text", headers: map[string]string{HeaderText: "Hello, world", HeaderChunkSize: "5"}, wantText: "Hello, world", wantState: "completed"},
		{name: "tool call", headers: map[string]string{HeaderText: "look: done", HeaderToolCallAt: "5", HeaderToolCallArgs: "%7B%22a%22%3A,1%7D"},
			wantText: "look: done", wantCall: `{"a":1}`, wantState: "completed"},
		{name: "max_output_tokens", headers: map[string]string{HeaderTokens: "10"}, max: 3, wantText: "tok0 tok1 tok2 ", wantState: "incomplete"},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				var opts []option.RequestOption
				for k, v := range tt.headers {
					opts = append(opts, option.WithHeader(k, v))
				}
				client, _ := responsesClient(t, Config{APIKey: "sk-test"}, opts...)
				params := responses.ResponseNewParams{
					Model:        "mock-1",
					Instructions: openai.String("be brief"),
					Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("hello there")},
				}
				if tt.max > 0 {
					params.MaxOutputTokens = openai.Int(tt.max)
				}
				var resp *responses.Response
				var deltas strings.Builder
				var args strings.Builder
				if !stream {
					var err error
					if resp, err = client.Responses.New(context.Background(), params); err != nil {
						t.Fatalf("New: %v", err)
					}
				} else {
					st := client.Responses.NewStreaming(context.Background(), params)
					seq := int64(0)
					for st.Next() {
						ev := st.Current()
						if ev.SequenceNumber != seq {
							t.Fatalf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
						}
						seq++
						switch ev.Type {
						case "response.output_text.delta":
							deltas.WriteString(ev.Delta)
						case "response.function_call_arguments.delta":
							args.WriteString(ev.Delta)
						case "response.completed", "response.incomplete":
							r := ev.Response
							resp = &r
						}
					}
					if err := st.Err(); err != nil {
						t.Fatalf("stream: %v", err)
					}
					if deltas.String() != tt.wantText || args.String() != tt.wantCall {
						t.Fatalf("deltas %q args %q, want %q %q", deltas.String(), args.String(), tt.wantText, tt.wantCall)
					}
				}
				if resp == nil {
					t.Fatal("no response")
				}
				if got := resp.OutputText(); got != tt.wantText || string(resp.Status) != tt.wantState {
					t.Fatalf("OutputText %q status %s, want %q %s", got, resp.Status, tt.wantText, tt.wantState)
				}
				call := ""
				for _, it := range resp.Output {
					if it.Type == "function_call" {
						call = it.AsFunctionCall().Arguments
						if it.CallID != mockCallID || it.Name != mockToolName {
							t.Errorf("function call %q %q", it.CallID, it.Name)
						}
					}
				}
				if call != tt.wantCall {
					t.Errorf("function call arguments %q, want %q", call, tt.wantCall)
				}
				// "be brief" + "hello there": 19 characters, 4 tokens.
				if resp.Usage.InputTokens != 4 || resp.Usage.OutputTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+resp.Usage.OutputTokens {
					t.Errorf("usage %+v", resp.Usage)
				}

				// The reply is kept: GET, input_items and DELETE.
				got, err := client.Responses.Get(context.Background(), resp.ID, responses.ResponseGetParams{})
				if err != nil || got.ID != resp.ID || got.OutputText() != tt.wantText {
					t.Fatalf("Get: %v %+v", err, got)
				}
				items, err := client.Responses.InputItems.List(context.Background(), resp.ID, responses.InputItemListParams{})
				if err != nil || len(items.Data) != 1 || items.Data[0].Type != "message" {
					t.Fatalf("input items: %v %+v", err, items)
				}
				if err := client.Responses.Delete(context.Background(), resp.ID); err != nil {
					t.Fatalf("Delete: %v", err)
				}
				if _, err := client.Responses.Get(context.Background(), resp.ID, responses.ResponseGetParams{}); err == nil || !strings.Contains(err.Error(), "404") {
					t.Fatalf("Get after Delete: %v", err)
				}
			})
		}
	}
}

func TestResponsesErrors(t *testing.T) {
	client, _ := responsesClient(t, Config{APIKey: "sk-test"}, option.WithHeader(HeaderFailStatus, "429"))
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "mock-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}})
	var apiErr *openai.Error
	if !asError(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want a 429", err)
	}
	bad, _ := responsesClient(t, Config{APIKey: "sk-other"})
	if _, err := bad.Responses.New(context.Background(), responses.ResponseNewParams{Model: "mock-1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")}}); !asError(err, &apiErr) || apiErr.StatusCode != 401 {
		t.Fatalf("wrong key: err = %v, want a 401", err)
	}
}

func asError(err error, target **openai.Error) bool {
	return errors.As(err, target)
}
