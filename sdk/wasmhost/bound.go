package wasmhost

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The constants of PromptTokensBound: tokens a provider adds to a prompt
// that the body does not hold.
const (
	// MessageTokens is added per message, and once more for the reply's
	// start: the chat template's role and separator tokens (OpenAI counts
	// 3 per message and 3 for the reply; the body itself already holds
	// the role's text and a dozen bytes of JSON per message).
	MessageTokens = 8
	// ToolUseTokens is added when tools are declared: the instructions a
	// provider wraps tool definitions in (Anthropic's tool-use system
	// prompt is about 350 tokens; OpenAI's namespace wrapper far less).
	ToolUseTokens = 1024
	// BuiltinToolTokens is added per tool whose definition the provider
	// supplies (Anthropic's computer-use tool is about 735 tokens, its
	// text editor about 700, bash about 245).
	BuiltinToolTokens = 2048
	// DefaultImageTokens is what an image counts for when the model's
	// price does not say (Price.ImageTokens): it covers OpenAI's GPT-4o
	// family at high detail (at most 1,445), Anthropic (about 1,600 at
	// the largest size) and Gemini (258 per 768-pixel tile, 31 tiles), but
	// not models that multiply image tokens (GPT-4o mini counts up to
	// about 48,000): their catalog entry must set ImageTokens.
	DefaultImageTokens = 8192
)

// ModelFacts are the facts of a request's model the prompt bound and the
// budget need, from the model's price; 0 (false) is unknown.
type ModelFacts struct {
	ContextWindow   int64 // the most input tokens a request can have
	MaxOutputTokens int64 // the most output tokens a reply can have without max_tokens
	ImageTokens     int64 // the most input tokens one image counts for
	Reasoning       bool  // replies may hold hidden reasoning tokens
	Known           bool  // the model has a price (the facts above are its)
}

// ModelFacter is an optional interface of Services: the host's facts
// about the request's model, for request_int's MODEL_* numbers and
// PROMPT_TOKENS_BOUND. Without it every model is unknown.
type ModelFacter interface {
	ModelFacts(r *Request) ModelFacts
}

// PromptTokensBound is an upper bound of the tokens of a prompt with the
// facts b and messages messages for a model with the facts m, or false
// when there is none: parts the body cannot bound and no context window.
//
// The argument: a provider tokenizes text that the client's JSON body
// holds, each token is at least one byte of UTF-8 text, and JSON escaping
// only lengthens text, so the text's tokens are at most the body's bytes
// (PromptBytes; image payloads are taken out and counted as images).
// Added for what the body does not hold: MessageTokens per message and one
// more for the reply, ToolUseTokens when there are tools, BuiltinToolTokens
// per built-in tool, and per image the model's ImageTokens
// (DefaultImageTokens when unknown). A prompt never exceeds the context
// window, so the bound is capped by it when it is known; with parts the
// body cannot bound the context window is the bound.
func PromptTokensBound(b BoundFacts, messages int64, m ModelFacts) (int64, bool) {
	if b.Unbounded > 0 {
		return m.ContextWindow, m.ContextWindow > 0
	}
	img := m.ImageTokens
	if img <= 0 {
		img = DefaultImageTokens
	}
	n := max(b.PromptBytes, 0) + MessageTokens*(max(messages, 0)+1) + BuiltinToolTokens*b.BuiltinTools + satMul(img, b.Images)
	if b.Tools > 0 {
		n += ToolUseTokens
	}
	if n < 0 { // overflowed: only the context window bounds it
		return m.ContextWindow, m.ContextWindow > 0
	}
	if m.ContextWindow > 0 {
		n = min(n, m.ContextWindow)
	}
	return n, true
}

// satMul is a×b for a, b ≥ 0, saturating instead of overflowing.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > (1<<63-1)/b {
		return 1<<63 - 1
	}
	return a * b
}

// boundInt answers request_int's numbers from PROMPT_BYTES on; -1 for
// those it does not know.
func (r *Request) boundInt(field uint32) int64 {
	switch field {
	case intPromptBytes:
		return r.Bound.PromptBytes
	case intImages:
		return r.Bound.Images
	case intUnbounded:
		return r.Bound.Unbounded
	case intTools:
		return r.Bound.Tools
	case intBuiltinTools:
		return r.Bound.BuiltinTools
	case intChoices:
		return max(r.Bound.Choices, 1)
	}
	var m ModelFacts
	if mf, ok := r.Services.(ModelFacter); ok && len(r.Model) > 0 {
		m = mf.ModelFacts(r)
	}
	switch field {
	case intPromptTokensBound:
		if n, ok := PromptTokensBound(r.Bound, r.Messages, m); ok {
			return n
		}
	case intModelContextWindow:
		return orAbsent(m.ContextWindow)
	case intModelMaxOutput:
		return orAbsent(m.MaxOutputTokens)
	case intModelImageTokens:
		return orAbsent(m.ImageTokens)
	case intModelReasoning:
		switch {
		case !m.Known:
		case m.Reasoning:
			return 1
		default:
			return 0
		}
	}
	return -1
}

func orAbsent(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// member is one member of a JSON object, every occurrence kept.
type member struct {
	key string
	val json.RawMessage
}

// members reads v's members in order, repeats included; nil when v is not
// an object.
func members(v []byte) []member {
	dec := json.NewDecoder(bytes.NewReader(v))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var ms []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return ms
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return ms
		}
		ms = append(ms, member{t.(string), val})
	}
	return ms
}

// each calls f with every member of object v named key, in order.
func each(v []byte, key string, f func(json.RawMessage)) {
	for _, m := range members(v) {
		if m.key == key {
			f(m.val)
		}
	}
}

