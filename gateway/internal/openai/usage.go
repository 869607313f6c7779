package openai

import (
	"strconv"

	"github.com/valyala/fastjson"
)

// Usage is the token usage an upstream reports, in OpenAI's terms: the
// prompt counts every input token and the completion every output token;
// the kinds below are parts of them, 0 when not reported. Translated
// upstreams (Anthropic, Bedrock, Gemini, a Responses upstream) report
// theirs in these terms too, so accounting reads one shape.
type Usage struct {
	Present          bool // "usage" is an object
	PromptTokens     int64
	CompletionTokens int64
	TotalTokens      int64

	// Of PromptTokens: prompt_tokens_details.cached_tokens (read from the
	// prompt cache), .cache_write_tokens (written to it: Anthropic's and
	// Bedrock's cache writes, a member OpenAI itself does not send),
	// .audio_tokens and .image_tokens.
	CachedTokens, CacheWriteTokens, AudioInputTokens, ImageInputTokens int64
	// Of CompletionTokens: completion_tokens_details.reasoning_tokens,
	// .audio_tokens and .image_tokens.
	ReasoningTokens, AudioOutputTokens, ImageOutputTokens int64
}

// ParseUsage reads a usage object of any OpenAI API: Chat Completions'
// and Completions' (prompt_tokens, prompt_tokens_details...) or the
// Responses, Images and transcription APIs' (input_tokens,
// input_tokens_details, output_tokens_details). v nil or not an object is
// no usage (Present false). Negative or non-integer counts read as 0.
func ParseUsage(v *fastjson.Value) Usage {
	if v == nil || v.Type() != fastjson.TypeObject {
		return Usage{}
	}
	u := Usage{Present: true, TotalTokens: count(v.Get("total_tokens"))}
	in, out := v.Get("prompt_tokens_details"), v.Get("completion_tokens_details")
	if p := v.Get("prompt_tokens"); p != nil || v.Get("input_tokens") == nil {
		u.PromptTokens, u.CompletionTokens = count(p), count(v.Get("completion_tokens"))
	} else {
		u.PromptTokens, u.CompletionTokens = count(v.Get("input_tokens")), count(v.Get("output_tokens"))
		in, out = v.Get("input_tokens_details"), v.Get("output_tokens_details")
	}
	if in != nil && in.Type() == fastjson.TypeObject {
		u.CachedTokens = count(in.Get("cached_tokens"))
		u.CacheWriteTokens = count(in.Get("cache_write_tokens"))
		u.AudioInputTokens = count(in.Get("audio_tokens"))
		u.ImageInputTokens = count(in.Get("image_tokens"))
	}
	if out != nil && out.Type() == fastjson.TypeObject {
		u.ReasoningTokens = count(out.Get("reasoning_tokens"))
		u.AudioOutputTokens = count(out.Get("audio_tokens"))
		u.ImageOutputTokens = count(out.Get("image_tokens"))
	}
	return u
}

// count reads a token count: a non-negative integer, else 0.
func count(v *fastjson.Value) int64 {
	if v == nil {
		return 0
	}
	n, err := v.Int64()
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// AppendUsage appends u as a Chat Completions usage object: the three
// totals, then prompt_tokens_details and completion_tokens_details with
// the kinds that are not 0 (each object left out when all of its kinds
// are 0).
func AppendUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, u.PromptTokens, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.CompletionTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	dst = strconv.AppendInt(dst, total, 10)
	dst = appendDetails(dst, `,"prompt_tokens_details":{`, [...]detail{
		{"cached_tokens", u.CachedTokens}, {"cache_write_tokens", u.CacheWriteTokens},
		{"audio_tokens", u.AudioInputTokens}, {"image_tokens", u.ImageInputTokens}})
	dst = appendDetails(dst, `,"completion_tokens_details":{`, [...]detail{
		{"reasoning_tokens", u.ReasoningTokens}, {"audio_tokens", u.AudioOutputTokens},
		{"image_tokens", u.ImageOutputTokens}, {}})
	return append(dst, '}')
}

type detail struct {
	name string
	n    int64
}

// appendDetails appends open, the members of ds that are above 0 and
// the closing brace; nothing when none is.
func appendDetails(dst []byte, open string, ds [4]detail) []byte {
	first := true
	for _, d := range ds {
		if d.n <= 0 {
			continue
		}
		if first {
			dst = append(dst, open...)
			first = false
		} else {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, d.name...)
		dst = append(dst, `":`...)
		dst = strconv.AppendInt(dst, d.n, 10)
	}
	if !first {
		dst = append(dst, '}')
	}
	return dst
}
