package sdk

// PartKind is what a [MessagePart] holds.
type PartKind uint8

// The kinds of message parts (request_messages in ABI.md).
const (
	// PartText is text: a message's string content, or a text part of it
	// (a completions prompt or an embeddings input is a user message with
	// one text part).
	PartText PartKind = iota + 1
	// PartToolCall is a tool call the assistant made: Name is the tool,
	// Text its arguments (OpenAI function.arguments, decoded; Anthropic
	// tool_use input as raw JSON).
	PartToolCall
	// PartToolResult is what a tool returned: Name is the call's id
	// (tool_call_id, tool_use_id), Text the result's text.
	PartToolResult
)

var partKindNames = [...]string{PartText: "text", PartToolCall: "tool_call", PartToolResult: "tool_result"}

// String returns the kind as the ABI writes it ("text", "tool_call",
// "tool_result").
func (k PartKind) String() string {
	if int(k) < len(partKindNames) && partKindNames[k] != "" {
		return partKindNames[k]
	}
	return "PartKind(" + itoa(int64(k)) + ")"
}

// MessagePart is one part of a message of the request's conversation, as
// [Exchange.Messages] returns it. A message of several parts (text and
// images, text and tool calls) gives one MessagePart per part the host
// reads, all with the message's Index. The byte slices alias the SDK's
// buffer and must not be modified.
type MessagePart struct {
	// Index is the message's number in conversation order, from 0 (an
	// Anthropic top-level system prompt is message 0).
	Index int
	// Kind is what the part holds.
	Kind PartKind
	// Role is the message's role as sent ("system", "developer", "user",
	// "assistant", "tool"); a tool result is always "tool".
	Role []byte
	// Name is the tool's name for a PartToolCall, the call's id for a
	// PartToolResult, and empty for PartText.
	Name []byte
	// Text is the part's text, JSON-decoded.
	Text []byte
	// Record is the part's number in the conversation, from 0, across
	// messages: what [Request.SetMessageText] takes to replace Text.
	Record int
}

var messagesCache struct {
	call  uint64 // the callback whose records are in bytes
	bytes []byte
}

// messagesBuf backs Exchange.MessageRecords.
var messagesBuf buffer

// MessageRecords returns the request's conversation as the host renders it
// (request_messages in ABI.md): for each part, "INDEX KIND ROLE_LEN
// NAME_LEN TEXT_LEN\n", the role, the name, the text and "\n". The first
// call in a callback reads it from the host; later calls in the same
// callback return the same slice. The slice belongs to the SDK, must not be
// modified, and is valid until the callback returns. [Exchange.Messages]
// parses it. After a [Request.SetMessageText] the next call reads the
// records of the new body.
func (x *Exchange) MessageRecords() []byte {
	if messagesCache.call != x.call || x.call == 0 {
		b, n := messagesBuf.read(0, hostRequestMessages)
		if n < 0 {
			broken("request_messages", n)
		}
		messagesCache.bytes, messagesCache.call = b, x.call
	}
	return messagesCache.bytes
}

// Messages appends the parts of the request's messages to dst, in
// conversation order, and returns it: the texts, tool calls and tool
// results of chat and Anthropic messages (with a top-level system prompt),
// of completions prompts and of embeddings inputs, JSON-decoded, so a guard
// needs no JSON parser. The byte slices alias the SDK's buffer and are
// valid until the callback returns. Passing the previous callback's slice
// as dst[:0] makes it allocation-free.
func (x *Exchange) Messages(dst []MessagePart) []MessagePart {
	dst, ok := AppendMessageParts(dst, x.MessageRecords())
	if !ok {
		panic("sdk: request_messages: malformed value from the host")
	}
	return dst
}

// AppendMessageParts parses b, in the format of [Exchange.MessageRecords],
// and appends its parts to dst. It reports false, with the parts parsed
// before the error, when b is malformed (including an unknown kind). The
// slices alias b; each part's Record is its number in b.
func AppendMessageParts(dst []MessagePart, b []byte) ([]MessagePart, bool) {
	for record := 0; len(b) > 0; record++ {
		index, rest, ok := parseDecimal(b, ' ', false)
		if !ok {
			return dst, false
		}
		kind, rest, ok := parseKind(rest)
		if !ok {
			return dst, false
		}
		var lens [3]int
		for i := range lens {
			sep := byte(' ')
			if i == 2 {
				sep = '\n'
			}
			if lens[i], rest, ok = parseDecimal(rest, sep, false); !ok {
				return dst, false
			}
		}
		nr, nn, nt := lens[0], lens[1], lens[2]
		end := nr + nn + nt
		if end < 0 || end >= len(rest) || rest[end] != '\n' {
			return dst, false
		}
		dst = append(dst, MessagePart{Index: index, Kind: kind, Record: record,
			Role: rest[:nr:nr], Name: rest[nr : nr+nn : nr+nn], Text: rest[nr+nn : end : end]})
		b = rest[end+1:]
	}
	return dst, true
}

// parseKind reads a KIND and its space.
func parseKind(b []byte) (PartKind, []byte, bool) {
	for k := PartText; k <= PartToolResult; k++ {
		name := partKindNames[k]
		if len(b) > len(name) && string(b[:len(name)]) == name && b[len(name)] == ' ' {
			return k, b[len(name)+1:], true
		}
	}
	return 0, nil, false
}
