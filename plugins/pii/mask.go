package main

import (
	"bytes"
	"errors"
	"slices"
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
	// does not turn the client's own text into someone's data. nil: none
	// is taken.
	taken func(label string, n int) bool
	// index finds an original's entry by its kind's byte and bytes; last
	// is the highest number per label kind. Built on first use.
	index map[string]int
	last  [16]int
	key   []byte
}

// labelNumber is a placeholder by its label and number.
type labelNumber struct {
	label string
	n     int
}

// labels are the placeholder labels, one per label kind.
var labels = func() []string {
	var ls []string
	for _, k := range detect.All.Kinds() {
		if !slices.Contains(ls, k.Label()) {
			ls = append(ls, k.Label())
		}
	}
	return ls
}()

// occurrences finds the placeholders of t that occur in texts: one pass
// over each text for t's first byte, then the labels at each occurrence.
func (t template) occurrences(texts [][]byte) map[labelNumber]bool {
	found := map[labelNumber]bool{}
	digits := func(b []byte) (int, int) {
		n, v := 0, 0
		for n < len(b) && n < 9 && isDigitByte(b[n]) {
			v = v*10 + int(b[n]-'0')
			n++
		}
		return n, v
	}
	for _, text := range texts {
		for i := 0; ; {
			k := bytes.Index(text[i:], []byte(t.prefix))
			if k < 0 {
				break
			}
			rest := text[i+k+len(t.prefix):]
			i += k + 1
			for _, l := range labels {
				var nd, v int
				var after []byte
				if t.kindFirst {
					if !bytes.HasPrefix(rest, []byte(l)) || !bytes.HasPrefix(rest[len(l):], []byte(t.mid)) {
						continue
					}
					nd, v = digits(rest[len(l)+len(t.mid):])
					after = rest[len(l)+len(t.mid)+nd:]
				} else {
					nd, v = digits(rest)
					r := rest[nd:]
					if !bytes.HasPrefix(r, []byte(t.mid)) || !bytes.HasPrefix(r[len(t.mid):], []byte(l)) {
						continue
					}
					after = r[len(t.mid)+len(l):]
				}
				if nd > 0 && bytes.HasPrefix(after, []byte(t.suffix)) {
					found[labelNumber{l, v}] = true
				}
			}
		}
	}
	return found
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
	m.indexEntries()
	key := append(append(m.key[:0], byte(kind)), original...)
	m.key = key
	if i, ok := m.index[string(key)]; ok {
		return m.entries[i]
	}
	lk := labelKind(kind)
	n := m.last[lk] + 1
	for m.taken != nil && m.taken(kind.Label(), n) {
		n++
	}
	e := entry{kind: kind, n: n, original: bytes.Clone(original)}
	m.entries = append(m.entries, e)
	m.index[string(key)] = len(m.entries) - 1
	m.last[lk] = n
	return e
}

// indexEntries builds the index of the entries the mapping started with
// (a request's, read from the state), once.
func (m *mapping) indexEntries() {
	if m.index != nil {
		return
	}
	m.index = make(map[string]int, len(m.entries))
	m.last = [16]int{}
	for i, e := range m.entries {
		m.index[string(append([]byte{byte(e.kind)}, e.original...))] = i
		lk := labelKind(e.kind)
		m.last[lk] = max(m.last[lk], e.n)
	}
}

// reset makes m the mapping of entries, with no placeholder taken.
func (m *mapping) reset(entries []entry) {
	*m = mapping{entries: entries, key: m.key}
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
