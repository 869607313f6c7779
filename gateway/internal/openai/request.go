package openai

import (
	"bytes"
	"fmt"

	"github.com/valyala/fastjson"
)

// Endpoint identifies the OpenAI API a request body is sent to.
type Endpoint uint8

// The endpoints the gateway understands.
const (
	ChatCompletions Endpoint = iota + 1 // POST /v1/chat/completions
	Completions                         // POST /v1/completions
	Embeddings                          // POST /v1/embeddings
)

// String returns the endpoint's URL path, or "unknown".
func (e Endpoint) String() string {
	switch e {
	case ChatCompletions:
		return "/v1/chat/completions"
	case Completions:
		return "/v1/completions"
	case Embeddings:
		return "/v1/embeddings"
	}
	return "unknown"
}

// Request holds the facts the gateway reads from a client request body.
//
// Model borrows from the RequestParser that filled it and is valid until
// the next Parse on the same parser; copy it to keep it longer.
type Request struct {
	Model            []byte // the "model" string, JSON-unescaped; never empty after a successful Parse
	Stream           bool   // "stream" is true
	HasStreamOptions bool   // "stream_options" is present and an object
	IncludeUsage     bool   // stream_options.include_usage is true
	MaxTokens        int64  // max_completion_tokens if set, else max_tokens; 0 if neither is set
	HasMaxTokens     bool   // max_tokens or max_completion_tokens is set (non-null)

	// Messages counts chat messages; for completions the prompts (1 for a
	// string or a single token array, else the array length); for
	// embeddings the inputs, counted the same way.
	Messages int

	// PromptChars is the total length in bytes (after JSON unescaping) of
	// the text in chat message contents (string contents and "text" parts),
	// the prompt strings, or the input strings.
	PromptChars int

	// PromptTokens counts the tokens given directly as token arrays in
	// prompt or input (always 0 for chat).
	PromptTokens int

	// EstimatedPromptTokens is PromptChars/4 + PromptTokens, plus 4 per
	// message for chat, and at least 1. It is a cheap upper-bound-ish guess
	// for admission and budgets, not a tokenizer count.
	EstimatedPromptTokens int

	// Bound holds what an upper bound of the prompt's tokens is computed
	// from (see BoundFacts).
	Bound BoundFacts
}

// RequestParser validates request bodies and extracts a Request. It keeps
// a fastjson.Parser whose memory is reused across calls. It is not safe for
// concurrent use; keep one per goroutine or in a sync.Pool. The zero value
// is ready to use.
type RequestParser struct {
	p fastjson.Parser
}

const badJSONHint = "(HINT: This likely means you aren't using your HTTP library correctly. " +
	"The API expects a JSON payload, but what was sent was not valid JSON.)"

func badJSON(detail string) *Error {
	return BadRequest("", "We could not parse the JSON body of your request: %s. %s", detail, badJSONHint)
}

// topFields are the top-level members Parse looks at.
type topFields struct {
	model, messages, prompt, input *fastjson.Value
	stream, streamOptions          *fastjson.Value
	maxTokens, maxCompletionTokens *fastjson.Value
	// ambiguous is the first key that repeats one of the members above or
	// differs from one only in case; dup tells which of the two.
	ambiguous []byte
	dup       bool
}

// checkedMembers are the members the gateway decides on (route, allowlist,
// budget, rate limits). JSON decoders disagree about the rest of a body
// that names one of them twice: encoding/json and Python keep the last
// occurrence, gjson and simdjson's on-demand API the first, and
// encoding/json also matches keys case-insensitively ("MODEL", or "ſtream"
// with U+017F, which folds to "s"). The gateway and the upstream must read
// the same model and max_tokens, so a body that makes them differ is
// refused rather than guessed at.
var checkedMembers = [...][]byte{
	[]byte("model"), []byte("messages"), []byte("prompt"), []byte("input"),
	[]byte("stream"), []byte("stream_options"), []byte("max_tokens"), []byte("max_completion_tokens"),
}

