package main

import (
	"bytes"
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/plugins/pii/detect"
)

// template is a placeholder format: literal text with {KIND} (the kind's
// label, "EMAIL") and {N} (its number in the request, from 1), each once,
// starting with literal text so that a reply scanner can find candidates
// by their first byte.
type template struct {
	prefix, mid, suffix string
	kindFirst           bool // {KIND} comes before {N}
}

func parseTemplate(s string) (template, error) {
	bad := func(why string) (template, error) {
		return template{}, errors.New(`"placeholder" ` + strconv.Quote(s) + " " + why)
	}
	if len(s) > maxPlaceholder {
		return bad("is longer than 64 bytes")
	}
	k, n := strings.Index(s, "{KIND}"), strings.Index(s, "{N}")
	switch {
	case k < 0 || n < 0:
		return bad("must contain {KIND} and {N}, as in " + defaultPlaceholder)
	case strings.Count(s, "{KIND}") != 1 || strings.Count(s, "{N}") != 1:
		return bad("must contain {KIND} and {N} once each")
	case min(k, n) == 0:
		return bad("must start with literal text, as in " + defaultPlaceholder)
	case k < n && n == k+len("{KIND}"), n < k && k == n+len("{N}"):
		return bad("must separate {KIND} and {N}")
	}
	t := template{kindFirst: k < n}
	first, second := k, n
	firstLen, secondLen := len("{KIND}"), len("{N}")
	if !t.kindFirst {
		first, second, firstLen, secondLen = n, k, len("{N}"), len("{KIND}")
	}
	t.prefix, t.mid, t.suffix = s[:first], s[first+firstLen:second], s[second+secondLen:]
	if t.kindFirst && t.suffix == "" || !t.kindFirst && t.mid == "" {
		// [EMAIL_1 would be a prefix of [EMAIL_12: restoring could not
		// tell where a placeholder ends.
		return bad("must have literal text after {N}")
	}
	if c := t.after(); isDigitByte(c) {
		return bad("must not have a digit right after {N}")
	}
	return t, nil
}

// after is the first byte after {N}.
func (t template) after() byte {
	if t.kindFirst {
		return t.suffix[0]
	}
	return t.mid[0]
}

func isDigitByte(c byte) bool { return '0' <= c && c <= '9' }

// appendTo appends the placeholder of the n-th finding of kind.
func (t template) appendTo(dst []byte, kind detect.Kind, n int) []byte {
	dst = append(dst, t.prefix...)
	if t.kindFirst {
		dst = append(dst, kind.Label()...)
		dst = append(dst, t.mid...)
		dst = strconv.AppendInt(dst, int64(n), 10)
	} else {
		dst = strconv.AppendInt(dst, int64(n), 10)
		dst = append(dst, t.mid...)
		dst = append(dst, kind.Label()...)
	}
	return append(dst, t.suffix...)
}

// entry is one original and its placeholder's number.
type entry struct {
	kind     detect.Kind
	n        int
	original []byte
}

// mapping is a request's placeholders: the same original of the same kind
// always gets the same placeholder, numbered per label from 1. It is the
// plugin's per-request state (see encode).
type mapping struct {
	entries []entry
	// taken reports whether a placeholder already occurs in the request
	// as the client sent it: such a number is skipped, so that restoring
	// does not turn the client's own text into someone's data.
	taken func(placeholder []byte) bool
	buf   []byte
}

// labelKind is the kind a kind is numbered with: both IP versions share
// the label IP and so its numbers.
func labelKind(k detect.Kind) detect.Kind {
	if k == detect.IPv6 {
		return detect.IPv4
	}
	return k
}

// placeholderFor returns the number of original's placeholder, adding an
// entry for a new original.
func (m *mapping) placeholderFor(t template, kind detect.Kind, original []byte) entry {
	lk := labelKind(kind)
	last := 0
	for _, e := range m.entries {
		if labelKind(e.kind) != lk {
			continue
		}
		if e.kind == kind && bytes.Equal(e.original, original) {
			return e
		}
		last = max(last, e.n)
	}
	n := last + 1
	for m.taken != nil && m.taken(t.appendTo(m.buf[:0], kind, n)) {
		n++
	}
	e := entry{kind: kind, n: n, original: bytes.Clone(original)}
	m.entries = append(m.entries, e)
	return e
}

