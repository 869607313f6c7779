package wasmhost

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// RequestFacts are the facts a gateway reads from a request body before the
// request phase and hands to plugins through request_model and request_int:
// the model, stream, max_tokens, and the message and prompt counts. Tests
// and other hosts fill a Request from a body with ReadRequestFacts, so that
// a plugin sees what the gateway would show it; the gateway's own parsers
// (gateway/internal/openai, gateway/internal/anthropic) are checked against
// it on a corpus and by fuzzing.
type RequestFacts struct {
	Model     []byte // the "model" string, unescaped; nil when absent
	Stream    bool   // "stream" is true
	MaxTokens int64  // max_completion_tokens, else max_tokens; -1 when absent
	// Messages counts chat or Messages API turns; for completions the
	// prompts and for embeddings the inputs (1 for a string or a single
	// token array, else the array's length).
	Messages int64
	// PromptChars is the byte length of the prompt's text: string
	// contents and text parts (and, for the Messages API, the system
	// prompt and tool results), prompt or input strings.
	PromptChars int64
	// PromptTokens is the gateway's estimate of the prompt's tokens:
	// PromptChars/4, plus the tokens given as token arrays, plus 4 per
	// message for chat and the Messages API; at least 1.
	PromptTokens int64

	// Bound is what PromptTokensBound bounds the prompt's tokens with.
	Bound BoundFacts
}

// BoundFacts are what an upper bound of a request's prompt tokens is
// computed from (see PromptTokensBound for the argument).
type BoundFacts struct {
	// PromptBytes is the body's length minus the image payloads (the
	// unescaped URL or base64 data of each image part).
	PromptBytes int64
	// Images counts image parts: image_url (chat), input_image and
	// computer screenshots (Responses), image blocks (Messages API, in
	// tool results too).
	Images int64
	// Unbounded counts parts whose tokens the body cannot bound: files
	// (by id, URL or data), documents other than plain text, audio of an
	// earlier reply by id, item references, previous_response_id,
	// conversation, a stored prompt, MCP servers, and server-side tools
	// (web search, file search, web fetch, code execution, MCP).
	Unbounded int64
	// Tools counts declared tools; BuiltinTools those of them whose
	// definition the provider supplies (a type other than function or
	// custom), so their schemas are not in the body.
	Tools, BuiltinTools int64
	// Choices is how many completions a reply holds: n (and best_of for
	// completions), at least 1.
	Choices int64
}

// ReadRequestFacts reads the facts of body, a request for endpoint (the
// names request_endpoint returns: "chat/completions", "completions",
// "embeddings", "messages", "responses"). It reads a body the gateway
// accepts exactly as the gateway does; for one the gateway would refuse it
// reads what it can and never fails. ok is false when body is not a JSON object.
func ReadRequestFacts(body []byte, endpoint string) (f RequestFacts, ok bool) {
	f.MaxTokens = -1
	top, ok := object(body)
	if !ok {
		return f, false
	}
	f.Bound = readBound(body, endpoint)
	if s, ok := jsonString(top["model"]); ok {
		f.Model = s
	}
	f.Stream = bytes.Equal(top["stream"], []byte("true"))
	f.MaxTokens = maxTokens(top["max_tokens"], f.MaxTokens)
	var tokens int64
	switch endpoint {
	case "messages":
		f.PromptChars = anthropicTextChars(top["system"])
		var msgs []json.RawMessage
		if json.Unmarshal(top["messages"], &msgs) == nil {
			for _, m := range msgs {
				msg, _ := object(m)
				f.PromptChars += anthropicTextChars(msg["content"])
			}
			f.Messages = int64(len(msgs))
		}
		f.PromptTokens = max(f.PromptChars/4+4*f.Messages, 1)
		return f, true
	case "responses":
		f.MaxTokens = maxTokens(top["max_output_tokens"], -1)
		f.Messages, f.PromptChars = responsesFacts(top)
		f.PromptTokens = max(f.PromptChars/4+4*f.Messages, 1)
		return f, true
	case "completions":
		f.Messages, f.PromptChars, tokens = inputFacts(top["prompt"])
	case "embeddings":
		f.Messages, f.PromptChars, tokens = inputFacts(top["input"])
	default:
		f.Messages, f.PromptChars = chatFacts(top["messages"])
		tokens = 4 * f.Messages
	}
	f.MaxTokens = maxTokens(top["max_completion_tokens"], f.MaxTokens)
	f.PromptTokens = max(f.PromptChars/4+tokens, 1)
	return f, true
}

// maxTokens returns v as a non-negative integer, else prev.
func maxTokens(v json.RawMessage, prev int64) int64 {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return prev
	}
	return n
}

// chatFacts counts a chat request's messages and the bytes of their text.
func chatFacts(v json.RawMessage) (messages, chars int64) {
	var msgs []json.RawMessage
	if json.Unmarshal(v, &msgs) != nil {
		return 0, 0
	}
	for _, m := range msgs {
		msg, _ := object(m)
		if s, ok := jsonString(msg["content"]); ok {
			chars += int64(len(s))
			continue
		}
		var parts []json.RawMessage
		json.Unmarshal(msg["content"], &parts)
		for _, raw := range parts {
			p, _ := object(raw)
			if t, _ := jsonString(p["type"]); string(t) == "text" {
				s, _ := jsonString(p["text"])
				chars += int64(len(s))
			}
		}
	}
	return int64(len(msgs)), chars
}

