package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// The structs below mirror OpenAI's published objects (the field names and
// types of openai-python's ChatCompletion and ChatCompletionChunk). Outputs
// are decoded with DisallowUnknownFields, so a member OpenAI does not
// define fails the test, as does a wrong type.

type oaCompletion struct {
	ID      string     `json:"id"`
	Object  string     `json:"object"`
	Created int64      `json:"created"`
	Model   string     `json:"model"`
	Choices []oaChoice `json:"choices"`
	Usage   *oaUsage   `json:"usage"`
}

type oaChoice struct {
	Index        int             `json:"index"`
	Message      oaMessage       `json:"message"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type oaMessage struct {
	Role      string       `json:"role"`
	Content   *string      `json:"content"`
	Refusal   *string      `json:"refusal"`
	ToolCalls []oaToolCall `json:"tool_calls"`
}

type oaToolCall struct {
	Index    *int   `json:"index"` // chunks only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

type oaUsage struct {
	PromptTokens        int64            `json:"prompt_tokens"`
	CompletionTokens    int64            `json:"completion_tokens"`
	TotalTokens         int64            `json:"total_tokens"`
	PromptTokensDetails *oaPromptDetails `json:"prompt_tokens_details"`
}

type oaPromptDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
}

type oaChunk struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Created int64           `json:"created"`
	Model   string          `json:"model"`
	Choices []oaChunkChoice `json:"choices"`
	Usage   *oaUsage        `json:"usage"`
}

type oaChunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Role      string       `json:"role"`
		Content   *string      `json:"content"`
		ToolCalls []oaToolCall `json:"tool_calls"`
	} `json:"delta"`
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type oaErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeStrict(t *testing.T, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding %T: %v\n%s", v, err, data)
	}
	if dec.More() {
		t.Fatalf("trailing data after %T: %s", v, data)
	}
}

// streamResult is what a client assembles from a translated stream.
type streamResult struct {
	ID, Model  string
	Created    int64
	Role       string
	Content    string
	Tools      []resultTool
	Finish     string // "" when no finish_reason came
	Usage      *oaUsage
	ErrType    string
	ErrCode    string
	ErrMessage string
	Done       bool
	Chunks     int // chat.completion.chunk events
	UsageNulls int // chunks with "usage":null
}

type resultTool struct {
	ID, Name, Arguments string
}

// assemble checks the framing and shape of every event in out and
// assembles the reply as an OpenAI client would.
func assemble(t *testing.T, out []byte) streamResult {
	t.Helper()
	var r streamResult
	if len(out) > 0 && !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	if len(out) == 0 {
		events = nil
	}
	ended := false
	for i, ev := range events {
		if ended {
			t.Fatalf("event %d after the end of the stream: %q", i, ev)
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.ContainsAny(data, "\r\n") {
			t.Fatalf("event %d is not one data line: %q", i, ev)
		}
		if data == "[DONE]" {
			r.Done, ended = true, true
			continue
		}
		if !json.Valid([]byte(data)) {
			t.Fatalf("event %d is not valid JSON: %q", i, data)
		}
		if strings.HasPrefix(data, `{"error":`) {
			var e oaErrorBody
			decodeStrict(t, []byte(data), &e)
			r.ErrType, r.ErrMessage = e.Error.Type, e.Error.Message
			if e.Error.Code != nil {
				r.ErrCode = *e.Error.Code
			}
			ended = true
			continue
		}
		var c oaChunk
		decodeStrict(t, []byte(data), &c)
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("event %d: object %q", i, c.Object)
		}
		if r.Chunks == 0 {
			r.ID, r.Model, r.Created = c.ID, c.Model, c.Created
		} else if c.ID != r.ID || c.Model != r.Model || c.Created != r.Created {
			t.Fatalf("event %d: id/model/created changed: %+v", i, c)
		}
		r.Chunks++
		if strings.HasSuffix(data, `,"usage":null}`) {
			r.UsageNulls++
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 || r.Usage != nil {
				t.Fatalf("event %d: usage chunk with choices, or a second one: %s", i, data)
			}
			u := *c.Usage
			r.Usage = &u
			continue
		}
		if r.Usage != nil {
			t.Fatalf("event %d: chunk after the usage chunk: %s", i, data)
		}
		if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
			t.Fatalf("event %d: want exactly choices[0]: %s", i, data)
		}
		ch := c.Choices[0]
		if r.Finish != "" {
			t.Fatalf("event %d: choice after finish_reason: %s", i, data)
		}
		if ch.Delta.Role != "" {
			if r.Chunks != 1 {
				t.Fatalf("event %d: role outside the first chunk", i)
			}
			r.Role = ch.Delta.Role
		}
		if ch.Delta.Content != nil {
			r.Content += *ch.Delta.Content
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index == nil {
				t.Fatalf("event %d: tool call without index: %s", i, data)
			}
			k := *tc.Index
			switch {
			case k == len(r.Tools):
				if tc.ID == "" || tc.Type != "function" || tc.Function.Name == "" || tc.Function.Arguments == nil || *tc.Function.Arguments != "" {
					t.Fatalf("event %d: first delta of a tool call must carry id, type, name and empty arguments: %s", i, data)
				}
				r.Tools = append(r.Tools, resultTool{ID: tc.ID, Name: tc.Function.Name})
			case k < len(r.Tools):
				if tc.ID != "" || tc.Function.Name != "" || tc.Function.Arguments == nil {
					t.Fatalf("event %d: later delta of a tool call must carry only arguments: %s", i, data)
				}
				r.Tools[k].Arguments += *tc.Function.Arguments
			default:
				t.Fatalf("event %d: tool call index %d skips ahead", i, k)
			}
		}
		if ch.FinishReason != nil {
			r.Finish = *ch.FinishReason
		}
	}
	return r
}
