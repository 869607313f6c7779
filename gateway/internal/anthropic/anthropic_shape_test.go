package anthropic

import (
	"encoding/json"
	"fmt"
)

// anthropicRequest mirrors the Messages API request members
// AppendRequest may write; decoding with DisallowUnknownFields catches any
// other.
type anthropicRequest struct {
	Model         string             `json:"model"`
	MaxTokens     int64              `json:"max_tokens"`
	System        *string            `json:"system"`
	Messages      []anthropicMessage `json:"messages"`
	StopSequences []string           `json:"stop_sequences"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int64             `json:"top_k"`
	Stream        *bool              `json:"stream"`
	Tools         []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	ToolChoice *struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
	} `json:"tool_choice"`
	Metadata *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicBlock struct {
	Type   string  `json:"type"`
	Text   *string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// checkAnthropicRequest checks the rules the Messages API enforces on a
// request AppendRequest produced.
func checkAnthropicRequest(r *anthropicRequest) error {
	if r.Model == "" || r.MaxTokens < 1 || len(r.Messages) == 0 {
		return fmt.Errorf("model %q, max_tokens %d, %d messages", r.Model, r.MaxTokens, len(r.Messages))
	}
	for i, m := range r.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Errorf("messages[%d]: role %q", i, m.Role)
		}
		if i > 0 && r.Messages[i-1].Role == m.Role {
			return fmt.Errorf("messages[%d]: two %s turns in a row", i, m.Role)
		}
		if len(m.Content) == 0 {
			return fmt.Errorf("messages[%d]: empty content", i)
		}
		results := true
		for j, b := range m.Content {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return fmt.Errorf("messages[%d].content[%d]: empty text", i, j)
				}
			case "image":
				if m.Role != "user" || b.Source == nil {
					return fmt.Errorf("messages[%d].content[%d]: bad image", i, j)
				}
			case "tool_use":
				var in map[string]any
				if m.Role != "assistant" || b.ID == "" || b.Name == "" || json.Unmarshal(b.Input, &in) != nil || in == nil {
					return fmt.Errorf("messages[%d].content[%d]: bad tool_use %s", i, j, b.Input)
				}
			case "tool_result":
				if m.Role != "user" || b.ToolUseID == "" || !results {
					return fmt.Errorf("messages[%d].content[%d]: tool_result misplaced", i, j)
				}
			default:
				return fmt.Errorf("messages[%d].content[%d]: type %q", i, j, b.Type)
			}
			results = results && b.Type == "tool_result"
		}
	}
	if r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1) {
		return fmt.Errorf("temperature %v", *r.Temperature)
	}
	return nil
}
