package anthropic

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Roles of Anthropic turns.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// messages writes "system" (from system and developer messages) and
// "messages" (the other turns, merged so that roles alternate).
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
		if m.Type() != fastjson.TypeObject {
			return openai.BadRequest(fmt.Sprintf("messages[%d]", i), "'messages[%d]' must be an object", i)
		}
		role, ok := stringOf(m.Get("role"))
		if !ok {
			return openai.BadRequest(fmt.Sprintf("messages[%d].role", i), "'messages[%d].role' is a required property and must be a string", i)
		}
		switch r := string(role); r {
		case "system", "developer", "user", "assistant", "tool":
			roles[i] = r
		case "function":
			return openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
				"'messages[%d].role': role \"function\" is deprecated and not supported for Anthropic models; use tool calls and role \"tool\"", i)
		default:
			return openai.BadRequest(fmt.Sprintf("messages[%d].role", i),
				"'messages[%d].role' must be one of \"system\", \"developer\", \"user\", \"assistant\", \"tool\"; got %q", i, role)
		}
	}
	if err := w.system(msgs, roles); err != nil {
		return err
	}
	w.out = append(w.out, `,"messages":[`...)
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
	return nil
}

// system writes the text of every system and developer message, wherever
// it stands, joined by "\n", as the top-level "system" string: Anthropic
// has one system prompt, before the conversation.
func (w *requestWriter) system(msgs []*fastjson.Value, roles []string) error {
	n := 0
	add := func(s []byte) {
		if len(s) == 0 {
			return
		}
		if n == 0 {
			w.out = append(w.out, `,"system":"`...)
		} else {
			w.out = append(w.out, `\n`...)
		}
		w.out = openai.AppendJSONEscaped(w.out, s)
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
		w.out = append(w.out, '"')
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
			return openai.BadRequest(at+".type", "'%s.type' is %q: user messages to Anthropic models may contain \"text\" and \"image_url\" parts", at, typ)
		}
	}
	return nil
}

// textBlock adds a text block to the turn of role; empty text is dropped
// (Anthropic rejects empty text blocks).
func (w *requestWriter) textBlock(role string, text []byte) {
	if len(text) == 0 {
		return
	}
	w.blk = append(w.blk[:0], `{"type":"text","text":`...)
	w.blk = openai.AppendJSONString(w.blk, text)
	w.blk = append(w.blk, '}')
	w.commit(role, false)
}

// imageMediaTypes are the image types Anthropic accepts.
var imageMediaTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// imageBlock adds an image block for an image_url part's value
// ({"url":...,"detail":...} or, leniently, the URL string): a base64 data
// URL becomes a base64 source, an http(s) URL a url source.
func (w *requestWriter) imageBlock(v *fastjson.Value, at string) error {
	url, ok := stringOf(v)
	if !ok {
		if url, ok = stringOf(v.Get("url")); !ok {
			return openai.BadRequest(at+".url", "'%s.url' is a required property and must be a string", at)
		}
		at += ".url"
	}
	w.blk = append(w.blk[:0], `{"type":"image","source":`...)
	switch {
	case hasPrefixFold(url, "data:"):
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
		known := false
		for _, t := range imageMediaTypes {
			known = known || t == mediaType
		}
		if !known {
			return openai.BadRequest(at, "'%s' has media type %q; Anthropic models accept %s", at, mediaType, strings.Join(imageMediaTypes, ", "))
		}
		w.blk = append(w.blk, `{"type":"base64","media_type":`...)
		w.blk = openai.AppendJSONString(w.blk, mediaType)
		w.blk = append(w.blk, `,"data":`...)
		w.blk = openai.AppendJSONString(w.blk, url[comma+1:])
	case hasPrefixFold(url, "https://") || hasPrefixFold(url, "http://"):
		w.blk = append(w.blk, `{"type":"url","url":`...)
		w.blk = openai.AppendJSONString(w.blk, url)
	default:
		return openai.BadRequest(at, "'%s' must be an http(s) URL or a base64 data URL", at)
	}
	w.blk = append(w.blk, "}}"...)
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
			"'messages[%d].function_call' is deprecated and not supported for Anthropic models; use 'tool_calls'", i)
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