// items is v's items when it is an array.
func items(v []byte) []json.RawMessage {
	var a []json.RawMessage
	if len(v) == 0 || v[0] != '[' || json.Unmarshal(v, &a) != nil {
		return nil
	}
	return a
}

func eachItem(v []byte, key string, f func(json.RawMessage)) {
	each(v, key, func(a json.RawMessage) {
		for _, it := range items(a) {
			f(it)
		}
	})
}

func hasType(v []byte, types ...string) bool {
	found := false
	each(v, "type", func(t json.RawMessage) {
		s, ok := jsonString(t)
		for _, typ := range types {
			found = found || (ok && string(s) == typ)
		}
	})
	return found
}

func present(v []byte, key string) bool {
	found := false
	each(v, key, func(m json.RawMessage) { found = found || string(m) != "null" })
	return found
}

func stringLen(v []byte) int64 {
	s, _ := jsonString(v)
	return int64(len(s))
}

// boundReader reads BoundFacts as the gateway's parsers do
// (gateway/internal/openai.BoundFacts).
type boundReader struct{ b BoundFacts }

func (r *boundReader) image(part []byte, key string) {
	r.b.Images++
	each(part, key, func(v json.RawMessage) {
		r.b.PromptBytes -= stringLen(v)
		each(v, "url", func(u json.RawMessage) { r.b.PromptBytes -= stringLen(u) })
	})
}

// readBound reads the BoundFacts of body for endpoint.
func readBound(body []byte, endpoint string) BoundFacts {
	r := boundReader{BoundFacts{PromptBytes: int64(len(body)), Choices: 1}}
	switch endpoint {
	case "messages":
		r.messages(body)
	case "responses":
		r.responses(body)
	default:
		r.openai(body, endpoint)
	}
	return r.b
}

func (r *boundReader) openai(root []byte, endpoint string) {
	for _, key := range [...]string{"n", "best_of"} {
		each(root, key, func(v json.RawMessage) {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && n > r.b.Choices && n <= 1<<31-1 {
				r.b.Choices = n
			}
		})
	}
	if endpoint != "chat/completions" {
		return
	}
	eachItem(root, "messages", func(m json.RawMessage) {
		each(m, "audio", func(a json.RawMessage) {
			if string(a) != "null" {
				r.b.Unbounded++
			}
		})
		eachItem(m, "content", func(part json.RawMessage) {
			switch {
			case hasType(part, "image_url"):
				r.image(part, "image_url")
			case hasType(part, "file"):
				r.b.Unbounded++
			}
		})
	})
	eachItem(root, "tools", func(json.RawMessage) { r.b.Tools++ })
	eachItem(root, "functions", func(json.RawMessage) { r.b.Tools++ })
	if present(root, "web_search_options") {
		r.b.Unbounded++
	}
}

func (r *boundReader) messages(root []byte) {
	var blocks func(json.RawMessage)
	blocks = func(blk json.RawMessage) {
		switch {
		case hasType(blk, "image"):
			r.b.Images++
			each(blk, "source", func(src json.RawMessage) {
				each(src, "data", func(d json.RawMessage) { r.b.PromptBytes -= stringLen(d) })
				each(src, "url", func(u json.RawMessage) { r.b.PromptBytes -= stringLen(u) })
			})
		case hasType(blk, "document"):
			each(blk, "source", func(src json.RawMessage) {
				if !hasType(src, "text", "content") {
					r.b.Unbounded++
				}
			})
		case hasType(blk, "container_upload", "file"):
			r.b.Unbounded++
		case hasType(blk, "tool_result"):
			eachItem(blk, "content", blocks)
		}
	}
	eachItem(root, "system", blocks)
	eachItem(root, "messages", func(m json.RawMessage) { eachItem(m, "content", blocks) })
	eachItem(root, "tools", func(t json.RawMessage) {
		r.b.Tools++
		if !present(t, "type") || hasType(t, "custom") {
			return
		}
		r.builtin(t)
	})
	eachItem(root, "mcp_servers", func(json.RawMessage) { r.b.Unbounded++ })
}

func (r *boundReader) responses(root []byte) {
	parts := func(p json.RawMessage) {
		switch {
		case hasType(p, "input_image", "computer_screenshot"):
			r.image(p, "image_url")
		case hasType(p, "input_file"):
			r.b.Unbounded++
		}
	}
	eachItem(root, "input", func(it json.RawMessage) {
		if hasType(it, "item_reference") {
			r.b.Unbounded++
		}
		eachItem(it, "content", parts)
		each(it, "output", func(o json.RawMessage) {
			if len(o) > 0 && o[0] == '{' {
				parts(o)
			}
			for _, p := range items(o) {
				parts(p)
			}
		})
	})
	for _, key := range [...]string{"previous_response_id", "conversation", "prompt"} {
		if present(root, key) {
			r.b.Unbounded++
		}
	}
	eachItem(root, "tools", func(t json.RawMessage) {
		r.b.Tools++
		if !hasType(t, "function", "custom") {
			r.builtin(t)
		}
	})
}

// serverToolPrefixes start the types of tools the provider runs itself,
// adding what they find to the prompt.
var serverToolPrefixes = [...]string{"web_search", "web_fetch", "file_search", "code_execution", "code_interpreter", "mcp", "tool_search", "image_generation"}

// builtin counts tool t, defined by the provider: unbounded when it runs
// on the provider's side.
func (r *boundReader) builtin(t []byte) {
	server := false
	each(t, "type", func(v json.RawMessage) {
		s, ok := jsonString(v)
		for _, p := range serverToolPrefixes {
			server = server || (ok && bytes.HasPrefix(s, []byte(p)))
		}
	})
	if server {
		r.b.Unbounded++
	} else {
		r.b.BuiltinTools++
	}
}
