package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestAppendResponseGolden(t *testing.T) {
	for _, name := range []string{"response_text", "response_function_call", "response_tool_only",
		"response_thinking", "response_blocked", "response_recitation"} {
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendResponse(nil, in, testModel, testID, testCreated)
			if err != nil {
				t.Fatal(err)
			}
			if !json.Valid(got) {
				t.Fatalf("invalid JSON %s", got)
			}
			checkGolden(t, filepath.Join("testdata", name+".golden.json"), append(got, '\n'))
		})
	}
}

func TestAppendResponseValues(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "response_thinking.json"))
	got, err := AppendResponse(nil, in, "", "", 5)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ID      string
		Model   string
		Choices []struct {
			Message struct {
				Content *string
			}
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens        int64 `json:"prompt_tokens"`
			CompletionTokens    int64 `json:"completion_tokens"`
			TotalTokens         int64 `json:"total_tokens"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		}
	}
	if err := json.Unmarshal(got, &c); err != nil {
		t.Fatal(err)
	}
	u := c.Usage
	if c.ID != "resp-1" || c.Model != "gemini-2.0-flash" || len(c.Choices) != 1 || *c.Choices[0].Message.Content != "42" ||
		c.Choices[0].FinishReason != "length" || u.PromptTokens != 1210 || u.CompletionTokens != 51 || u.TotalTokens != 1261 ||
		u.PromptTokensDetails.CachedTokens != 1024 || u.CompletionTokensDetails.ReasoningTokens != 50 {
		t.Fatalf("got %s", got)
	}
}

func TestAppendResponseErrors(t *testing.T) {
	tests := []struct {
		name, in string
		status   int
		code     string
	}{
		{"not JSON", `{`, 502, "upstream_bad_response"},
		{"not an object", `[1]`, 502, "upstream_bad_response"},
		{"no candidates", `{"usageMetadata":{}}`, 502, "upstream_bad_response"},
		{"error body", `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`, 429, "rate_limit_exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendResponse([]byte("keep"), []byte(tc.in), "m", "id", 1)
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code || string(out) != "keep" {
				t.Fatalf("err %#v out %q, want status %d code %q", err, out, tc.status, tc.code)
			}
		})
	}
}

func TestGeneratedCompletionID(t *testing.T) {
	body := []byte(`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}`)
	a, err := AppendResponse(nil, body, "m", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := readAllStream(bytes.NewReader([]byte("data: "+string(body)+"\n\n")), "m", "", false)
	re := regexp.MustCompile(`"id":"chatcmpl-[A-Za-z0-9]{24}"`)
	if !re.Match(a) || !re.Match(b) {
		t.Fatalf("no generated id in\n%s\n%s", a, b)
	}
}
