package bedrock

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Roles of Converse turns.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// messages writes "messages" (the user, assistant and tool messages, merged
// into alternating turns as Converse requires) and then "system" (the
// system and developer messages' text, one block each).
func (w *requestWriter) messages(v *fastjson.Value) error {
	if isNull(v) {
		return openai.BadRequest("messages", "'messages' is a required property")
	}
	msgs, err := v.Array()
	if err != nil {
		return openai.BadRequest("messages", "'messages' must be an array")
	}
	if len(msgs) == 0 {
		return openai.BadRequest("messages", "'messages' must be a non-empty array")
	}
	roles := make([]string, len(msgs))
	for i, m := range msgs {
		if roles[i], err = roleOf(m, i); err != nil {
			return err
		}
	}
	w.out = append(w.out, `"messages":[`...)
	for i, m := range msgs {
		switch roles[i] {
		case "user":
			err = w.userMessage(m, i)
		case "assistant":
			err = w.assistantMessage(m, i)
		case "tool":
			err = w.toolMessage(m, i)
		}
		if err != nil {
			return err
		}
	}
	w.flush()
	if w.turns == 0 {
		return openai.BadRequest("messages", "'messages' must contain at least one user, assistant or tool message with content")
	}
	w.out = append(w.out, ']')
	return w.system(msgs, roles)
}

func roleOf(m *fastjson.Value, i int) (string, error) {
	if m.Type() != fastjson.TypeObject {
		return "", openai.BadRequest(fmt.Sprintf("messages[%d]", i), "'messages[%d]' must be an object", i)
	}
	role, ok := stringOf(m.Get("role"))
	if !ok {
		return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i), "'messages[%d].role' is a required property and must be a string", i)
	}
	switch r := string(role); r {
	case "system", "developer", "user", "assistant", "tool":
		return r, nil
	case "function":
		return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
			"'messages[%d].role': role \"function\" is deprecated and not supported for Bedrock models; use tool calls and role \"tool\"", i)
	default:
		return "", openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
			"'messages[%d].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"; got %q", i, role)
	}
}

// system writes the text of every system and developer message, wherever
// it stands, as "system" text blocks: Converse has one system prompt,
// before the conversation.
func (w *requestWriter) system(msgs []*fastjson.Value, roles []string) error {
	n := 0
	add := func(s []byte) {
		if len(s) == 0 {
			return
		}
		if n == 0 {
			w.out = append(w.out, `,"system":[`...)
		} else {
			w.out = append(w.out, ',')
		}
		w.out = append(w.out, `{"text":`...)
		w.out = openai.AppendJSONString(w.out, s)
		w.out = append(w.out, '}')
		n++
	}
	for i, m := range msgs {
		if roles[i] != "system" && roles[i] != "developer" {
			continue
		}
		c := m.Get("content")
		if s, ok := stringOf(c); ok {
			add(s)
			continue
		}
		if isNull(c) {
			continue
		}
		parts, err := c.Array()
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string or an array of text parts", i)
		}
		for j, part := range parts {
			text, err := textPart(part, i, j, "system messages may contain only text parts")
			if err != nil {
				return err
			}
			add(text)
		}
	}
	if n > 0 {
		w.out = append(w.out, ']')
	}
	return nil
}

// textPart returns the text of a {"type":"text"} part, or an error saying
// why part is not one (notText explains which parts are allowed).
func textPart(part *fastjson.Value, i, j int, notText string) ([]byte, error) {
	at := fmt.Sprintf("messages[%d].content[%d]", i, j)
	if part.Type() != fastjson.TypeObject {
		return nil, openai.BadRequest(at, "'%s' must be an object", at)
	}
	typ, _ := stringOf(part.Get("type"))
	if string(typ) != "text" {
		return nil, openai.BadRequest(at+".type", "'%s.type' is %q: %s", at, typ, notText)
	}
	text, ok := stringOf(part.Get("text"))
	if !ok {
		return nil, openai.BadRequest(at+".text", "'%s.text' must be a string", at)
	}
	return text, nil
}

// userMessage adds the text and image parts of a user message to the user
// turn.
func (w *requestWriter) userMessage(m *fastjson.Value, i int) error {
	c := m.Get("content")
	if isNull(c) {
		return nil
	}
	if s, ok := stringOf(c); ok {
		w.textBlock(roleUser, s)
		return nil
	}
	parts, err := c.Array()
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string, an array of content parts, or null", i)
	}
	for j, part := range parts {
		at := fmt.Sprintf("messages[%d].content[%d]", i, j)
		if part.Type() != fastjson.TypeObject {
			return openai.BadRequest(at, "'%s' must be an object", at)
		}
		typ, _ := stringOf(part.Get("type"))
		switch string(typ) {
		case "text":
			text, err := textPart(part, i, j, "")
			if err != nil {
				return err
			}
			w.textBlock(roleUser, text)
		case "image_url":
			if err := w.imageBlock(part.Get("image_url"), at+".image_url"); err != nil {
				return err
			}
		default:
			return openai.BadRequest(at+".type", "'%s.type' is %q: user messages to Bedrock models may contain \"text\" and \"image_url\" parts", at, typ)
		}
	}
	return nil
}

