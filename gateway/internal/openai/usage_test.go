package openai

import (
	"testing"

	"github.com/valyala/fastjson"
)

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name, json string
		want       Usage
	}{
		{"chat with details", `{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,` +
			`"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":10},` +
			`"completion_tokens_details":{"reasoning_tokens":256,"audio_tokens":4,"accepted_prediction_tokens":0}}`,
			Usage{Present: true, PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306,
				CachedTokens: 1920, AudioInputTokens: 10, ReasoningTokens: 256, AudioOutputTokens: 4}},
		{"translated cache write", `{"prompt_tokens":2162,"completion_tokens":10,"total_tokens":2172,` +
			`"prompt_tokens_details":{"cached_tokens":2048,"cache_write_tokens":100}}`,
			Usage{Present: true, PromptTokens: 2162, CompletionTokens: 10, TotalTokens: 2172, CachedTokens: 2048, CacheWriteTokens: 100}},
		{"responses", `{"input_tokens":328,"input_tokens_details":{"cached_tokens":128},` +
			`"output_tokens":52,"output_tokens_details":{"reasoning_tokens":40},"total_tokens":380}`,
			Usage{Present: true, PromptTokens: 328, CompletionTokens: 52, TotalTokens: 380, CachedTokens: 128, ReasoningTokens: 40}},
		{"images", `{"total_tokens":100,"input_tokens":50,"output_tokens":50,"input_tokens_details":{"text_tokens":10,"image_tokens":40}}`,
			Usage{Present: true, PromptTokens: 50, CompletionTokens: 50, TotalTokens: 100, ImageInputTokens: 40}},
		{"no details", `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`,
			Usage{Present: true, PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}},
		{"null details", `{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":null,"completion_tokens_details":"x"}`,
			Usage{Present: true, PromptTokens: 5, CompletionTokens: 7}},
		{"negative and strings", `{"prompt_tokens":-5,"completion_tokens":"7","prompt_tokens_details":{"cached_tokens":-1}}`,
			Usage{Present: true}},
		{"chat names win", `{"prompt_tokens":5,"input_tokens":9,"completion_tokens":1}`,
			Usage{Present: true, PromptTokens: 5, CompletionTokens: 1}},
		{"null", `null`, Usage{}},
		{"array", `[1]`, Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := fastjson.MustParse(tt.json)
			if got := ParseUsage(v); got != tt.want {
				t.Errorf("ParseUsage(%s)\n got %+v\nwant %+v", tt.json, got, tt.want)
			}
		})
	}
	if got := ParseUsage(nil); got != (Usage{}) {
		t.Errorf("ParseUsage(nil) = %+v", got)
	}
}

func TestAppendUsage(t *testing.T) {
	tests := []struct {
		name string
		u    Usage
		want string
	}{
		{"totals only", Usage{Present: true, PromptTokens: 5, CompletionTokens: 7},
			`{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`},
		{"every kind", Usage{Present: true, PromptTokens: 100, CompletionTokens: 50, TotalTokens: 150,
			CachedTokens: 1, CacheWriteTokens: 2, AudioInputTokens: 3, ImageInputTokens: 4,
			ReasoningTokens: 5, AudioOutputTokens: 6, ImageOutputTokens: 7},
			`{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150,` +
				`"prompt_tokens_details":{"cached_tokens":1,"cache_write_tokens":2,"audio_tokens":3,"image_tokens":4},` +
				`"completion_tokens_details":{"reasoning_tokens":5,"audio_tokens":6,"image_tokens":7}}`},
		{"reasoning only", Usage{Present: true, PromptTokens: 1, CompletionTokens: 9, ReasoningTokens: 8},
			`{"prompt_tokens":1,"completion_tokens":9,"total_tokens":10,"completion_tokens_details":{"reasoning_tokens":8}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendUsage(nil, tt.u))
			if got != tt.want {
				t.Fatalf("AppendUsage\n got %s\nwant %s", got, tt.want)
			}
			// What is written reads back the same (total filled in).
			back := ParseUsage(fastjson.MustParse(got))
			want := tt.u
			want.TotalTokens = want.PromptTokens + want.CompletionTokens
			if back != want {
				t.Errorf("read back %+v; want %+v", back, want)
			}
		})
	}
}

// FuzzUsage: whatever usage object an upstream sends, ParseUsage never
// reads a negative count and AppendUsage writes JSON that reads back
// the same.
func FuzzUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":2006,"completion_tokens":300,"prompt_tokens_details":{"cached_tokens":1920},"completion_tokens_details":{"reasoning_tokens":256}}`,
		`{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1}}`,
		`{"prompt_tokens":-1}`, `{}`, `null`, `{"prompt_tokens":1e30}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := fastjson.Parse(s)
		if err != nil {
			return
		}
		u := ParseUsage(v)
		for _, n := range []int64{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.CachedTokens, u.CacheWriteTokens,
			u.AudioInputTokens, u.ImageInputTokens, u.ReasoningTokens, u.AudioOutputTokens, u.ImageOutputTokens} {
			if n < 0 {
				t.Fatalf("negative count in %+v from %s", u, s)
			}
		}
		if !u.Present || u.TotalTokens < 0 || u.PromptTokens+u.CompletionTokens < 0 {
			return
		}
		out := AppendUsage(nil, u)
		back := ParseUsage(fastjson.MustParseBytes(out))
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		if back != u {
			t.Fatalf("%s read back as %+v; want %+v", out, back, u)
		}
	})
}