// set records v as the member at *slot, noting a repeat.
func (f *topFields) set(slot **fastjson.Value, key []byte, v *fastjson.Value) {
	if *slot != nil && f.ambiguous == nil {
		f.ambiguous, f.dup = key, true
	}
	*slot = v
}

// checkFolded notes key when it equals a checked member under Unicode
// case folding (as encoding/json matches) without being that member.
func (f *topFields) checkFolded(key []byte) {
	if f.ambiguous != nil {
		return
	}
	for _, m := range checkedMembers {
		if bytes.EqualFold(key, m) {
			f.ambiguous = key
			return
		}
	}
}

func (f *topFields) ambiguousError() error { return ambiguousMember(f.ambiguous, f.dup) }

func ambiguousMember(key []byte, dup bool) *Error {
	if dup {
		return BadRequest(string(key), "the member %q appears more than once; send it once", key)
	}
	return BadRequest(string(key),
		"the member %q differs from a member the API reads only in case; member names are case-sensitive (send it in lower case, once)", key)
}

// CheckMembers refuses an object that names one of members (lower-case
// names, at most 64) twice, or under a name that differs from one only in
// case: decoders disagree about which occurrence counts (see
// checkedMembers), so the gateway and the upstream could read different
// values. It returns a 400 *Error whose Param is the offending key, or nil.
// A parser that reads members with fastjson's Get (the first occurrence)
// calls it first.
func CheckMembers(obj *fastjson.Object, members [][]byte) error {
	var seen uint64
	var bad []byte
	dup := false
	obj.Visit(func(key []byte, _ *fastjson.Value) {
		if bad != nil {
			return
		}
		for i, m := range members {
			if bytes.Equal(key, m) {
				if seen&(1<<i) != 0 {
					bad, dup = key, true
				}
				seen |= 1 << i
				return
			}
		}
		for _, m := range members {
			if bytes.EqualFold(key, m) {
				bad = key
				return
			}
		}
	})
	if bad != nil {
		return ambiguousMember(bad, dup)
	}
	return nil
}

// Parse validates body as a request for endpoint ep and fills r (r is reset
// first). It checks strict JSON syntax, that the body is an object, and the
// types of the members the gateway relies on; other members are not
// inspected and are forwarded as they are.
//
// Requirements: "model" is a non-empty string; for ChatCompletions
// "messages" is a non-empty array of objects, each with a string "role"
// and a "content" that is absent, null, a string, or an array of parts
// (objects; {"type":"text","text":"..."} parts count toward PromptChars);
// for Completions "prompt" and for Embeddings "input" is a string or a
// non-empty array of strings, of token numbers, or of token arrays.
// Optional: "stream" boolean, "stream_options" object whose
// "include_usage" is a boolean, "max_tokens" / "max_completion_tokens"
// non-negative integers. null counts as absent everywhere. None of these
// members may appear twice, or in another case (see checkedMembers).
//
// Errors are *Error with Status 400, type invalid_request_error, a Param
// naming the offending member (e.g. "messages[2].role") when there is one,
// and a message saying exactly what is wrong. Parse does not allocate on
// success once the parser has warmed up.
func (p *RequestParser) Parse(body []byte, ep Endpoint, r *Request) error {
	*r = Request{}
	if ep < ChatCompletions || ep > Embeddings {
		return Internal(fmt.Sprintf("openai: Parse called with unknown endpoint %d", ep))
	}
	if skipSpace(body, 0) == len(body) {
		return badJSON("the body is empty")
	}
	// Parse before Validate: the parser bounds nesting depth, the
	// validator (which rejects what the lenient parser accepts, such as
	// bad numbers, escapes and raw control characters) does not.
	root, err := p.p.ParseBytes(body)
	if err != nil {
		return badJSON(err.Error())
	}
	if err := ValidateJSON(body); err != nil {
		return badJSON(err.Error())
	}
	if root.Type() != fastjson.TypeObject {
		return BadRequest("", "the body must be a JSON object")
	}
	obj, _ := root.Object()
	var f topFields
	obj.Visit(func(key []byte, v *fastjson.Value) {
		switch string(key) {
		case "model":
			f.set(&f.model, key, v)
		case "messages":
			f.set(&f.messages, key, v)
		case "prompt":
			f.set(&f.prompt, key, v)
		case "input":
			f.set(&f.input, key, v)
		case "stream":
			f.set(&f.stream, key, v)
		case "stream_options":
			f.set(&f.streamOptions, key, v)
		case "max_tokens":
			f.set(&f.maxTokens, key, v)
		case "max_completion_tokens":
			f.set(&f.maxCompletionTokens, key, v)
		default:
			f.checkFolded(key)
		}
	})
	if f.ambiguous != nil {
		return f.ambiguousError()
	}

	if err := r.setModel(f.model); err != nil {
		return err
	}
	switch ep {
	case ChatCompletions:
		err = r.addMessages(f.messages)
	case Completions:
		err = r.addInputs(f.prompt, "prompt")
	case Embeddings:
		err = r.addInputs(f.input, "input")
	}
	if err != nil {
		return err
	}
	if err := r.setStream(f.stream, f.streamOptions); err != nil {
		return err
	}
	if err := r.setMaxTokens(f.maxTokens, "max_tokens"); err != nil {
		return err
	}
	if err := r.setMaxTokens(f.maxCompletionTokens, "max_completion_tokens"); err != nil {
		return err
	}

	r.Bound = BoundFacts{Bytes: len(body)}
	r.Bound.read(ep, root)
	est := r.PromptChars/4 + r.PromptTokens
	if ep == ChatCompletions {
		est += 4 * r.Messages
	}
	r.EstimatedPromptTokens = max(est, 1)
	return nil
}

