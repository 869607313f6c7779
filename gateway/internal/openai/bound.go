package openai

import (
	"bytes"

	"github.com/valyala/fastjson"
)

// BoundFacts are what an upper bound of a request's prompt tokens is
// computed from (sdk/wasmhost.PromptTokensBound). The argument: everything
// a provider tokenizes as text comes from the client's JSON body, every
// token is at least one byte of UTF-8 text, and JSON escaping only
// lengthens text, so the text's tokens are at most the body's bytes. What
// the body does not hold is added by the bound as counts: the chat
// template's tokens per message, the tool-use instructions a provider adds
// when tools are declared (and the schemas of built-in tools), and images,
// whose tokens do not depend on the length of their URL or data. Parts
// whose tokens the body cannot bound at all (a file by id or URL, a PDF, a
// stored conversation, server-side search results) are counted as
// Unbounded.
//
// Parts are found where the API puts them, visiting every occurrence of a
// repeated member (decoders disagree about which one counts).
type BoundFacts struct {
	// Bytes is the body's length minus the image payloads (the URL or
	// base64 data of each image part, unescaped), which are counted as
	// Images instead.
	Bytes int
	// Images counts image parts: image_url (chat), input_image
	// (Responses), image blocks (Messages API, in tool results too).
	Images int
	// Unbounded counts parts whose tokens the body cannot bound: files
	// (by id, URL or data), documents other than plain text, item
	// references, previous_response_id, conversation, a stored prompt,
	// MCP servers, and server-side tools that add what they find to the
	// prompt (web search, file search, web fetch, code execution, MCP).
	Unbounded int
	// Tools counts declared tools (tools and functions).
	Tools int
	// BuiltinTools counts, of Tools, those whose definition the provider
	// supplies (a type other than function or custom, such as Anthropic's
	// bash or text editor): their schemas are not in the body.
	BuiltinTools int
	// Choices is how many completions the reply holds: n (and best_of
	// for completions), at least 1.
	Choices int
}

// each calls f with every member of object v named key, in order.
// Types are checked before fastjson's accessors are called: their errors
// allocate, and the parsers that read BoundFacts do not.
func each(v *fastjson.Value, key string, f func(*fastjson.Value)) {
	if v.Type() != fastjson.TypeObject {
		return
	}
	o, _ := v.Object()
	o.Visit(func(k []byte, m *fastjson.Value) {
		if string(k) == key {
			f(m)
		}
	})
}

// eachItem calls f with the items of every member of v named key that is
// an array.
func eachItem(v *fastjson.Value, key string, f func(*fastjson.Value)) {
	each(v, key, func(a *fastjson.Value) {
		if a.Type() != fastjson.TypeArray {
			return
		}
		for _, it := range a.GetArray() {
			f(it)
		}
	})
}

// hasType reports whether object v has a "type" member equal to one of
// types.
func hasType(v *fastjson.Value, types ...string) bool {
	found := false
	each(v, "type", func(t *fastjson.Value) {
		if t.Type() != fastjson.TypeString {
			return
		}
		s, _ := t.StringBytes()
		for _, typ := range types {
			if string(s) == typ {
				found = true
			}
		}
	})
	return found
}

// present reports whether v has a member named key that is not null.
func present(v *fastjson.Value, key string) bool {
	found := false
	each(v, key, func(m *fastjson.Value) { found = found || m.Type() != fastjson.TypeNull })
	return found
}

// stringLen is the unescaped length of v when it is a string, else 0.
func stringLen(v *fastjson.Value) int {
	if v.Type() != fastjson.TypeString {
		return 0
	}
	s, _ := v.StringBytes()
	return len(s)
}

// image counts an image part and takes its payload out of Bytes: the
// string members named key (for image_url, also the url members of an
// object).
func (b *BoundFacts) image(part *fastjson.Value, key string) {
	b.Images++
	each(part, key, func(v *fastjson.Value) {
		b.Bytes -= stringLen(v)
		each(v, "url", func(u *fastjson.Value) { b.Bytes -= stringLen(u) })
	})
}

// readChoices sets Choices from n and best_of.
func (b *BoundFacts) readChoices(root *fastjson.Value) {
	b.Choices = 1
	for _, key := range [...]string{"n", "best_of"} {
		each(root, key, func(v *fastjson.Value) {
			if v.Type() != fastjson.TypeNumber {
				return
			}
			if n, err := v.Int64(); err == nil && n > int64(b.Choices) && n <= 1<<31-1 {
				b.Choices = int(n)
			}
		})
	}
}

