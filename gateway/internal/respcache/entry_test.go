package respcache

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"testing"
	"time"
)

func sampleEntries() []Entry {
	at := time.Date(2026, 12, 2, 10, 11, 12, 345_000_000, time.UTC)
	return []Entry{
		{},
		{Body: []byte(`{"object":"chat.completion"}`), PromptTokens: 12, CompletionTokens: 345, Model: "gpt-4o", Stored: at},
		{Stream: true, Events: [][]byte{[]byte(`{"a":1}`), {}, []byte(`{"b":2}`)}, PromptTokens: 1 << 40, Model: "m", Stored: at},
		{Stream: true, Events: [][]byte{}, PromptTokens: -1, CompletionTokens: -1 << 62, Stored: time.UnixMilli(-5).UTC()},
		{Body: bytes.Repeat([]byte("x"), 300), Model: string(bytes.Repeat([]byte("m"), 200))},
	}
}

func TestEntryRoundTrip(t *testing.T) {
	t.Parallel()
	for i, e := range sampleEntries() {
		b := e.Marshal([]byte("prefix"))
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("%d: Marshal did not append", i)
		}
		b = b[len("prefix"):]
		if len(b) != e.Size() {
			t.Errorf("%d: Size %d, encoding %d bytes", i, e.Size(), len(b))
		}
		got, err := Unmarshal(b)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got.Stream != e.Stream || got.PromptTokens != e.PromptTokens || got.CompletionTokens != e.CompletionTokens ||
			got.Model != e.Model || !got.Stored.Equal(e.Stored) || got.Stored.Location() != time.UTC {
			t.Errorf("%d: got %+v, want %+v", i, got, e)
		}
		if !e.Stream && !bytes.Equal(got.Body, e.Body) {
			t.Errorf("%d: body %q, want %q", i, got.Body, e.Body)
		}
		if e.Stream && !reflect.DeepEqual(normEvents(got.Events), normEvents(e.Events)) {
			t.Errorf("%d: events %q, want %q", i, got.Events, e.Events)
		}
		if again := got.Marshal(nil); !bytes.Equal(again, b) {
			t.Errorf("%d: re-encoding differs", i)
		}
	}
}

func normEvents(evs [][]byte) []string {
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = string(e)
	}
	return s
}

// TestEntryStoredPrecision: Stored keeps milliseconds, in UTC.
func TestEntryStoredPrecision(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("x", 3600))
	e := Entry{Stored: at}
	got, err := Unmarshal(e.Marshal(nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Millisecond).UTC(); got.Stored != want {
		t.Fatalf("Stored %v, want %v", got.Stored, want)
	}
}

// TestEntryAliases: Unmarshal copies no payload.
func TestEntryAliases(t *testing.T) {
	t.Parallel()
	e := Entry{Body: []byte("hello")}
	b := e.Marshal(nil)
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] = 'O'
	if string(got.Body) != "hellO" {
		t.Fatalf("body %q does not alias the input", got.Body)
	}
	if cap(got.Body) != len(got.Body) {
		t.Fatal("an append to the body could write into the input")
	}
}

func TestEntryRefused(t *testing.T) {
	t.Parallel()
	for i, e := range sampleEntries() {
		b := e.Marshal(nil)
		for n := range len(b) {
			if _, err := Unmarshal(b[:n]); err == nil {
				t.Errorf("%d: truncated to %d of %d bytes: accepted", i, n, len(b))
			}
		}
		if _, err := Unmarshal(append(b[:len(b):len(b)], 0)); err == nil {
			t.Errorf("%d: trailing byte accepted", i)
		}
		v := append([]byte(nil), b...)
		v[0] = 2
		if _, err := Unmarshal(v); err == nil {
			t.Errorf("%d: version 2 accepted", i)
		}
		v[0], v[1] = entryVersion, 0x02
		if _, err := Unmarshal(v); err == nil {
			t.Errorf("%d: unknown flag accepted", i)
		}
	}
	// A varint not in its shortest form (0 as 0x80 0x00).
	overlong := []byte{entryVersion, 0, 0x80, 0x00, 0, 0, 0, 0}
	if _, err := Unmarshal(overlong); err == nil {
		t.Error("overlong varint accepted")
	}
	// An event count the bytes cannot hold.
	huge := []byte{entryVersion, flagStream, 0, 0, 0, 0}
	huge = binary.AppendUvarint(huge, 1<<40)
	if _, err := Unmarshal(huge); err == nil {
		t.Error("huge event count accepted")
	}
}

// FuzzUnmarshal: Unmarshal never panics, and what it accepts Marshal
// encodes back to the same bytes (one encoding per entry).
func FuzzUnmarshal(f *testing.F) {
	for _, e := range sampleEntries() {
		f.Add(e.Marshal(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Unmarshal(b)
		if err != nil {
			return
		}
		if again := e.Marshal(nil); !bytes.Equal(again, b) {
			t.Fatalf("Marshal(Unmarshal(%x)) = %x", b, again)
		}
		if e.Size() != len(b) {
			t.Fatalf("Size %d of a %d-byte encoding", e.Size(), len(b))
		}
	})
}
