package bedrock

import (
	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// JSON writing. Every string this package writes goes through
// openai.AppendJSONString, which yields valid JSON whatever the input
// bytes (fastjson's encoder writes Go escapes such as \x01).

// appendValue appends v re-encoded as compact JSON. Numbers are copied as
// written, so v must come from input that passed fastjson.Validate.
func appendValue(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		dst = append(dst, '{')
		first := true
		o.Visit(func(key []byte, vv *fastjson.Value) {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = openai.AppendJSONString(dst, key)
			dst = append(dst, ':')
			dst = appendValue(dst, vv)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		a, _ := v.Array()
		dst = append(dst, '[')
		for i, vv := range a {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, vv)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return openai.AppendJSONString(dst, s)
	default: // numbers, true, false, null
		return v.MarshalTo(dst)
	}
}

// isNull reports an absent or null member.
func isNull(v *fastjson.Value) bool {
	return v == nil || v.Type() == fastjson.TypeNull
}

// stringOf returns v's unescaped string and true, or nil and false when v
// is not a string.
func stringOf(v *fastjson.Value) ([]byte, bool) {
	if v == nil || v.Type() != fastjson.TypeString {
		return nil, false
	}
	s, _ := v.StringBytes()
	return s, true
}

// Usage is the token usage a Converse reply or a ConverseStream metadata
// event reports. Counts are as Bedrock sent them.
type Usage struct {
	Present               bool // a "usage" object was there
	InputTokens           int64
	OutputTokens          int64
	CacheReadInputTokens  int64
	CacheWriteInputTokens int64
}

// PromptTokens is OpenAI's prompt_tokens for u: Bedrock's inputTokens
// leave out the tokens read from and written to the prompt cache, which
// OpenAI counts as prompt tokens (cached ones reported again in
// prompt_tokens_details.cached_tokens).
func (u Usage) PromptTokens() int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
}

// OpenAI returns u in the gateway's accounting terms.
func (u Usage) OpenAI() openai.Usage {
	if !u.Present {
		return openai.Usage{}
	}
	p := u.PromptTokens()
	return openai.Usage{Present: true, PromptTokens: p, CompletionTokens: u.OutputTokens, TotalTokens: p + u.OutputTokens,
		CachedTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheWriteInputTokens}
}

// usageOf reads a Bedrock usage object; negative or non-integer counts
// read as 0.
func usageOf(v *fastjson.Value) Usage {
	if v == nil || v.Type() != fastjson.TypeObject {
		return Usage{}
	}
	return Usage{
		Present:               true,
		InputTokens:           count(v.Get("inputTokens")),
		OutputTokens:          count(v.Get("outputTokens")),
		CacheReadInputTokens:  count(v.Get("cacheReadInputTokens")),
		CacheWriteInputTokens: count(v.Get("cacheWriteInputTokens")),
	}
}

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

// appendUsage appends the OpenAI usage object for u.
func appendUsage(dst []byte, u Usage) []byte { return openai.AppendUsage(dst, u.OpenAI()) }