// responsesFacts counts a Responses API request's messages (instructions,
// a string input, each input item) and the bytes of their text
// (instructions, a string input; of items their arguments, and the string
// or the text parts of their content and output).
func responsesFacts(top map[string]json.RawMessage) (messages, chars int64) {
	if s, ok := jsonString(top["instructions"]); ok {
		messages, chars = 1, int64(len(s))
	}
	if s, ok := jsonString(top["input"]); ok {
		return messages + 1, chars + int64(len(s))
	}
	var items []json.RawMessage
	if json.Unmarshal(top["input"], &items) != nil {
		return messages, chars
	}
	text := func(v json.RawMessage) int64 {
		if s, ok := jsonString(v); ok {
			return int64(len(s))
		}
		var parts []json.RawMessage
		json.Unmarshal(v, &parts)
		var n int64
		for _, raw := range parts {
			p, _ := object(raw)
			s, _ := jsonString(p["text"])
			n += int64(len(s))
		}
		return n
	}
	for _, raw := range items {
		it, _ := object(raw)
		s, _ := jsonString(it["arguments"])
		chars += int64(len(s)) + text(it["output"]) + text(it["content"])
	}
	return messages + int64(len(items)), chars
}

// inputFacts reads a completions prompt or an embeddings input: a string,
// or an array of strings, of token numbers, or of token arrays.
func inputFacts(v json.RawMessage) (messages, chars, tokens int64) {
	if s, ok := jsonString(v); ok {
		return 1, int64(len(s)), 0
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil || len(items) == 0 {
		return 0, 0, 0
	}
	switch items[0][0] {
	case '"':
		for _, it := range items {
			s, _ := jsonString(it)
			chars += int64(len(s))
		}
		return int64(len(items)), chars, 0
	case '[':
		for _, it := range items {
			var toks []json.RawMessage
			json.Unmarshal(it, &toks)
			tokens += int64(len(toks))
		}
		return int64(len(items)), 0, tokens
	}
	return 1, 0, int64(len(items))
}

// anthropicTextChars counts the text of a Messages API content or system
// value: a string, or the text blocks of an array and the text of its
// tool_result blocks' content.
func anthropicTextChars(v json.RawMessage) int64 {
	if s, ok := jsonString(v); ok {
		return int64(len(s))
	}
	var blocks []json.RawMessage
	if json.Unmarshal(v, &blocks) != nil {
		return 0
	}
	var n int64
	for _, raw := range blocks {
		b, _ := object(raw)
		switch t, _ := jsonString(b["type"]); string(t) {
		case "text":
			s, _ := jsonString(b["text"])
			n += int64(len(s))
		case "tool_result":
			if s, ok := jsonString(b["content"]); ok {
				n += int64(len(s))
				continue
			}
			var inner []json.RawMessage
			json.Unmarshal(b["content"], &inner)
			for _, raw := range inner {
				cb, _ := object(raw)
				if t, _ := jsonString(cb["type"]); string(t) == "text" {
					s, _ := jsonString(cb["text"])
					n += int64(len(s))
				}
			}
		}
	}
	return n
}

// object reads v's members, keeping the first occurrence of a repeated
// name as the gateway's parser does (encoding/json keeps the last).
func object(v []byte) (map[string]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(v))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, false
		}
		if k := t.(string); m[k] == nil {
			m[k] = val
		}
	}
	if _, err := dec.Token(); err != nil || dec.More() {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	return m, true
}

// jsonString unescapes v, a JSON string literal, as the gateway's parser
// does: escapes that encoding/json turns into U+FFFD (a lone surrogate, a
// high surrogate followed by an escape that is not a low one) are kept as
// the gateway keeps them, and invalid UTF-8 is kept as it is, so that the
// byte counts agree.
func jsonString(v json.RawMessage) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	s := v[1 : len(v)-1]
	n := bytes.IndexByte(s, '\\')
	if n < 0 {
		return s, true
	}
	b := append([]byte(nil), s[:n]...)
	s = s[n+1:]
	for len(s) > 0 {
		ch := s[0]
		s = s[1:]
		switch ch {
		case '"', '\\', '/':
			b = append(b, ch)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			b, s = appendUnicodeEscape(b, s)
		default:
			b = append(b, '\\', ch)
		}
		n = bytes.IndexByte(s, '\\')
		if n < 0 {
			b = append(b, s...)
			break
		}
		b = append(b, s[:n]...)
		s = s[n+1:]
	}
	return b, true
}

// appendUnicodeEscape decodes the escape \u + s[:4] (and a following \u
// escape for a surrogate pair) onto b and returns the rest of s.
func appendUnicodeEscape(b, s []byte) ([]byte, []byte) {
	x, ok := hex4(s)
	if !ok {
		return append(b, `\u`...), s
	}
	xs := s[:4]
	s = s[4:]
	if !utf16.IsSurrogate(rune(x)) {
		return utf8.AppendRune(b, rune(x)), s
	}
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return append(append(b, `\u`...), xs...), s
	}
	x1, ok := hex4(s[2:])
	if !ok {
		return append(append(b, `\u`...), xs...), s
	}
	return utf8.AppendRune(b, utf16.DecodeRune(rune(x), rune(x1))), s[6:]
}

func hex4(s []byte) (uint16, bool) {
	if len(s) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(s[:4]), 16, 16)
	return uint16(n), err == nil
}

// SetFacts sets r's inputs Model, Stream, MaxTokens, Messages, PromptChars,
// PromptTokens and Bound from f. Model is borrowed.
func (r *Request) SetFacts(f RequestFacts) {
	r.Model, r.Stream, r.MaxTokens = f.Model, f.Stream, f.MaxTokens
	r.Messages, r.PromptChars, r.PromptTokens = f.Messages, f.PromptChars, f.PromptTokens
	r.Bound = f.Bound
}
