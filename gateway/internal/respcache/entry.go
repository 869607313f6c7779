package respcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Entry is one stored reply (HTTP 200 only).
type Entry struct {
	Stream bool     // stored as a stream's events; else a whole JSON reply
	Body   []byte   // the whole reply (Stream false)
	Events [][]byte // the SSE data payloads in order, without the terminating [DONE] (Stream true)
	// The reply's usage as its upstream reported it (0 when unknown): what a hit saves.
	PromptTokens, CompletionTokens int64
	Model                          string    // the client's model name
	Stored                         time.Time // when it was stored (UTC, millisecond precision after a round trip)
}

// entryVersion is the first byte of an encoded Entry.
//
// Version 1, after the version byte:
//
//	flags          1 byte: bit 0 Stream; the other bits zero
//	prompt tokens  varint (zigzag)
//	completion     varint (zigzag)
//	stored         varint (zigzag): Unix milliseconds
//	model          uvarint length, bytes
//	Stream false:  uvarint length, body bytes
//	Stream true:   uvarint count, then each event: uvarint length, bytes
//
// Every varint is in its shortest form: one Entry has exactly one encoding.
const entryVersion = 1

const flagStream = 1

var errEntry = errors.New("respcache: malformed entry")

// Marshal appends e's encoding to dst. With Stream false the Events are not
// encoded, with Stream true the Body is not.
func (e *Entry) Marshal(dst []byte) []byte {
	var flags byte
	if e.Stream {
		flags = flagStream
	}
	dst = append(dst, entryVersion, flags)
	dst = binary.AppendVarint(dst, e.PromptTokens)
	dst = binary.AppendVarint(dst, e.CompletionTokens)
	dst = binary.AppendVarint(dst, e.Stored.UnixMilli())
	dst = binary.AppendUvarint(dst, uint64(len(e.Model)))
	dst = append(dst, e.Model...)
	if !e.Stream {
		dst = binary.AppendUvarint(dst, uint64(len(e.Body)))
		return append(dst, e.Body...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.Events)))
	for _, ev := range e.Events {
		dst = binary.AppendUvarint(dst, uint64(len(ev)))
		dst = append(dst, ev...)
	}
	return dst
}

// Size is the entry's encoded size in bytes (what the caps count).
func (e *Entry) Size() int {
	n := 2 + varintLen(e.PromptTokens) + varintLen(e.CompletionTokens) + varintLen(e.Stored.UnixMilli()) +
		uvarintLen(uint64(len(e.Model))) + len(e.Model)
	if !e.Stream {
		return n + uvarintLen(uint64(len(e.Body))) + len(e.Body)
	}
	n += uvarintLen(uint64(len(e.Events)))
	for _, ev := range e.Events {
		n += uvarintLen(uint64(len(ev))) + len(ev)
	}
	return n
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func varintLen(v int64) int {
	u := uint64(v) << 1
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

// Unmarshal decodes an Entry that Marshal encoded. The Entry's Body and
// Events alias b (its Model is a copy). It refuses anything malformed,
// truncated, with trailing bytes, with a varint not in its shortest form or
// of an unknown version.
func Unmarshal(b []byte) (Entry, error) {
	var e Entry
	d := decoder{b: b}
	if len(b) == 0 {
		return e, fmt.Errorf("%w: empty", errEntry)
	}
	if b[0] != entryVersion {
		return e, fmt.Errorf("%w: unknown version %d", errEntry, b[0])
	}
	if len(b) < 2 {
		return e, fmt.Errorf("%w: truncated", errEntry)
	}
	if b[1]&^flagStream != 0 {
		return e, fmt.Errorf("%w: unknown flags %#x", errEntry, b[1])
	}
	e.Stream = b[1]&flagStream != 0
	d.p = 2
	e.PromptTokens = d.varint()
	e.CompletionTokens = d.varint()
	ms := d.varint()
	model := d.bytes()
	if d.err != nil {
		return Entry{}, d.err
	}
	e.Stored = time.UnixMilli(ms).UTC()
	e.Model = string(model)
	if !e.Stream {
		e.Body = d.bytes()
	} else {
		n := d.uvarint()
		if d.err == nil && n > uint64(len(b)-d.p) { // each event takes at least a byte
			return Entry{}, fmt.Errorf("%w: %d events in %d bytes", errEntry, n, len(b)-d.p)
		}
		if d.err == nil {
			e.Events = make([][]byte, n)
			for i := range e.Events {
				e.Events[i] = d.bytes()
			}
		}
	}
	if d.err != nil {
		return Entry{}, d.err
	}
	if d.p != len(b) {
		return Entry{}, fmt.Errorf("%w: %d trailing bytes", errEntry, len(b)-d.p)
	}
	return e, nil
}

type decoder struct {
	b   []byte
	p   int
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.p:])
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated or overlong varint at %d", errEntry, d.p)
		return 0
	}
	if n != uvarintLen(v) {
		d.err = fmt.Errorf("%w: varint not in its shortest form at %d", errEntry, d.p)
		return 0
	}
	d.p += n
	return v
}

func (d *decoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)-d.p) {
		d.err = fmt.Errorf("%w: truncated at %d", errEntry, d.p)
		return nil
	}
	s := d.b[d.p : d.p+int(n) : d.p+int(n)]
	d.p += int(n)
	return s
}
