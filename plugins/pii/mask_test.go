package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/tollgate/tollgate/sdk"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/plugins/pii/detect"
)

func TestStateRoundTrip(t *testing.T) {
	held := []byte("[EMA")
	b := encodeState(nil, testEntries, held)
	entries, gotHeld, err := decodeState(nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(testEntries) || !bytes.Equal(gotHeld, held) {
		t.Fatalf("entries %v held %q", entries, gotHeld)
	}
	for i, e := range entries {
		w := testEntries[i]
		if e.kind != w.kind || e.n != w.n || !bytes.Equal(e.original, w.original) {
			t.Errorf("entry %d: %+v, want %+v", i, e, w)
		}
	}
	// 4 entries of 15-18 bytes: the encoding adds 3 bytes to each and 3
	// in all.
	if want := 1 + 1 + (3 + 16) + (3 + 16) + (3 + 15) + (3 + 18) + 1 + len(held); len(b) != want {
		t.Errorf("encoded in %d bytes, want %d", len(b), want)
	}
	if b := encodeState(nil, nil, nil); len(b) != 0 {
		t.Errorf("the empty state is %d bytes", len(b))
	}
	for _, bad := range []string{"\x02", "\x01", "\x01\x05", "\x01\x01\x00\x01\x00\x00", "\x01\x01\x01\x01\x05ab\x00", "\x01\x00\x03ab"} {
		if _, _, err := decodeState(nil, []byte(bad)); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func TestMappingSameOriginal(t *testing.T) {
	tp, _ := parseTemplate(defaultPlaceholder)
	var m mapping
	text := []byte("8.8.8.8 then 2001:db8::1 then 8.8.8.8")
	spans := detect.New(detect.Options{}).Append(nil, text)
	got := m.redact(nil, tp, text, spans)
	if want := "[IP_1] then [IP_2] then [IP_1]"; string(got) != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

// FuzzDecodeState: any bytes decode or fail without panicking, and what
// decodes encodes back to the same bytes.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(nil, testEntries, []byte("[EM")))
	f.Add([]byte{})
	f.Add([]byte("\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, held, err := decodeState(nil, b)
		if err != nil {
			return
		}
		if again := encodeState(nil, entries, held); !bytes.Equal(again, b) && len(b) > 0 && (len(entries) > 0 || len(held) > 0) {
			// Varints may be written longer than needed; the canonical
			// form must decode to the same.
			e2, h2, err := decodeState(nil, again)
			if err != nil || len(e2) != len(entries) || !bytes.Equal(h2, held) {
				t.Fatalf("%q re-encoded as %q", b, again)
			}
		}
	})
}

// FuzzRestoreStream: a reply cut into three events is restored as the
// whole reply is, whatever the text.
func FuzzRestoreStream(f *testing.F) {
	for _, tc := range restoreCases {
		f.Add(tc.reply, uint16(3), uint16(7))
	}
	p, err := parseConfig([]byte(`{"mode":"mask-and-restore"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, reply string, a, b uint16) {
		i, j := int(a)%(len(reply)+1), int(b)%(len(reply)+1)
		i, j = min(i, j), max(i, j)
		want := wholeReply(t, p, testEntries, reply)
		if got := streamReply(t, p, testEntries, []string{reply[:i], reply[i:j], reply[j:]}); got != want {
			t.Fatalf("cuts %d, %d: %q, whole %q", i, j, got, want)
		}
	})
}

// FuzzRedactJSON: a tool call's arguments that are JSON stay JSON once
// redacted.
func FuzzRedactJSON(f *testing.F) {
	f.Add(`{"card": 4111111111111111, "to": "a@example.com", "n": -4111111111111111}`)
	f.Add(`["8.8.8.8", "+1 415 555 0100", {"k": "AKIAIOSFODNN7EXAMPLE"}]`)
	f.Add(`"-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----"`)
	tp, err := parseTemplate(defaultPlaceholder)
	if err != nil {
		f.Fatal(err)
	}
	s := detect.New(detect.Options{})
	f.Fuzz(func(t *testing.T, args string) {
		if !json.Valid([]byte(args)) {
			return
		}
		var m mapping
		out := m.redactJSON(nil, tp, []byte(args), s.Append(nil, []byte(args)))
		if !json.Valid(out) {
			t.Fatalf("%s redacted to %s", args, out)
		}
	})
}

func TestOccurrences(t *testing.T) {
	tests := []struct {
		tpl  string
		text string
		want []labelNumber
	}{
		{defaultPlaceholder, "a [EMAIL_12] b [US_SSN_3][IP_1] [EMAIL_4 [CARD_x] [NAME_1] [[PHONE_2]]", []labelNumber{{"EMAIL", 12}, {"US_SSN", 3}, {"IP", 1}, {"PHONE", 2}}},
		{"<<{N}:{KIND}>>", "<<3:EMAIL>> <<:EMAIL>> <<4:EMAIL> <<5:IBAN>>", []labelNumber{{"EMAIL", 3}, {"IBAN", 5}}},
		{defaultPlaceholder, "no placeholders here", nil},
	}
	for _, tt := range tests {
		tp, err := parseTemplate(tt.tpl)
		if err != nil {
			t.Fatal(err)
		}
		got := tp.occurrences([][]byte{[]byte(tt.text)})
		if len(got) != len(tt.want) {
			t.Errorf("%s in %q: %v, want %v", tt.tpl, tt.text, got, tt.want)
		}
		for _, w := range tt.want {
			if !got[w] {
				t.Errorf("%s in %q: %v missing from %v", tt.tpl, tt.text, w, got)
			}
		}
	}
}

// Many findings in one request: numbering stays linear (the client's
// placeholders are found once, not per finding).
func TestManyFindings(t *testing.T) {
	p := mustPolicy(t, `{"mode":"mask-and-restore"}`)
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "user%d@example.com, ", i)
	}
	b.WriteString("[EMAIL_7] is mine")
	var f fakeRequest
	var m mapping
	res, err := p.scanRequest([]sdk.MessagePart{part(0, "user", b.String())}, &f, &m)
	if err != nil || len(res.entries) != 2000 {
		t.Fatalf("%v, %d entries", err, len(res.entries))
	}
	if last := res.entries[len(res.entries)-1]; last.n != 2001 || !strings.Contains(f.texts[0], "[EMAIL_6], [EMAIL_8], ") {
		t.Fatalf("last number %d; %s", last.n, f.texts[0][:200])
	}
}