func isNull(v *fastjson.Value) bool {
	return v == nil || v.Type() == fastjson.TypeNull
}

func (r *Request) setModel(v *fastjson.Value) error {
	if isNull(v) {
		return BadRequest("model", "'model' is a required property")
	}
	if v.Type() != fastjson.TypeString {
		return BadRequest("model", "'model' must be a string")
	}
	m, _ := v.StringBytes()
	if len(m) == 0 {
		return BadRequest("model", "'model' must be a non-empty string")
	}
	r.Model = m
	return nil
}

func (r *Request) setStream(stream, opts *fastjson.Value) error {
	if stream != nil {
		switch stream.Type() {
		case fastjson.TypeTrue:
			r.Stream = true
		case fastjson.TypeFalse, fastjson.TypeNull:
		default:
			return BadRequest("stream", "'stream' must be a boolean")
		}
	}
	if isNull(opts) {
		return nil
	}
	if opts.Type() != fastjson.TypeObject {
		return BadRequest("stream_options", "'stream_options' must be an object")
	}
	r.HasStreamOptions = true
	o, _ := opts.Object()
	var iu *fastjson.Value
	o.Visit(func(key []byte, v *fastjson.Value) {
		if string(key) == "include_usage" {
			iu = v
		}
	})
	if iu != nil {
		switch iu.Type() {
		case fastjson.TypeTrue:
			r.IncludeUsage = true
		case fastjson.TypeFalse, fastjson.TypeNull:
		default:
			return BadRequest("stream_options.include_usage", "'stream_options.include_usage' must be a boolean")
		}
	}
	return nil
}

// setMaxTokens applies max_tokens or max_completion_tokens; called in that
// order so that max_completion_tokens wins when both are set.
func (r *Request) setMaxTokens(v *fastjson.Value, name string) error {
	if isNull(v) {
		return nil
	}
	if v.Type() != fastjson.TypeNumber {
		return BadRequest(name, "'%s' must be a non-negative integer", name)
	}
	n, err := v.Int64()
	if err != nil || n < 0 {
		return BadRequest(name, "'%s' must be a non-negative integer", name)
	}
	r.MaxTokens, r.HasMaxTokens = n, true
	return nil
}

