package gemini

import (
	"math/rand/v2"

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

	// Of Prompt, by promptTokensDetails' modality: AUDIO and IMAGE
	// (VIDEO and DOCUMENT are billed as text is, so they are left in the
	// prompt's base count).
	AudioPrompt, ImagePrompt int64
	// Of Candidates, by candidatesTokensDetails' modality.
	AudioCandidates, ImageCandidates int64
}

// PromptTokens is OpenAI's prompt_tokens: the prompt and the results of
// tools Gemini ran itself.
func (u Usage) PromptTokens() int64 { return u.Prompt + u.ToolUsePrompt }

// CompletionTokens is OpenAI's completion_tokens: the candidates and the
// thinking, which is billed as output.
func (u Usage) CompletionTokens() int64 { return u.Candidates + u.Thoughts }

// OpenAI returns u in the gateway's terms: cached_tokens are
// cachedContentTokenCount (part of promptTokenCount), reasoning_tokens the
// thoughts (billed as output), audio and image tokens by modality.
func (u Usage) OpenAI() openai.Usage {
	if !u.Present {
		return openai.Usage{}
	}
	p, c := u.PromptTokens(), u.CompletionTokens()
	return openai.Usage{Present: true, PromptTokens: p, CompletionTokens: c, TotalTokens: p + c,
		CachedTokens: u.Cached, AudioInputTokens: u.AudioPrompt, ImageInputTokens: u.ImagePrompt,
		ReasoningTokens: u.Thoughts, AudioOutputTokens: u.AudioCandidates, ImageOutputTokens: u.ImageCandidates}
}

// usageOf reads a usageMetadata object; nil or not an object is absent.
func usageOf(v *fastjson.Value) Usage {
	if v == nil || v.Type() != fastjson.TypeObject {
		return Usage{}
	}
	u := Usage{
		Present:       true,
		Prompt:        intOf(v.Get("promptTokenCount")),
		ToolUsePrompt: intOf(v.Get("toolUsePromptTokenCount")),
		Candidates:    intOf(v.Get("candidatesTokenCount")),
		Thoughts:      intOf(v.Get("thoughtsTokenCount")),
		Cached:        intOf(v.Get("cachedContentTokenCount")),
	}
	u.AudioPrompt, u.ImagePrompt = modalities(v.GetArray("promptTokensDetails"))
	u.AudioCandidates, u.ImageCandidates = modalities(v.GetArray("candidatesTokensDetails"))
	return u
}

// modalities sums a ModalityTokenCount list's AUDIO and IMAGE counts.
func modalities(list []*fastjson.Value) (audio, image int64) {
	for _, m := range list {
		switch string(m.GetStringBytes("modality")) {
		case "AUDIO":
			audio += intOf(m.Get("tokenCount"))
		case "IMAGE":
			image += intOf(m.Get("tokenCount"))
		}
	}
	return audio, image
}

// appendUsage appends the OpenAI usage object for u.
func appendUsage(dst []byte, u Usage) []byte { return openai.AppendUsage(dst, u.OpenAI()) }

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