// redact appends text to dst with each span replaced by its placeholder.
func (m *mapping) redact(dst []byte, t template, text []byte, spans []detect.Span) []byte {
	return m.redactIn(dst, t, text, spans, false)
}

// redactJSON is redact for text that is JSON (a tool call's arguments): a
// finding outside a JSON string — a card number written as a number —
// becomes a quoted placeholder, so the arguments stay JSON.
func (m *mapping) redactJSON(dst []byte, t template, text []byte, spans []detect.Span) []byte {
	return m.redactIn(dst, t, text, spans, true)
}

func (m *mapping) redactIn(dst []byte, t template, text []byte, spans []detect.Span, json bool) []byte {
	at := 0
	inString, escaped := false, false
	for _, sp := range spans {
		if json {
			for i := at; i < sp.Start; i++ {
				switch c := text[i]; {
				case escaped:
					escaped = false
				case c == '\\' && inString:
					escaped = true
				case c == '"':
					inString = !inString
				}
			}
		}
		quote := json && !inString
		pre := text[at:sp.Start]
		if quote && len(pre) > 0 && pre[len(pre)-1] == '-' {
			pre = pre[:len(pre)-1] // a negative number: the sign goes with it
		}
		dst = append(dst, pre...)
		e := m.placeholderFor(t, sp.Kind, text[sp.Start:sp.End])
		if quote {
			dst = append(dst, '"')
		}
		dst = t.appendTo(dst, e.kind, e.n)
		if quote {
			dst = append(dst, '"')
		}
		at = sp.End
	}
	return append(dst, text[at:]...)
}

// The state's encoding: a version byte, the number of entries, each entry
// (kind, number, original's length and bytes), then the held text of a
// streamed reply. Numbers are unsigned varints. An empty state is a
// request with no entries and nothing held.
const stateVersion = 1

var errBadState = errors.New("pii: the request state is corrupt")

// encodeState appends the state to dst.
func encodeState(dst []byte, entries []entry, held []byte) []byte {
	if len(entries) == 0 && len(held) == 0 {
		return dst
	}
	dst = append(dst, stateVersion)
	dst = appendUvarint(dst, uint64(len(entries)))
	for _, e := range entries {
		dst = append(dst, byte(e.kind))
		dst = appendUvarint(dst, uint64(e.n))
		dst = appendUvarint(dst, uint64(len(e.original)))
		dst = append(dst, e.original...)
	}
	dst = appendUvarint(dst, uint64(len(held)))
	return append(dst, held...)
}

// decodeState reads a state encodeState wrote. The entries' originals and
// held alias b.
func decodeState(entries []entry, b []byte) ([]entry, []byte, error) {
	entries = entries[:0]
	if len(b) == 0 {
		return entries, nil, nil
	}
	if b[0] != stateVersion {
		return entries, nil, errBadState
	}
	b = b[1:]
	count, b, ok := uvarint(b)
	if !ok || count > uint64(len(b)) {
		return entries, nil, errBadState
	}
	for range count {
		if len(b) == 0 {
			return entries, nil, errBadState
		}
		kind := detect.Kind(b[0])
		var n, size uint64
		n, b, ok = uvarint(b[1:])
		if ok {
			size, b, ok = uvarint(b)
		}
		if !ok || !kind.Valid() || n == 0 || n > 1<<31 || size > uint64(len(b)) {
			return entries, nil, errBadState
		}
		entries = append(entries, entry{kind: kind, n: int(n), original: b[:size:size]})
		b = b[size:]
	}
	size, b, ok := uvarint(b)
	if !ok || size != uint64(len(b)) {
		return entries, nil, errBadState
	}
	return entries, b, nil
}

func appendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

func uvarint(b []byte) (uint64, []byte, bool) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, b[i+1:], true
		}
	}
	return 0, nil, false
}