// read fills b for a chat, completions or embeddings body (Bytes is set by
// the caller).
func (b *BoundFacts) read(ep Endpoint, root *fastjson.Value) {
	b.readChoices(root)
	if ep != ChatCompletions {
		return
	}
	eachItem(root, "messages", func(m *fastjson.Value) {
		each(m, "audio", func(a *fastjson.Value) {
			if a.Type() != fastjson.TypeNull {
				b.Unbounded++ // an earlier reply's audio, by id
			}
		})
		eachItem(m, "content", func(part *fastjson.Value) {
			switch {
			case hasType(part, "image_url"):
				b.image(part, "image_url")
			case hasType(part, "file"):
				b.Unbounded++
			}
		})
	})
	eachItem(root, "tools", func(*fastjson.Value) { b.Tools++ })
	eachItem(root, "functions", func(*fastjson.Value) { b.Tools++ })
	if present(root, "web_search_options") {
		b.Unbounded++
	}
}

// ReadMessages fills b for a Messages API body of n bytes.
func (b *BoundFacts) ReadMessages(n int, root *fastjson.Value) {
	*b = BoundFacts{Bytes: n, Choices: 1}
	var blocks func(v *fastjson.Value)
	blocks = func(blk *fastjson.Value) {
		switch {
		case hasType(blk, "image"):
			b.Images++
			each(blk, "source", func(src *fastjson.Value) {
				each(src, "data", func(d *fastjson.Value) { b.Bytes -= stringLen(d) })
				each(src, "url", func(u *fastjson.Value) { b.Bytes -= stringLen(u) })
			})
		case hasType(blk, "document"):
			// A plain-text document's text is in the body; a PDF or a
			// file by URL or id is not bounded by it.
			each(blk, "source", func(src *fastjson.Value) {
				if !hasType(src, "text", "content") {
					b.Unbounded++
				}
			})
		case hasType(blk, "container_upload", "file"):
			b.Unbounded++
		case hasType(blk, "tool_result"):
			eachItem(blk, "content", blocks)
		}
	}
	eachItem(root, "system", blocks)
	eachItem(root, "messages", func(m *fastjson.Value) { eachItem(m, "content", blocks) })
	eachItem(root, "tools", func(t *fastjson.Value) {
		b.Tools++
		if !present(t, "type") || hasType(t, "custom") {
			return
		}
		if serverTool(t) {
			b.Unbounded++
		} else {
			b.BuiltinTools++
		}
	})
	eachItem(root, "mcp_servers", func(*fastjson.Value) { b.Unbounded++ })
}

// ReadResponses fills b for a Responses API body of n bytes.
func (b *BoundFacts) ReadResponses(n int, root *fastjson.Value) {
	*b = BoundFacts{Bytes: n, Choices: 1}
	parts := func(p *fastjson.Value) {
		switch {
		case hasType(p, "input_image", "computer_screenshot"):
			b.image(p, "image_url")
		case hasType(p, "input_file"):
			b.Unbounded++
		}
	}
	eachItem(root, "input", func(it *fastjson.Value) {
		if hasType(it, "item_reference") {
			b.Unbounded++
		}
		eachItem(it, "content", parts)
		each(it, "output", func(o *fastjson.Value) {
			if o.Type() == fastjson.TypeObject {
				parts(o) // a computer call's screenshot
			}
			for _, p := range o.GetArray() {
				parts(p)
			}
		})
	})
	for _, key := range [...]string{"previous_response_id", "conversation", "prompt"} {
		if present(root, key) {
			b.Unbounded++
		}
	}
	eachItem(root, "tools", func(t *fastjson.Value) {
		b.Tools++
		if hasType(t, "function", "custom") {
			return
		}
		if serverTool(t) {
			b.Unbounded++
		} else {
			b.BuiltinTools++
		}
	})
}

// serverToolPrefixes start the types of tools the provider runs itself,
// adding what they find to the prompt: their tokens are not bounded by
// the body.
var serverToolPrefixes = [...]string{"web_search", "web_fetch", "file_search", "code_execution", "code_interpreter", "mcp", "tool_search", "image_generation"}

// serverTool reports whether tool t's type names a server-side tool.
func serverTool(t *fastjson.Value) bool {
	found := false
	each(t, "type", func(v *fastjson.Value) {
		if v.Type() != fastjson.TypeString {
			return
		}
		s, _ := v.StringBytes()
		for _, p := range serverToolPrefixes {
			if bytes.HasPrefix(s, []byte(p)) {
				found = true
			}
		}
	})
	return found
}
