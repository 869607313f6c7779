package proxy

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/anthropic"
	"github.com/tollgate/tollgate/gateway/internal/bedrock"
	"github.com/tollgate/tollgate/gateway/internal/gemini"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// kindsPrice has a distinct rate for every kind of token, so a kind read
// as another one changes the cost.
var kindsPrice = tenant.Price{
	InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000,
	CachedInputMicrosPerMTok: 300_000, CacheWriteMicrosPerMTok: 3_750_000,
	AudioInputMicrosPerMTok: 40_000_000, ImageInputMicrosPerMTok: 5_000_000,
	ReasoningMicrosPerMTok: 20_000_000, AudioOutputMicrosPerMTok: 80_000_000, ImageOutputMicrosPerMTok: 40_000_000,
}

// tokensOf is what the exchange hands the budget's settle for u.
func tokensOf(u openai.Usage) tenant.TokenUsage {
	x := exchange{usage: u}
	k := x.tokenKinds()
	return tenant.TokenUsage{Prompt: u.PromptTokens, Completion: u.CompletionTokens,
		CachedInput: k.CachedInput, CacheWrite: k.CacheWrite, AudioInput: k.AudioInput, ImageInput: k.ImageInput,
		Reasoning: k.Reasoning, AudioOutput: k.AudioOutput, ImageOutput: k.ImageOutput}
}

