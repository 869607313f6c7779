package anthropic

import (
	"fmt"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// RequestParser reads the facts the gateway needs from a native Messages
// API request body (POST /v1/messages, passed through untranslated) into an
// openai.Request, so that routing, guards and accounting treat it like a
// chat request. It reuses its memory and does not allocate once warmed up;
// it is not safe for concurrent use. The zero value is ready to use.
type RequestParser struct {
	p fastjson.Parser
}

// nativeMembers are the members Parse reads: the route, allowlist, budget
// and guards decide on them.
var nativeMembers = [][]byte{[]byte("model"), []byte("max_tokens"), []byte("stream"), []byte("messages"), []byte("system")}

// Parse validates body and fills r (reset first):
//
//   - Model: "model", a non-empty string (required).
//   - Stream: "stream" is true. IncludeUsage is set with it: a Messages
//     API stream always reports usage, so there is no usage event to keep
//     from the client.
//   - MaxTokens, HasMaxTokens: "max_tokens", a non-negative integer when
//     present (Anthropic requires it; a body without it is left for the
//     upstream to refuse).
//   - Messages: the number of turns in "messages", a non-empty array of
//     objects with a string "role".
//   - PromptChars: the text of "system" (a string or text blocks), of
//     string contents, of text blocks and of tool_result contents.
//   - EstimatedPromptTokens: PromptChars/4 + 4 per turn, at least 1.
//   - Bound: what bounds the prompt's tokens (openai.BoundFacts).
//
// Other members are not inspected: the body goes upstream as sent. Errors
// are *openai.Error with Status 400 and a Param naming the member; the
// caller renders them in Anthropic's error format. A body naming one of
// these members twice, or in another case, is refused (see
// openai.CheckMembers).
func (p *RequestParser) Parse(body []byte, r *openai.Request) error {
	*r = openai.Request{}
	root, err := p.p.ParseBytes(body)
	if err == nil {
		err = openai.ValidateJSON(body)
	}
	if err != nil {
		return openai.BadRequest("", "The request body is not valid JSON: %s.", err.Error())
	}
	if root.Type() != fastjson.TypeObject {
		return openai.BadRequest("", "The request body must be a JSON object.")
	}
	// Get reads a member's first occurrence, Anthropic's API another
	// decoder's choice: a body naming one twice (or in another case) is
	// refused rather than read two ways.
	obj, _ := root.Object()
	if err := openai.CheckMembers(obj, nativeMembers); err != nil {
		return err
	}
	model, ok := stringOf(root.Get("model"))
	if !ok || len(model) == 0 {
		return openai.BadRequest("model", "model: Field required (a non-empty string).")
	}
	r.Model = model
	switch v := root.Get("stream"); {
	case isNull(v), v.Type() == fastjson.TypeFalse:
	case v.Type() == fastjson.TypeTrue:
		r.Stream, r.IncludeUsage = true, true
	default:
		return openai.BadRequest("stream", "stream: Input should be a valid boolean.")
	}
	if v := root.Get("max_tokens"); !isNull(v) {
		n, err := v.Int64()
		if v.Type() != fastjson.TypeNumber || err != nil || n < 0 {
			return openai.BadRequest("max_tokens", "max_tokens: Input should be a non-negative integer.")
		}
		r.MaxTokens, r.HasMaxTokens = n, true
	}
	chars, err := textChars(root.Get("system"))
	if err != nil {
		return openai.BadRequest("system", "system: %s", err)
	}
	r.PromptChars = chars
	if err := addTurns(r, root.Get("messages")); err != nil {
		return err
	}
	r.EstimatedPromptTokens = max(r.PromptChars/4+4*r.Messages, 1)
	r.Bound.ReadMessages(len(body), root)
	return nil
}

func addTurns(r *openai.Request, v *fastjson.Value) error {
	if isNull(v) {
		return openai.BadRequest("messages", "messages: Field required.")
	}
	msgs, err := v.Array()
	if err != nil {
		return openai.BadRequest("messages", "messages: Input should be a valid list.")
	}
	if len(msgs) == 0 {
		return openai.BadRequest("messages", "messages: at least one message is required.")
	}
	for i, m := range msgs {
		if m.Type() != fastjson.TypeObject {
			return openai.BadRequest(fmt.Sprintf("messages.%d", i), "messages.%d: Input should be an object.", i)
		}
		if _, ok := stringOf(m.Get("role")); !ok {
			return openai.BadRequest(fmt.Sprintf("messages.%d.role", i), "messages.%d.role: Field required (a string).", i)
		}
		n, err := textChars(m.Get("content"))
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages.%d.content", i), "messages.%d.content: %s", i, err)
		}
		r.PromptChars += n
	}
	r.Messages = len(msgs)
	return nil
}