// textBlock adds a text block to the turn of role; empty text is dropped
// (Converse rejects blank text blocks).
func (w *requestWriter) textBlock(role string, text []byte) {
	if len(text) == 0 {
		return
	}
	w.blk = append(w.blk[:0], `{"text":`...)
	w.blk = openai.AppendJSONString(w.blk, text)
	w.blk = append(w.blk, '}')
	w.commit(role, false)
}

// imageFormats are the image types Converse accepts, by media type.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// imageBlock adds an image block for an image_url part's value
// ({"url":...,"detail":...} or, leniently, the URL string). Converse takes
// image bytes (or S3 locations), not URLs: only base64 data URLs can be
// sent.
func (w *requestWriter) imageBlock(v *fastjson.Value, at string) error {
	url, ok := stringOf(v)
	if !ok {
		if url, ok = stringOf(v.Get("url")); !ok {
			return openai.BadRequest(at+".url", "'%s.url' is a required property and must be a string", at)
		}
		at += ".url"
	}
	if !hasPrefixFold(url, "data:") {
		return openai.BadRequest(at, "'%s' must be a base64 data URL (data:image/png;base64,...): Bedrock models do not fetch image URLs", at)
	}
	comma := bytes.IndexByte(url, ',')
	if comma < 0 {
		return openai.BadRequest(at, "'%s' is a data URL without a comma", at)
	}
	params := strings.Split(string(url[len("data:"):comma]), ";")
	mediaType := strings.ToLower(strings.TrimSpace(params[0]))
	base64 := false
	for _, p := range params[1:] {
		base64 = base64 || strings.EqualFold(strings.TrimSpace(p), "base64")
	}
	if !base64 {
		return openai.BadRequest(at, "'%s' must be a base64 data URL (data:image/png;base64,...)", at)
	}
	format, known := imageFormats[mediaType]
	if !known {
		return openai.BadRequest(at, "'%s' has media type %q; Bedrock models accept image/png, image/jpeg, image/gif and image/webp", at, mediaType)
	}
	w.blk = append(w.blk[:0], `{"image":{"format":"`...)
	w.blk = append(w.blk, format...)
	w.blk = append(w.blk, `","source":{"bytes":`...)
	w.blk = openai.AppendJSONString(w.blk, url[comma+1:])
	w.blk = append(w.blk, "}}}"...)
	w.commit(roleUser, false)
	return nil
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// assistantMessage adds an assistant message's text (content parts of
// type text or refusal) and its tool calls to the assistant turn.
func (w *requestWriter) assistantMessage(m *fastjson.Value, i int) error {
	if !isNull(m.Get("function_call")) {
		return openai.BadRequest(fmt.Sprintf("messages[%d].function_call", i),
			"'messages[%d].function_call' is deprecated and not supported for Bedrock models; use 'tool_calls'", i)
	}
	c := m.Get("content")
	if s, ok := stringOf(c); ok {
		w.textBlock(roleAssistant, s)
	} else if !isNull(c) {
		parts, err := c.Array()
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string, an array of content parts, or null", i)
		}
		for j, part := range parts {
			at := fmt.Sprintf("messages[%d].content[%d]", i, j)
			if part.Type() != fastjson.TypeObject {
				return openai.BadRequest(at, "'%s' must be an object", at)
			}
			typ, _ := stringOf(part.Get("type"))
			field := string(typ)
			if field != "text" && field != "refusal" {
				return openai.BadRequest(at+".type", "'%s.type' is %q: assistant messages may contain \"text\" and \"refusal\" parts", at, typ)
			}
			text, ok := stringOf(part.Get(field))
			if !ok {
				return openai.BadRequest(at+"."+field, "'%s.%s' must be a string", at, field)
			}
			w.textBlock(roleAssistant, text)
		}
	}
	calls := m.Get("tool_calls")
	if isNull(calls) {
		return nil
	}
	a, err := calls.Array()
	if err != nil {
		return openai.BadRequest(fmt.Sprintf("messages[%d].tool_calls", i), "'messages[%d].tool_calls' must be an array", i)
	}
	for j, call := range a {
		if err := w.toolUseBlock(call, fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)); err != nil {
			return err
		}
	}
	return nil
}

// commit adds the block in blk to the turn of role, first ending the open
// turn if its role differs. Within a user turn toolResult blocks come
// first.
func (w *requestWriter) commit(role string, result bool) {
	if w.role != role {
		w.flush()
		w.role = role
	}
	buf := &w.blocks
	if result {
		buf = &w.results
	}
	if len(*buf) > 0 {
		*buf = append(*buf, ',')
	}
	*buf = append(*buf, w.blk...)
}

// flush writes the open turn, if it has blocks.
func (w *requestWriter) flush() {
	if len(w.results)+len(w.blocks) == 0 {
		return
	}
	if w.turns > 0 {
		w.out = append(w.out, ',')
	}
	w.out = append(w.out, `{"role":"`...)
	w.out = append(w.out, w.role...)
	w.out = append(w.out, `","content":[`...)
	w.out = append(w.out, w.results...)
	if len(w.results) > 0 && len(w.blocks) > 0 {
		w.out = append(w.out, ',')
	}
	w.out = append(w.out, w.blocks...)
	w.out = append(w.out, "]}"...)
	w.results, w.blocks = w.results[:0], w.blocks[:0]
	w.turns++
}
