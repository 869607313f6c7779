package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestOpenAINodeSDKAnthropic drives an Anthropic-backed route with the
// official OpenAI Node SDK (testdata/node/anthropic.mjs): a streamed chat
// completion with usage, a non-streamed one, and a tool call streamed and
// not, whose result goes back in a follow-up.
func TestOpenAINodeSDKAnthropic(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	dir, node := nodeWith(t, "openai")
	const text = "Héllo from Claude's mock — in small pieces, through the translation."
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 4, InterToken: time.Millisecond})
	seen := recordRequests(mock)
	_, gw := startGateway(t, anthropicPolicy(anthURL, anthURL, "", ""), anthropicVars)

	cmd := exec.Command(node, "anthropic.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+gw, "MODEL=claude-mock", "TOOL_AT=9", "TOOL_ARGS={\"q\":,7}")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	type toolCall struct{ ID, Name, Arguments string }
	type usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	}
	type completion struct {
		Content      *string    `json:"content"`
		FinishReason string     `json:"finish_reason"`
		ToolCalls    []toolCall `json:"tool_calls"`
		Usage        *usage     `json:"usage"`
	}
	var got struct {
		Stream struct {
			Text         string `json:"text"`
			Chunks       int    `json:"chunks"`
			FinishReason string `json:"finish_reason"`
			Usage        *usage `json:"usage"`
		} `json:"stream"`
		Once         completion `json:"once"`
		StreamedTool completion `json:"streamed_tool"`
		Tool         completion `json:"tool"`
		FollowUp     completion `json:"follow_up"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	// "Be brief." and "Say something." are 23 characters: 5 prompt tokens;
	// the text goes in 4-byte events.
	want := usage{PromptTokens: 5, CompletionTokens: 19, TotalTokens: 24}
	if s := got.Stream; s.Text != text || s.FinishReason != "stop" || s.Chunks < 15 || s.Usage == nil || *s.Usage != want {
		t.Errorf("stream: %+v (usage %+v)", s, s.Usage)
	}
	if o := got.Once; o.Content == nil || *o.Content != text || o.FinishReason != "stop" || o.Usage == nil || *o.Usage != want {
		t.Errorf("non-streamed: %+v", o)
	}
	wantCall := toolCall{ID: "toolu_mock", Name: "mock_tool", Arguments: `{"q":7}`}
	for name, c := range map[string]completion{"streamed": got.StreamedTool, "non-streamed": got.Tool} {
		if len(c.ToolCalls) != 1 || c.ToolCalls[0] != wantCall || c.FinishReason != "tool_calls" || c.Content == nil || *c.Content != text {
			t.Errorf("%s tool call: %+v", name, c)
		}
	}
	if f := got.FollowUp; f.Content == nil || *f.Content != text || f.FinishReason != "stop" {
		t.Errorf("follow-up: %+v", f)
	}
	// The follow-up went upstream with the tool call and its result as
	// Anthropic blocks.
	var last seenRequest
	for n := len(seen); n > 0; n-- {
		last = <-seen
	}
	if !bytes.Contains(last.body, []byte(`{"type":"tool_use","id":"toolu_mock","name":"mock_tool","input":{"q":7}}`)) ||
		!bytes.Contains(last.body, []byte(`{"type":"tool_result","tool_use_id":"toolu_mock","content":"42"}`)) {
		t.Errorf("follow-up sent upstream as %s", last.body)
	}
}

// TestAnthropicNodeSDKMessages drives POST /v1/messages with the official
// Anthropic Node SDK (testdata/node/messages.mjs) through preflight: its
// x-api-key is the tenant's gateway key; the upstream gets its own.
func TestAnthropicNodeSDKMessages(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	dir, node := nodeWith(t, "@anthropic-ai/sdk")
	const text = "Héllo from Claude's mock — passed through as it came."
	mock, anthURL := startAnthropicMock(t, mockllm.Config{Text: text, ChunkSize: 4, InterToken: time.Millisecond})
	seen := recordRequests(mock)
	_, openaiURL := startMock(t, mockllm.Config{Tokens: 2})
	_, gw := startGateway(t, anthropicTenantPolicy(t, anthropicPolicy(anthURL, openaiURL, "", ""), ""), anthropicVars)

	cmd := exec.Command(node, "messages.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GATEWAY_URL="+gw, "GATEWAY_KEY=tg-anthropic", "MODEL=claude-mock", "OPENAI_MODEL=mock-1",
		"TOOL_AT=9", "TOOL_ARGS={\"q\":,7}")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node: %v\n%s", err, stderr)
	}
	type block struct {
		Type  string         `json:"type"`
		Text  string         `json:"text"`
		ID    string         `json:"id"`
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
	}
	type message struct {
		ID         string  `json:"id"`
		Content    []block `json:"content"`
		StopReason string  `json:"stop_reason"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	var got struct {
		Once, Streamed, Tool message
		Deltas               int
		Error                *struct {
			Status        int
			Type, Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node output %q: %v", out, err)
	}
	for name, m := range map[string]message{"create": got.Once, "stream": got.Streamed} {
		if len(m.Content) != 1 || m.Content[0].Text != text || m.StopReason != "end_turn" || m.Usage.InputTokens != 5 || m.Usage.OutputTokens != 15 {
			t.Errorf("%s: %+v", name, m)
		}
	}
	if got.Deltas != 15 {
		t.Errorf("%d text events streamed", got.Deltas)
	}
	if c := got.Tool.Content; len(c) != 3 || c[0].Text+c[2].Text != text || c[1].Type != "tool_use" || c[1].Name != "mock_tool" ||
		c[1].Input["q"] != 7.0 || got.Tool.StopReason != "tool_use" {
		t.Errorf("tool call: %+v", got.Tool)
	}
	if e := got.Error; e == nil || e.Status != 404 || e.Type != "not_found_error" || e.Message == "" {
		t.Errorf("error %+v", got.Error)
	}
	for n := len(seen); n > 0; n-- {
		if r := <-seen; r.h.Get("X-Api-Key") != anthropicKey || r.h.Get("Anthropic-Version") == "" {
			t.Errorf("upstream headers %v", r.h)
		}
	}
}
