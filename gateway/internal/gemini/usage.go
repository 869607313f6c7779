package gemini

import (
	"math/rand/v2"
	"strconv"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Usage is a usageMetadata object. Counts Gemini leaves out are zero.
type Usage struct {
	Present       bool  // the reply carried usageMetadata
	Prompt        int64 // promptTokenCount (includes Cached)
	ToolUsePrompt int64 // toolUsePromptTokenCount
	Candidates    int64 // candidatesTokenCount
	Thoughts      int64 // thoughtsTokenCount
	Cached        int64 // cachedContentTokenCount
}

// PromptTokens is OpenAI's prompt_tokens: the prompt and the results of
// tools Gemini ran itself.
func (u Usage) PromptTokens() int64 { return u.Prompt + u.ToolUsePrompt }

// CompletionTokens is OpenAI's completion_tokens: the candidates and the
// thinking, which is billed as output.
func (u Usage) CompletionTokens() int64 { return u.Candidates + u.Thoughts }

// OpenAI returns u in the gateway's terms.
func (u Usage) OpenAI() openai.Usage {
	if !u.Present {
		return openai.Usage{}
	}
	p, c := u.PromptTokens(), u.CompletionTokens()
	return openai.Usage{Present: true, PromptTokens: p, CompletionTokens: c, TotalTokens: p + c}
}

// usageOf reads a usageMetadata object; nil or not an object is absent.
func usageOf(v *fastjson.Value) Usage {
	if v == nil || v.Type() != fastjson.TypeObject {
		return Usage{}
	}
	return Usage{
		Present:       true,
		Prompt:        intOf(v.Get("promptTokenCount")),
		ToolUsePrompt: intOf(v.Get("toolUsePromptTokenCount")),
		Candidates:    intOf(v.Get("candidatesTokenCount")),
		Thoughts:      intOf(v.Get("thoughtsTokenCount")),
		Cached:        intOf(v.Get("cachedContentTokenCount")),
	}
}

// appendUsage appends the OpenAI usage object for u.
func appendUsage(dst []byte, u Usage) []byte {
	p, c := u.PromptTokens(), u.CompletionTokens()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, p, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, c, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, p+c, 10)
	if u.Cached > 0 {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, u.Cached, 10)
		dst = append(dst, '}')
	}
	if u.Thoughts > 0 {
		dst = append(dst, `,"completion_tokens_details":{"reasoning_tokens":`...)
		dst = strconv.AppendInt(dst, u.Thoughts, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// FinishReason maps a Gemini finishReason (or a promptFeedback
// blockReason) to an OpenAI finish_reason: MAX_TOKENS → "length"; SAFETY,
// RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_SAFETY,
// IMAGE_PROHIBITED_CONTENT and OTHER-reason blocks → "content_filter";
// STOP (and anything else) → "tool_calls" when the reply has function
// calls, else "stop".
func FinishReason(reason []byte, toolCalls bool) string {
	switch string(reason) {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION":
		return "content_filter"
	}
	if toolCalls {
		return "tool_calls"
	}
	return "stop"
}

// callIDAlphabet is what generated tool call ids are made of.
const callIDAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// appendCallID appends a tool call id: Gemini's functionCall.id when it
// sent one, else "call_" and 24 random letters and digits (Gemini matches
// calls by name, OpenAI clients by id, so each call needs its own).
func appendCallID(dst, id []byte) []byte {
	if len(id) > 0 {
		return openai.AppendJSONString(dst, id)
	}
	return appendRandomID(dst, "call_")
}

// appendRandomID appends a JSON string of prefix and 24 random letters
// and digits.
func appendRandomID(dst []byte, prefix string) []byte {
	dst = append(dst, '"')
	dst = append(dst, prefix...)
	for range 2 {
		r := rand.Uint64()
		for range 12 {
			dst = append(dst, callIDAlphabet[r%uint64(len(callIDAlphabet))])
			r /= uint64(len(callIDAlphabet))
		}
	}
	return append(dst, '"')
}