// TestReplyUsageKinds follows each provider's non-streamed reply through
// the translation the exchange makes of it to the usage settle prices:
// the kinds must survive, and the cost is what the list rates give.
func TestReplyUsageKinds(t *testing.T) {
	tests := []struct {
		name      string
		translate func([]byte) ([]byte, error) // nil: an OpenAI reply, read as sent
		body      string
		want      tenant.TokenUsage
		cost      int64
	}{
		{"openai chat", nil,
			`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],` +
				`"usage":{"prompt_tokens":2000,"completion_tokens":1000,"total_tokens":3000,` +
				`"prompt_tokens_details":{"cached_tokens":1000,"audio_tokens":100},"completion_tokens_details":{"reasoning_tokens":600,"audio_tokens":50}}}`,
			tenant.TokenUsage{Prompt: 2000, Completion: 1000, CachedInput: 1000, AudioInput: 100, Reasoning: 600, AudioOutput: 50},
			// 900×3 + 1000×0.3 + 100×40 + 350×15 + 600×20 + 50×80 = 2700+300+4000+5250+12000+4000
			28250},
		{"anthropic", func(b []byte) ([]byte, error) { return anthropic.AppendResponse(nil, b, "m", "id", 1) },
			`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",` +
				`"usage":{"input_tokens":1000,"cache_creation_input_tokens":2000,"cache_read_input_tokens":10000,"output_tokens":500}}`,
			tenant.TokenUsage{Prompt: 13000, Completion: 500, CachedInput: 10000, CacheWrite: 2000},
			// 1000×3 + 10000×0.3 + 2000×3.75 + 500×15 = 3000+3000+7500+7500
			21000},
		{"bedrock", func(b []byte) ([]byte, error) { return bedrock.AppendResponse(nil, b, "m", "id", 1) },
			`{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn",` +
				`"usage":{"inputTokens":1000,"outputTokens":500,"totalTokens":13500,"cacheReadInputTokens":10000,"cacheWriteInputTokens":2000}}`,
			tenant.TokenUsage{Prompt: 13000, Completion: 500, CachedInput: 10000, CacheWrite: 2000},
			21000},
		{"gemini", func(b []byte) ([]byte, error) { return gemini.AppendResponse(nil, b, "m", "id", 1) },
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],` +
				`"usageMetadata":{"promptTokenCount":3000,"candidatesTokenCount":400,"thoughtsTokenCount":600,"cachedContentTokenCount":1000,` +
				`"promptTokensDetails":[{"modality":"TEXT","tokenCount":1800},{"modality":"AUDIO","tokenCount":200},{"modality":"IMAGE","tokenCount":1000}]}}`,
			tenant.TokenUsage{Prompt: 3000, Completion: 1000, CachedInput: 1000, AudioInput: 200, ImageInput: 1000, Reasoning: 600},
			// 800×3 + 1000×0.3 + 200×40 + 1000×5 + 400×15 + 600×20 = 2400+300+8000+5000+6000+12000
			33700},
		{"responses upstream", func(b []byte) ([]byte, error) { return responses.AppendChatView(nil, b) },
			`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],` +
				`"usage":{"input_tokens":2000,"input_tokens_details":{"cached_tokens":1500},"output_tokens":1000,"output_tokens_details":{"reasoning_tokens":800},"total_tokens":3000}}`,
			tenant.TokenUsage{Prompt: 2000, Completion: 1000, CachedInput: 1500, Reasoning: 800},
			// 500×3 + 1500×0.3 + 200×15 + 800×20 = 1500+450+3000+16000
			20950},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if tt.translate != nil {
				var err error
				if body, err = tt.translate(body); err != nil {
					t.Fatal(err)
				}
			}
			_, u, err := stream.ReplyText(body)
			if err != nil || !u.Present {
				t.Fatalf("ReplyText(%s): usage %+v, %v", body, u, err)
			}
			got := tokensOf(u)
			if got != tt.want {
				t.Fatalf("usage %+v\nwant  %+v\n(from %s)", got, tt.want, body)
			}
			if cost := kindsPrice.Cost(got); cost != tt.cost {
				t.Errorf("cost %d micros; want %d", cost, tt.cost)
			}
		})
	}
}

// TestStreamUsageKinds: the usage a stream's translation (or view, for
// the native endpoints) reports at its end carries the kinds too.
func TestStreamUsageKinds(t *testing.T) {
	tests := []struct {
		name  string
		usage func(t *testing.T) openai.Usage
		want  tenant.TokenUsage
	}{
		{"openai chunk", func(t *testing.T) openai.Usage {
			var p openai.ChunkParser
			var c openai.Chunk
			if err := p.Parse([]byte(`{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":16},"completion_tokens_details":{"reasoning_tokens":8}}}`), &c); err != nil {
				t.Fatal(err)
			}
			return c.Usage
		}, tenant.TokenUsage{Prompt: 20, Completion: 9, CachedInput: 16, Reasoning: 8}},
		{"anthropic translated", func(t *testing.T) openai.Usage {
			var tr anthropic.StreamTranslator
			tr.Reset("m", "id", 1, true)
			for _, ev := range []string{
				`{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":7,"cache_creation_input_tokens":30,"cache_read_input_tokens":100,"output_tokens":1}}}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`,
			} {
				if _, err := tr.Append(nil, []byte(ev), nil); err != nil {
					t.Fatal(err)
				}
			}
			return tr.Usage()
		}, tenant.TokenUsage{Prompt: 137, Completion: 12, CachedInput: 100, CacheWrite: 30}},
		{"anthropic native", func(t *testing.T) openai.Usage {
			var v anthropic.ChunkView
			v.Reset()
			var c openai.Chunk
			for _, ev := range []string{
				`{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":7,"cache_creation_input_tokens":30,"cache_read_input_tokens":100,"output_tokens":1}}}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`,
			} {
				if _, err := v.Parse([]byte(ev), nil, &c); err != nil {
					t.Fatal(err)
				}
			}
			return v.Usage()
		}, tenant.TokenUsage{Prompt: 137, Completion: 12, CachedInput: 100, CacheWrite: 30}},
		{"gemini", func(t *testing.T) openai.Usage {
			var tr gemini.StreamTranslator
			tr.Reset("m", "id", 1, true)
			ev := `{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],` +
				`"usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":5,"thoughtsTokenCount":40,"cachedContentTokenCount":32}}`
			if _, err := tr.Append(nil, []byte(ev)); err != nil {
				t.Fatal(err)
			}
			return tr.Usage()
		}, tenant.TokenUsage{Prompt: 50, Completion: 45, CachedInput: 32, Reasoning: 40}},
		{"responses upstream", func(t *testing.T) openai.Usage {
			var v responses.View
			v.Reset()
			var c openai.Chunk
			ev := `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed","output":[],` +
				`"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":8},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":20},"total_tokens":70}}}`
			if _, err := v.Parse([]byte(ev), &c); err != nil {
				t.Fatal(err)
			}
			return v.Usage()
		}, tenant.TokenUsage{Prompt: 40, Completion: 30, CachedInput: 8, Reasoning: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.usage(t)
			if !u.Present {
				t.Fatal("no usage")
			}
			if got := tokensOf(u); got != tt.want {
				t.Errorf("usage %+v\nwant  %+v", got, tt.want)
			}
		})
	}
}
