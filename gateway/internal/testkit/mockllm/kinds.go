package mockllm

import (
	"errors"
	"strconv"
	"strings"
)

// HeaderUsageKinds overrides Config.UsageKinds for one request, in
// ParseUsageKinds' syntax ("cached=100,reasoning=50").
const HeaderUsageKinds = "X-Mock-Usage-Kinds"

var keyUsageKinds = canonical(HeaderUsageKinds)

// UsageKinds are tokens of the kinds providers price apart that the mock
// reports on top of the tokens it counts, so tests can check what a
// reply of cached, reasoning or audio tokens costs. Input kinds add to the
// prompt's count and output kinds to the completion's, and each is
// reported where its provider reports it:
//
//	                OpenAI chat/completions   Responses   Anthropic, Bedrock          Gemini
//	CachedInput     cached_tokens             cached      cache_read_input_tokens     cachedContentTokenCount
//	CacheWrite      cache_write_tokens¹       —           cache_creation/write        —
//	AudioInput      audio_tokens              —           —                           promptTokensDetails AUDIO
//	ImageInput      image_tokens              —           —                           promptTokensDetails IMAGE
//	Reasoning       reasoning_tokens          reasoning   in output_tokens²           thoughtsTokenCount
//	AudioOutput     audio_tokens              —           —                           candidatesTokensDetails AUDIO
//	ImageOutput     image_tokens              —           —                           candidatesTokensDetails IMAGE
//
// ¹ not an OpenAI member: the gateway's own, as its translations write it.
// ² Anthropic counts thinking in output_tokens and reports it no further.
// A kind a provider cannot report ("—") is left out of its reply entirely.
type UsageKinds struct {
	CachedInput, CacheWrite, AudioInput, ImageInput int
	Reasoning, AudioOutput, ImageOutput             int
}

// usageKindNames are ParseUsageKinds' names, in field order.
var usageKindNames = [7]string{"cached", "cache_write", "audio_in", "image_in", "reasoning", "audio_out", "image_out"}

func (k *UsageKinds) fields() [7]*int {
	return [7]*int{&k.CachedInput, &k.CacheWrite, &k.AudioInput, &k.ImageInput, &k.Reasoning, &k.AudioOutput, &k.ImageOutput}
}

// ParseUsageKinds reads "name=count" pairs, comma-separated, names from
// cached, cache_write, audio_in, image_in, reasoning, audio_out,
// image_out; "" is none.
func ParseUsageKinds(s string) (UsageKinds, error) {
	var k UsageKinds
	dst := k.fields()
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, v, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(v)
		i := indexOf(usageKindNames[:], name)
		if !ok || err != nil || n < 0 || n > 1<<30 || i < 0 {
			return UsageKinds{}, errors.New("usage kinds must be comma-separated name=count pairs, names from " +
				strings.Join(usageKindNames[:], ", ") + ", got " + strconv.Quote(f))
		}
		*dst[i] = n
	}
	return k, nil
}

// String is k in ParseUsageKinds' syntax.
func (k UsageKinds) String() string {
	var parts []string
	for i, v := range k.fields() {
		if *v > 0 {
			parts = append(parts, usageKindNames[i]+"="+strconv.Itoa(*v))
		}
	}
	return strings.Join(parts, ",")
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// prompt and completion are the tokens the kinds add to each side.
func (k *UsageKinds) prompt() int     { return k.CachedInput + k.CacheWrite + k.AudioInput + k.ImageInput }
func (k *UsageKinds) completion() int { return k.Reasoning + k.AudioOutput + k.ImageOutput }

// appendOpenAIUsage appends a Chat Completions usage object: prompt and
// completion (the mock's counts) plus the kinds, with their details.
func appendOpenAIUsage(b []byte, prompt, completion int, k *UsageKinds) []byte {
	if *k == (UsageKinds{}) {
		return appendUsage(b, prompt, completion)
	}
	prompt += k.prompt()
	completion += k.completion()
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(k.CachedInput), 10)
	b = append(b, `,"cache_write_tokens":`...)
	b = strconv.AppendInt(b, int64(k.CacheWrite), 10)
	b = append(b, `,"audio_tokens":`...)
	b = strconv.AppendInt(b, int64(k.AudioInput), 10)
	b = append(b, `,"image_tokens":`...)
	b = strconv.AppendInt(b, int64(k.ImageInput), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(k.Reasoning), 10)
	b = append(b, `,"audio_tokens":`...)
	b = strconv.AppendInt(b, int64(k.AudioOutput), 10)
	b = append(b, `,"image_tokens":`...)
	b = strconv.AppendInt(b, int64(k.ImageOutput), 10)
	return append(b, `}}`...)
}

// appendModalities appends a Gemini ModalityTokenCount list member
// (`,"NAME":[...]`) of audio and image tokens; nothing when both are 0.
func appendModalities(b []byte, name string, text, audio, image int) []byte {
	if audio == 0 && image == 0 {
		return b
	}
	b = append(b, `,"`+name+`":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(text), 10)
	b = append(b, '}')
	if audio > 0 {
		b = append(b, `,{"modality":"AUDIO","tokenCount":`...)
		b = strconv.AppendInt(b, int64(audio), 10)
		b = append(b, '}')
	}
	if image > 0 {
		b = append(b, `,{"modality":"IMAGE","tokenCount":`...)
		b = strconv.AppendInt(b, int64(image), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}
