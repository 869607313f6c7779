package loadgen

import "bytes"

var (
	sseData      = []byte("data:")
	sseDone      = []byte("[DONE]")
	keyContent   = []byte(`"content":`)
	keyText      = []byte(`"text":`)
	crlfTrailing = "\r\n"
)

// sseLine classifies one line of an SSE stream.
type sseLine uint8

const (
	// lineOther is any line that is neither a content token nor [DONE].
	lineOther sseLine = iota
	// lineToken is a data line carrying a non-empty content or text delta.
	lineToken
	// lineDone is the terminating "data: [DONE]" line.
	lineDone
)

// classifyLine inspects one SSE line (with or without its line ending). It
// is deliberately cheap: no JSON decoding, only byte searches.
func classifyLine(line []byte) sseLine {
	if !bytes.HasPrefix(line, sseData) {
		return lineOther
	}
	payload := bytes.TrimRight(line[len(sseData):], crlfTrailing)
	payload = bytes.TrimLeft(payload, " ")
	if bytes.Equal(payload, sseDone) {
		return lineDone
	}
	if hasNonEmptyString(payload, keyContent) || hasNonEmptyString(payload, keyText) {
		return lineToken
	}
	return lineOther
}

// hasNonEmptyString reports whether payload contains key (e.g. `"content":`)
// followed by a JSON string that is not empty. `"content":""` (the role-only
// first chunk) and `"content":null` do not count.
func hasNonEmptyString(payload, key []byte) bool {
	for {
		i := bytes.Index(payload, key)
		if i < 0 {
			return false
		}
		rest := payload[i+len(key):]
		for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
			rest = rest[1:]
		}
		if len(rest) >= 2 && rest[0] == '"' && rest[1] != '"' {
			return true
		}
		payload = rest
	}
}
