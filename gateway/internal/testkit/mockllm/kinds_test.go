package mockllm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/valyala/fastjson"
)

func TestParseUsageKinds(t *testing.T) {
	tests := []struct {
		in   string
		want UsageKinds
		err  bool
	}{
		{"", UsageKinds{}, false},
		{"cached=100, reasoning=50", UsageKinds{CachedInput: 100, Reasoning: 50}, false},
		{"cache_write=1,audio_in=2,image_in=3,audio_out=4,image_out=5",
			UsageKinds{CacheWrite: 1, AudioInput: 2, ImageInput: 3, AudioOutput: 4, ImageOutput: 5}, false},
		{"cached", UsageKinds{}, true},
		{"cached=-1", UsageKinds{}, true},
		{"thoughts=5", UsageKinds{}, true},
	}
	for _, tt := range tests {
		got, err := ParseUsageKinds(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseUsageKinds(%q) = %+v, %v", tt.in, got, err)
		}
		if err == nil {
			if back, _ := ParseUsageKinds(got.String()); back != got {
				t.Errorf("%q: String %q reads back as %+v", tt.in, got.String(), back)
			}
		}
	}
}

// Each provider's reply reports the kinds X-Mock-Usage-Kinds asks for,
// where that provider reports them, on top of the mock's own counts.
func TestUsageKindsPerProvider(t *testing.T) {
	srv := httptest.NewServer(New(Config{APIKey: "k"}))
	defer srv.Close()
	const kinds = "cached=1000,cache_write=200,audio_in=30,image_in=40,reasoning=500,audio_out=6,image_out=7"
	chat := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 40) + `"}]}`
	tests := []struct {
		name, path, body string
		want             map[string]int64 // JSON path (dot-separated) → value
	}{
		{"openai", "/v1/chat/completions", chat, map[string]int64{
			"usage.prompt_tokens_details.cached_tokens": 1000, "usage.prompt_tokens_details.cache_write_tokens": 200,
			"usage.prompt_tokens_details.audio_tokens": 30, "usage.prompt_tokens_details.image_tokens": 40,
			"usage.completion_tokens_details.reasoning_tokens": 500, "usage.completion_tokens_details.audio_tokens": 6,
			"usage.completion_tokens_details.image_tokens": 7}},
		{"anthropic", "/v1/messages", `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"` + strings.Repeat("x", 40) + `"}]}`,
			map[string]int64{"usage.input_tokens": 10, "usage.cache_read_input_tokens": 1000, "usage.cache_creation_input_tokens": 200,
				"usage.output_tokens": 16 + 500}},
		{"bedrock", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"` + strings.Repeat("x", 40) + `"}]}]}`,
			map[string]int64{"usage.inputTokens": 10, "usage.cacheReadInputTokens": 1000, "usage.cacheWriteInputTokens": 200,
				"usage.outputTokens": 16 + 500, "usage.totalTokens": 10 + 1000 + 200 + 16 + 500}},
		{"gemini", "/v1beta/models/m:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + strings.Repeat("x", 40) + `"}]}]}`,
			map[string]int64{"usageMetadata.promptTokenCount": 10 + 1000 + 30 + 40, "usageMetadata.cachedContentTokenCount": 1000,
				"usageMetadata.thoughtsTokenCount": 500, "usageMetadata.candidatesTokenCount": 16 + 6 + 7,
				"usageMetadata.promptTokensDetails.1.tokenCount": 30, "usageMetadata.candidatesTokensDetails.2.tokenCount": 7}},
		{"responses", "/v1/responses", `{"model":"m","input":"` + strings.Repeat("x", 40) + `"}`,
			map[string]int64{"usage.input_tokens": 10 + 1000, "usage.input_tokens_details.cached_tokens": 1000,
				"usage.output_tokens": 16 + 500, "usage.output_tokens_details.reasoning_tokens": 500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(HeaderUsageKinds, kinds)
			// Every provider's credentials and version at once.
			for k, v := range map[string]string{"Authorization": "Bearer k", "x-api-key": "k", "x-goog-api-key": "k", "anthropic-version": "2023-06-01"} {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			v, err := fastjson.ParseBytes(body)
			if resp.StatusCode != 200 || err != nil {
				t.Fatalf("%d %s (%v)", resp.StatusCode, body, err)
			}
			for path, want := range tt.want {
				if got := v.GetInt64(strings.Split(path, ".")...); got != want {
					t.Errorf("%s = %d, want %d\n%s", path, got, want, body)
				}
			}
		})
	}
}
