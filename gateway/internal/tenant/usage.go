package tenant

// TokenUsage is what one request used, by kind of token, as the upstream
// reported it (OpenAI's semantics): Prompt includes every input kind
// (cached reads, cache writes, audio, image), Completion every output kind
// (reasoning, audio, image). A kind the upstream does not report is 0.
type TokenUsage struct {
	Prompt     int64 // every input token
	Completion int64 // every output token

	CachedInput int64 // of Prompt: read from the provider's prompt cache
	CacheWrite  int64 // of Prompt: written to the provider's prompt cache (Anthropic, Bedrock)
	AudioInput  int64 // of Prompt: audio
	ImageInput  int64 // of Prompt: images

	Reasoning   int64 // of Completion: hidden reasoning ("thinking") tokens
	AudioOutput int64 // of Completion: audio
	ImageOutput int64 // of Completion: images
}

// rate returns r, or base when r is not set (0 or less): a kind without a
// rate of its own costs what the base rate of its side does.
func rate(r, base int64) int64 {
	if r <= 0 {
		return base
	}
	return r
}

// InputRateMax is the highest rate any input token of the model can cost:
// what an upper bound of a prompt's cost prices its tokens at.
func (p *Price) InputRateMax() int64 {
	return max(p.InputMicrosPerMTok, rate(p.CachedInputMicrosPerMTok, 0), rate(p.CacheWriteMicrosPerMTok, 0),
		rate(p.AudioInputMicrosPerMTok, 0), rate(p.ImageInputMicrosPerMTok, 0))
}

// OutputRateMax is the highest rate any output token of the model can cost.
func (p *Price) OutputRateMax() int64 {
	return max(p.OutputMicrosPerMTok, rate(p.ReasoningMicrosPerMTok, 0),
		rate(p.AudioOutputMicrosPerMTok, 0), rate(p.ImageOutputMicrosPerMTok, 0))
}

// Cost prices u, in USD micros rounded up: each kind at its rate, the rest
// of Prompt and Completion at the base rates. Kinds that add up to more
// than their total (a malformed report) are priced as reported, and the
// rest of the total as 0.
func (p *Price) Cost(u TokenUsage) int64 {
	in := max(u.Prompt-u.CachedInput-u.CacheWrite-u.AudioInput-u.ImageInput, 0)
	out := max(u.Completion-u.Reasoning-u.AudioOutput-u.ImageOutput, 0)
	// Sum in micros×tokens per million, one rounding at the end.
	sum := mul(in, p.InputMicrosPerMTok) +
		mul(u.CachedInput, rate(p.CachedInputMicrosPerMTok, p.InputMicrosPerMTok)) +
		mul(u.CacheWrite, rate(p.CacheWriteMicrosPerMTok, p.InputMicrosPerMTok)) +
		mul(u.AudioInput, rate(p.AudioInputMicrosPerMTok, p.InputMicrosPerMTok)) +
		mul(u.ImageInput, rate(p.ImageInputMicrosPerMTok, p.InputMicrosPerMTok)) +
		mul(out, p.OutputMicrosPerMTok) +
		mul(u.Reasoning, rate(p.ReasoningMicrosPerMTok, p.OutputMicrosPerMTok)) +
		mul(u.AudioOutput, rate(p.AudioOutputMicrosPerMTok, p.OutputMicrosPerMTok)) +
		mul(u.ImageOutput, rate(p.ImageOutputMicrosPerMTok, p.OutputMicrosPerMTok))
	if sum <= 0 {
		return 0
	}
	return (sum + 999_999) / 1_000_000
}

// BoundCost is the most a request of prompt input tokens and completion
// output tokens can cost, every token at the highest rate of its side.
func (p *Price) BoundCost(prompt, completion int64) int64 {
	sum := mul(prompt, p.InputRateMax()) + mul(completion, p.OutputRateMax())
	if sum <= 0 {
		return 0
	}
	return (sum + 999_999) / 1_000_000
}

func mul(tokens, microsPerMTok int64) int64 {
	if tokens <= 0 || microsPerMTok <= 0 {
		return 0
	}
	return tokens * microsPerMTok
}