// toolUseBlock adds a tool_use block for one assistant tool call; its
// arguments (a JSON string) become the block's input object.
func (w *requestWriter) toolUseBlock(call *fastjson.Value, at string) error {
	if call.Type() != fastjson.TypeObject {
		return openai.BadRequest(at, "'%s' must be an object", at)
	}
	if typ, ok := stringOf(call.Get("type")); (ok && string(typ) != "function") || (!ok && !isNull(call.Get("type"))) {
		return openai.BadRequest(at+".type", "'%s.type' must be \"function\"", at)
	}
	id, ok := stringOf(call.Get("id"))
	if !ok || len(id) == 0 {
		return openai.BadRequest(at+".id", "'%s.id' is a required property and must be a non-empty string", at)
	}
	fn := call.Get("function")
	name, ok := stringOf(fn.Get("name"))
	if !ok || len(name) == 0 {
		return openai.BadRequest(at+".function.name", "'%s.function.name' is a required property and must be a non-empty string", at)
	}
	args, ok := stringOf(fn.Get("arguments"))
	if !ok && !isNull(fn.Get("arguments")) {
		return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' must be a string of JSON", at)
	}
	w.blk = append(w.blk[:0], `{"type":"tool_use","id":`...)
	w.blk = openai.AppendJSONString(w.blk, id)
	w.blk = append(w.blk, `,"name":`...)
	w.blk = openai.AppendJSONString(w.blk, name)
	w.blk = append(w.blk, `,"input":`...)
	if len(bytes.TrimSpace(args)) == 0 {
		w.blk = append(w.blk, "{}"...)
	} else {
		input, err := w.args.ParseBytes(args)
		if err == nil {
			err = openai.ValidateJSON(args)
		}
		if err != nil {
			return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' is not valid JSON: %v", at, err)
		}
		if input.Type() != fastjson.TypeObject {
			return openai.BadRequest(at+".function.arguments", "'%s.function.arguments' must be a JSON object, not %s", at, input.Type())
		}
		w.blk = appendValue(w.blk, input)
	}
	w.blk = append(w.blk, '}')
	w.commit(roleAssistant, false)
	return nil
}

// toolMessage adds a tool_result block to the user turn.
func (w *requestWriter) toolMessage(m *fastjson.Value, i int) error {
	id, ok := stringOf(m.Get("tool_call_id"))
	if !ok || len(id) == 0 {
		return openai.BadRequest(fmt.Sprintf("messages[%d].tool_call_id", i),
			"'messages[%d].tool_call_id' is a required property and must be a non-empty string", i)
	}
	w.blk = append(w.blk[:0], `{"type":"tool_result","tool_use_id":`...)
	w.blk = openai.AppendJSONString(w.blk, id)
	c := m.Get("content")
	if s, ok := stringOf(c); ok {
		if len(s) > 0 {
			w.blk = append(w.blk, `,"content":`...)
			w.blk = openai.AppendJSONString(w.blk, s)
		}
	} else if !isNull(c) {
		parts, err := c.Array()
		if err != nil {
			return openai.BadRequest(fmt.Sprintf("messages[%d].content", i), "'messages[%d].content' must be a string or an array of text parts", i)
		}
		n := 0
		for j, part := range parts {
			text, err := textPart(part, i, j, "tool messages may contain only text parts")
			if err != nil {
				return err
			}
			if len(text) == 0 {
				continue
			}
			if n == 0 {
				w.blk = append(w.blk, `,"content":[`...)
			} else {
				w.blk = append(w.blk, ',')
			}
			w.blk = append(w.blk, `{"type":"text","text":`...)
			w.blk = openai.AppendJSONString(w.blk, text)
			w.blk = append(w.blk, '}')
			n++
		}
		if n > 0 {
			w.blk = append(w.blk, ']')
		}
	}
	w.blk = append(w.blk, '}')
	w.commit(roleUser, true)
	return nil
}

// commit adds the block in blk to the turn of role, first ending the open
// turn if its role differs. Within a user turn tool_result blocks come
// first, as Anthropic requires.
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
