package sdk

// ToolCallDelta is one element of a streamed event's delta.tool_calls, as
// [Chunk.ToolCallDeltas] returns it. Only a call's first delta usually
// carries its name; its arguments arrive in fragments over several events,
// to be concatenated per Index.
type ToolCallDelta struct {
	// Index is the call's index among the reply's tool calls (0 when the
	// upstream sent none).
	Index int
	// Name is function.name, JSON-decoded; empty when absent.
	Name []byte
	// Arguments is this event's fragment of function.arguments,
	// JSON-decoded (the text the fragments make up together is usually a
	// JSON document itself); empty when absent.
	Arguments []byte
}

var toolCallsCache struct {
	call  uint64 // the callback whose deltas are in bytes
	bytes []byte
}

// toolCallsBuf backs Chunk.ToolCalls.
var toolCallsBuf buffer

// ToolCalls returns the event's tool-call deltas as the host renders them
// (chunk_tool_calls in ABI.md): for each delta, "INDEX NAME_LEN ARGS_LEN\n",
// the name, the arguments fragment and "\n". It is nil, without a host
// call, when the event carries no tool-call deltas ([Chunk.HasToolCalls]).
// The slice belongs to the SDK, must not be modified, and is valid until
// the callback returns. [Chunk.ToolCallDeltas] parses it.
func (c *Chunk) ToolCalls() []byte {
	if !c.HasToolCalls() {
		return nil
	}
	if toolCallsCache.call != c.call || c.call == 0 {
		b, n := toolCallsBuf.read(0, hostChunkToolCalls)
		if n < 0 {
			broken("chunk_tool_calls", n)
		}
		toolCallsCache.bytes, toolCallsCache.call = b, c.call
	}
	return toolCallsCache.bytes
}

// ToolCallDeltas appends the event's tool-call deltas to dst and returns
// it; dst is returned unchanged for an event without any. The byte slices
// alias the SDK's buffer and are valid until the callback returns. Passing
// the previous callback's slice as dst[:0] makes it allocation-free.
func (c *Chunk) ToolCallDeltas(dst []ToolCallDelta) []ToolCallDelta {
	dst, ok := AppendToolCallDeltas(dst, c.ToolCalls())
	if !ok {
		panic("sdk: chunk_tool_calls: malformed value from the host")
	}
	return dst
}

// AppendToolCallDeltas parses b, in the format of [Chunk.ToolCalls], and
// appends its deltas to dst. It reports false, with the deltas parsed
// before the error, when b is malformed. The slices alias b.
func AppendToolCallDeltas(dst []ToolCallDelta, b []byte) ([]ToolCallDelta, bool) {
	for len(b) > 0 {
		var nums [3]int
		for i := range nums {
			sep := byte(' ')
			if i == 2 {
				sep = '\n'
			}
			v, rest, ok := parseDecimal(b, sep, i == 0)
			if !ok {
				return dst, false
			}
			nums[i], b = v, rest
		}
		nn, na := nums[1], nums[2]
		if nn < 0 || na < 0 || nn+na+1 > len(b) || b[nn+na] != '\n' {
			return dst, false
		}
		dst = append(dst, ToolCallDelta{Index: nums[0], Name: b[:nn:nn], Arguments: b[nn : nn+na : nn+na]})
		b = b[nn+na+1:]
	}
	return dst, true
}

// parseDecimal reads a decimal integer (signed if signed), written as
// strconv.AppendInt writes it, ending at sep, and returns it and what
// follows sep.
func parseDecimal(b []byte, sep byte, signed bool) (int, []byte, bool) {
	neg := false
	if signed && len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	v, i := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 10 {
			return 0, nil, false
		}
		v = v*10 + int(b[i]-'0')
	}
	if i == 0 || i >= len(b) || b[i] != sep || i > 1 && b[0] == '0' || neg && v == 0 {
		return 0, nil, false // no digits, no separator, not canonical
	}
	if neg {
		v = -v
	}
	return v, b[i+1:], true
}
