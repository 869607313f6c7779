package responses

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestAppendChatRequest(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"string input and instructions",
			`{"model":"m","instructions":"be brief","input":"hi","max_output_tokens":50,"temperature":0.5,"stream":true}`,
			`{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"temperature":0.5,"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`},
		{"items, parts, calls and outputs",
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x/y.png","detail":"low"}]},` +
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"}]},` +
				`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"c2","name":"g","arguments":"{\"x\":1}"},` +
				`{"type":"function_call_output","call_id":"c1","output":"r1"},{"type":"reasoning","id":"rs_1","summary":[]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},` +
				`{"role":"assistant","content":"b","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{\"x\":1}"}}]},` +
				`{"role":"tool","tool_call_id":"c1","content":"r1"}]}`},
		{"tools, choice and format",
			`{"model":"m","input":"q","tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"f"},` +
				`"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"},"strict":true}},"store":false,"reasoning":{"effort":"low"}}`,
			`{"model":"m","messages":[{"role":"user","content":"q"}],"reasoning_effort":"low","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"},"strict":true}},` +
				`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendChatRequest(nil, []byte(tt.in))
			if err != nil {
				t.Fatalf("AppendChatRequest: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatal("output is not JSON")
			}
		})
	}
}

func TestAppendChatRequestRefuses(t *testing.T) {
	tests := []struct{ in, param string }{
		{`{"model":"m","input":"x","previous_response_id":"resp_1"}`, "previous_response_id"},
		{`{"model":"m","input":"x","store":true}`, "store"},
		{`{"model":"m","input":"x","background":true}`, "background"},
		{`{"model":"m","input":"x","conversation":"conv_1"}`, "conversation"},
		{`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{`{"model":"m","input":"x","tools":[{"type":"function","name":"f"},{"type":"file_search","vector_store_ids":[]}]}`, "tools[1].type"},
		{`{"model":"m","input":"x","tool_choice":{"type":"web_search_preview"}}`, "tool_choice.type"},
		{`{"model":"m","input":[{"type":"item_reference","id":"x"}]}`, "input[0].type"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0].file_id"},
		{`{"model":"m","input":"x","text":{"format":{"type":"grammar"}}}`, "text.format.type"},
		{`{"model":"m"}`, "input"},
		{`{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role"},
	}
	for _, tt := range tests {
		t.Run(tt.param, func(t *testing.T) {
			_, err := AppendChatRequest(nil, []byte(tt.in))
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Param != tt.param {
				t.Fatalf("err = %v (%+v), want a 400 naming %s", err, e, tt.param)
			}
		})
	}
	// store false and null members pass.
	if _, err := AppendChatRequest(nil, []byte(`{"model":"m","input":"x","store":false,"previous_response_id":null,"background":false}`)); err != nil {
		t.Fatalf("store false: %v", err)
	}
}

func TestRequestParser(t *testing.T) {
	var p RequestParser
	var r openai.Request
	err := p.Parse([]byte(`{"model":"gpt","stream":true,"max_output_tokens":99,"instructions":"12345678",`+
		`"input":[{"role":"user","content":"abcd"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"xyzw"}]}`), &r)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Model) != "gpt" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 99 || !r.HasMaxTokens || r.Messages != 4 || r.PromptChars != 18 || r.EstimatedPromptTokens != 18/4+16 {
		t.Fatalf("parsed %+v", r)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"input":"x"}`, "model"},
		{`{"model":"m","stream":"yes"}`, "stream"},
		{`{"model":"m","max_output_tokens":-1}`, "max_output_tokens"},
		{`{"model":"m","input":5}`, "input"},
		{`{"model":"m","input":[1]}`, "input[0]"},
		{`{"model":"m","instructions":1}`, "instructions"},
		{`{"model":"m","model":"n","input":"x"}`, "model"},
	} {
		err := p.Parse([]byte(bad.body), &r)
		var e *openai.Error
		if !errors.As(err, &e) || e.Param != bad.param {
			t.Errorf("%s: err %v, want param %s", bad.body, err, bad.param)
		}
	}
}

func TestReplies(t *testing.T) {
	chat := `{"id":"chatcmpl-9","object":"chat.completion","created":5,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi \"x\"",` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}`
	resp, err := AppendResponse(nil, []byte(chat), "")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ID, Object, Status, Model string
		IncompleteDetails         struct{ Reason string } `json:"incomplete_details"`
		Output                    []struct {
			Type, CallID, Name, Arguments string
			Content                       []struct{ Type, Text string }
		} `json:"output"`
		Usage struct {
			InputTokens        int64 `json:"input_tokens"`
			OutputTokens       int64 `json:"output_tokens"`
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
		}
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		t.Fatalf("%s: %v", resp, err)
	}
	if r.ID != "resp_9" || r.Object != "response" || r.Status != "completed" || r.Model != "m" || len(r.Output) != 2 ||
		r.Output[0].Content[0].Text != `hi "x"` || r.Output[1].Name != "f" || r.Output[1].Arguments != `{"a":1}` ||
		r.Usage.InputTokens != 3 || r.Usage.OutputTokens != 4 || r.Usage.InputTokensDetails.CachedTokens != 2 || r.Usage.OutputTokensDetails.ReasoningTokens != 1 {
		t.Fatalf("response: %s", resp)
	}
	// And back: the chat view of the Response.
	view, err := AppendChatView(nil, resp)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Choices []struct {
			Message struct {
				Content   string
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(view, &c); err != nil {
		t.Fatalf("%s: %v", view, err)
	}
	ch := c.Choices[0]
	if ch.Message.Content != `hi "x"` || ch.FinishReason != "tool_calls" || ch.Message.ToolCalls[0].ID != "call_1" ||
		ch.Message.ToolCalls[0].Function.Arguments != `{"a":1}` || c.Usage.PromptTokens != 3 || c.Usage.CompletionTokens != 4 {
		t.Fatalf("view: %s", view)
	}
	// A guard's rewrite.
	out, err := AppendWithText(nil, resp, []byte("no"), "content_filter")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	if r.Status != "incomplete" || r.IncompleteDetails.Reason != "content_filter" || r.Output[0].Content[0].Text != "no" || len(r.Output) != 2 {
		t.Fatalf("rewritten: %s", out)
	}
	// A replaced text that finishes as before keeps the response complete.
	r.IncompleteDetails.Reason = ""
	if out, err = AppendWithText(nil, resp, []byte("yes"), "tool_calls"); err != nil || json.Unmarshal(out, &r) != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" || r.IncompleteDetails.Reason != "" || r.Output[0].Content[0].Text != "yes" {
		t.Fatalf("rewritten: %s", out)
	}
}