// errNotContent is textChars' complaint about a content of the wrong type.
var errNotContent = errorString("Input should be a string or a list of content blocks.")

type errorString string

func (e errorString) Error() string { return string(e) }

// textChars counts the text of a content (or system) value: a string, or
// an array of blocks whose "text" blocks, and tool_result blocks' own
// content, count. Absent or null counts 0.
func textChars(v *fastjson.Value) (int, error) {
	if isNull(v) {
		return 0, nil
	}
	switch v.Type() {
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return len(s), nil
	case fastjson.TypeArray:
	default:
		return 0, errNotContent
	}
	blocks, _ := v.Array()
	n := 0
	for _, b := range blocks {
		if b.Type() != fastjson.TypeObject {
			return 0, errorString("each content block must be an object.")
		}
		typ, _ := stringOf(b.Get("type"))
		switch string(typ) {
		case "text":
			s, ok := stringOf(b.Get("text"))
			if !ok {
				return 0, errorString("a text block's text must be a string.")
			}
			n += len(s)
		case "tool_result":
			// Its content is a string or blocks; nested tool results
			// do not exist, so this recursion is one level deep.
			if c := b.Get("content"); c != nil && c.Type() == fastjson.TypeString {
				s, _ := c.StringBytes()
				n += len(s)
			} else if c != nil && c.Type() == fastjson.TypeArray {
				for _, cb := range c.GetArray() {
					if t, _ := stringOf(cb.Get("type")); string(t) == "text" {
						s, _ := stringOf(cb.Get("text"))
						n += len(s)
					}
				}
			}
		}
	}
	return n, nil
}

// AppendMessageWithText appends message, a non-streamed Messages API
// reply, with its text replaced: every text block goes, and one text block
// holding text stands where the first one stood (first, when there was
// none). Other blocks (tool_use, thinking, ...) and members are kept;
// stop_reason is set to stopReason unless that is "". It is for replies a
// guard changed, so it favours simplicity over speed. The result is
// compact JSON; on error dst is returned unchanged.
func AppendMessageWithText(dst, message, text []byte, stopReason string) ([]byte, error) {
	var p fastjson.Parser
	root, err := p.ParseBytes(message)
	if err == nil {
		err = openai.ValidateJSON(message)
	}
	if err != nil {
		return dst, err
	}
	obj, err := root.Object()
	if err != nil {
		return dst, err
	}
	out := append(dst, '{')
	first, sawStop := true, false
	member := func(key []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = openai.AppendJSONString(out, key)
		out = append(out, ':')
	}
	obj.Visit(func(key []byte, v *fastjson.Value) {
		member(key)
		switch string(key) {
		case "content":
			out = appendContentWithText(out, v, text)
		case "stop_reason":
			sawStop = true
			if stopReason != "" {
				out = openai.AppendJSONString(out, stopReason)
			} else {
				out = appendValue(out, v)
			}
		default:
			out = appendValue(out, v)
		}
	})
	if !sawStop && stopReason != "" {
		member([]byte("stop_reason"))
		out = openai.AppendJSONString(out, stopReason)
	}
	return append(out, '}'), nil
}

func appendContentWithText(dst []byte, content *fastjson.Value, text []byte) []byte {
	textBlock := func(dst []byte) []byte {
		dst = append(dst, `{"type":"text","text":`...)
		dst = openai.AppendJSONString(dst, text)
		return append(dst, '}')
	}
	dst = append(dst, '[')
	start := len(dst)
	blocks, _ := content.Array()
	placed, n := false, 0
	for _, b := range blocks {
		if typ, _ := stringOf(b.Get("type")); string(typ) == "text" {
			if placed {
				continue
			}
			placed = true
			if n > 0 {
				dst = append(dst, ',')
			}
			dst, n = textBlock(dst), n+1
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst, n = appendValue(dst, b), n+1
	}
	if !placed {
		if n > 0 {
			// No text block: the text goes first, before the others.
			rest := append([]byte(nil), dst[start:]...)
			dst = textBlock(dst[:start])
			dst = append(append(dst, ','), rest...)
		} else {
			dst = textBlock(dst)
		}
	}
	return append(dst, ']')
}