func (r *Request) addMessages(v *fastjson.Value) error {
	if isNull(v) {
		return BadRequest("messages", "'messages' is a required property")
	}
	if v.Type() != fastjson.TypeArray {
		return BadRequest("messages", "'messages' must be an array")
	}
	msgs, _ := v.Array()
	if len(msgs) == 0 {
		return BadRequest("messages", "'messages' must be a non-empty array")
	}
	for i, m := range msgs {
		if m.Type() != fastjson.TypeObject {
			return BadRequest(fmt.Sprintf("messages[%d]", i), "'messages[%d]' must be an object", i)
		}
		role := m.Get("role")
		if isNull(role) {
			return BadRequest(fmt.Sprintf("messages[%d].role", i), "'messages[%d].role' is a required property", i)
		}
		if role.Type() != fastjson.TypeString {
			return BadRequest(fmt.Sprintf("messages[%d].role", i), "'messages[%d].role' must be a string", i)
		}
		if err := r.addContent(m.Get("content"), i); err != nil {
			return err
		}
	}
	r.Messages = len(msgs)
	return nil
}

func (r *Request) addContent(c *fastjson.Value, i int) error {
	if isNull(c) {
		return nil
	}
	switch c.Type() {
	case fastjson.TypeString:
		s, _ := c.StringBytes()
		r.PromptChars += len(s)
		return nil
	case fastjson.TypeArray:
	default:
		return BadRequest(fmt.Sprintf("messages[%d].content", i),
			"'messages[%d].content' must be a string, an array of content parts, or null", i)
	}
	parts, _ := c.Array()
	for j, part := range parts {
		if part.Type() != fastjson.TypeObject {
			return BadRequest(fmt.Sprintf("messages[%d].content[%d]", i, j),
				"'messages[%d].content[%d]' must be an object", i, j)
		}
		typ := part.Get("type")
		if typ == nil || typ.Type() != fastjson.TypeString {
			continue
		}
		if t, _ := typ.StringBytes(); string(t) != "text" {
			continue
		}
		text := part.Get("text")
		if text == nil || text.Type() != fastjson.TypeString {
			return BadRequest(fmt.Sprintf("messages[%d].content[%d].text", i, j),
				"'messages[%d].content[%d].text' must be a string", i, j)
		}
		s, _ := text.StringBytes()
		r.PromptChars += len(s)
	}
	return nil
}

// addInputs handles "prompt" (completions) and "input" (embeddings): a
// string, or a non-empty array of strings, of token numbers (one token
// array), or of token arrays.
func (r *Request) addInputs(v *fastjson.Value, name string) error {
	if isNull(v) {
		return BadRequest(name, "'%s' is a required property", name)
	}
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		r.PromptChars += len(s)
		r.Messages = 1
		return nil
	case fastjson.TypeArray:
	default:
		return badInputs(name)
	}
	items, _ := v.Array()
	if len(items) == 0 {
		return BadRequest(name, "'%s' must not be an empty array", name)
	}
	switch items[0].Type() {
	case fastjson.TypeString:
		for _, it := range items {
			if it.Type() != fastjson.TypeString {
				return badInputs(name)
			}
			s, _ := it.StringBytes()
			r.PromptChars += len(s)
		}
		r.Messages = len(items)
	case fastjson.TypeNumber:
		if !allNumbers(items) {
			return badInputs(name)
		}
		r.PromptTokens += len(items)
		r.Messages = 1
	case fastjson.TypeArray:
		for _, it := range items {
			toks, err := it.Array()
			if err != nil || !allNumbers(toks) {
				return badInputs(name)
			}
			r.PromptTokens += len(toks)
		}
		r.Messages = len(items)
	default:
		return badInputs(name)
	}
	return nil
}

func badInputs(name string) *Error {
	return BadRequest(name, "'%s' must be a string, an array of strings, an array of tokens, or an array of token arrays", name)
}

func allNumbers(vs []*fastjson.Value) bool {
	for _, v := range vs {
		if v.Type() != fastjson.TypeNumber {
			return false
		}
	}
	return true
}
