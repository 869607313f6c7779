package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk"
)

// fakeRequest records the rewrites; records in refuse answer ErrInvalid
// as the host does for a part that is not one JSON string. Messages
// returns after, as the host renders the rewritten body.
type fakeRequest struct {
	texts  map[int]string
	refuse map[int]bool
	after  []sdk.MessagePart
}

func (f *fakeRequest) Messages(dst []sdk.MessagePart) []sdk.MessagePart {
	return append(dst, f.after...)
}

func (f *fakeRequest) SetMessageText(record int, text string) error {
	if f.refuse[record] {
		return sdk.ErrInvalid
	}
	if f.texts == nil {
		f.texts = map[int]string{}
	}
	f.texts[record] = text
	return nil
}

func part(record int, role, text string) sdk.MessagePart {
	return sdk.MessagePart{Index: record, Record: record, Kind: sdk.PartText, Role: []byte(role), Text: []byte(text)}
}

func mustPolicy(t *testing.T, cfg string) *policy {
	t.Helper()
	p, err := parseConfig([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestScanRequest(t *testing.T) {
	parts := []sdk.MessagePart{
		part(0, "system", "Support bot. Escalate to boss@example.com."),
		part(1, "user", "I am john@example.com, card 4111 1111 1111 1111, and again john@example.com."),
		part(2, "assistant", "Noted."),
		part(3, "user", "Also jane@example.org and [EMAIL_2] is literal text."),
	}
	tests := []struct {
		name   string
		cfg    string
		want   map[int]string
		found  detect.Set
		reject bool
	}{
		{
			name: "redact",
			cfg:  `{"mode":"redact"}`,
			want: map[int]string{
				1: "I am [EMAIL_1], card [CARD_1], and again [EMAIL_1].",
				// [EMAIL_2] occurs in the request: the next number is 3.
				3: "Also [EMAIL_3] and [EMAIL_2] is literal text.",
			},
			found: detect.SetOf(detect.Email, detect.Card),
		},
		{
			name:  "detectors",
			cfg:   `{"mode":"mask-and-restore","detectors":["card"]}`,
			want:  map[int]string{1: "I am john@example.com, card [CARD_1], and again john@example.com."},
			found: detect.SetOf(detect.Card),
		},
		{
			name:  "roles",
			cfg:   `{"roles":["system"]}`,
			want:  map[int]string{0: "Support bot. Escalate to [EMAIL_1]."},
			found: detect.SetOf(detect.Email),
		},
		{
			name:   "reject",
			cfg:    `{"mode":"reject"}`,
			want:   map[int]string{},
			found:  detect.SetOf(detect.Email, detect.Card),
			reject: true,
		},
	}
	for _, tt := range tests {
		p := mustPolicy(t, tt.cfg)
		var f fakeRequest
		var m mapping
		res, err := p.scanRequest(parts, &f, &m)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.found != tt.found || res.unredactable {
			t.Errorf("%s: found %v (unredactable %v), want %v", tt.name, res.found.Kinds(), res.unredactable, tt.found.Kinds())
		}
		if len(f.texts) != len(tt.want) {
			t.Errorf("%s: rewrote %v, want %v", tt.name, f.texts, tt.want)
		}
		for rec, want := range tt.want {
			if f.texts[rec] != want {
				t.Errorf("%s: record %d is %q, want %q", tt.name, rec, f.texts[rec], want)
			}
		}
		if tt.reject && !strings.Contains(p.rejectMessage(res.found), "(email, card)") {
			t.Errorf("%s: message %q", tt.name, p.rejectMessage(res.found))
		}
	}
}

// The placeholders a request got restore the originals in the reply.
func TestScanRequestThenRestore(t *testing.T) {
	p := mustPolicy(t, `{"mode":"mask-and-restore"}`)
	text := "Mail john@example.com or call +44 20 7946 0958; key AKIAIOSFODNN7EXAMPLE."
	var f fakeRequest
	var m mapping
	res, err := p.scanRequest([]sdk.MessagePart{part(0, "user", text)}, &f, &m)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Mail [EMAIL_1] or call [PHONE_1]; key [SECRET_1]."; f.texts[0] != want {
		t.Fatalf("masked %q, want %q", f.texts[0], want)
	}
	// Through the state's encoding, as the chunk phase reads it.
	entries, _, err := decodeState(nil, encodeState(nil, res.entries, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := streamReply(t, p, entries, []string{"Done: [EMAIL", "_1], [PHONE_1], [SEC", "RET_1]."}); got != "Done: john@example.com, +44 20 7946 0958, AKIAIOSFODNN7EXAMPLE." {
		t.Fatalf("restored %q", got)
	}
}

func TestScanRequestUnredactable(t *testing.T) {
	p := mustPolicy(t, `{"mode":"redact"}`)
	parts := []sdk.MessagePart{part(0, "user", "a@example.com"), part(1, "tool", "b@example.com")}
	f := fakeRequest{refuse: map[int]bool{1: true}, after: []sdk.MessagePart{part(0, "user", "[EMAIL_1]"), parts[1]}}
	var m mapping
	res, err := p.scanRequest(parts, &f, &m)
	if err != nil || !res.unredactable {
		t.Fatalf("err %v, unredactable %v", err, res.unredactable)
	}
	boom := errors.New("boom")
	if _, err := p.scanRequest([]sdk.MessagePart{part(0, "user", "a@example.com")}, errSetter{boom}, &m); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
}

type errSetter struct{ err error }

func (e errSetter) SetMessageText(int, string) error { return e.err }

func (e errSetter) Messages(dst []sdk.MessagePart) []sdk.MessagePart { return dst }

// TestScanRequestMadeOfParts: a part that cannot be rewritten but whose
// text the other rewrites cleaned (an MCP tool call's arguments, whose
// strings are parts of their own) neither refuses the request nor counts
// its findings twice; one with a finding left refuses it.
func TestScanRequestMadeOfParts(t *testing.T) {
	p := mustPolicy(t, `{"mode":"redact"}`)
	call := func(args string) sdk.MessagePart {
		return sdk.MessagePart{Record: 0, Kind: sdk.PartToolCall, Role: []byte("assistant"), Name: []byte("mail"), Text: []byte(args)}
	}
	to := func(text string) sdk.MessagePart {
		return sdk.MessagePart{Record: 1, Kind: sdk.PartText, Role: []byte("assistant"), Name: []byte("/to"), Text: []byte(text)}
	}
	parts := []sdk.MessagePart{call(`{"to":"a@example.com"}`), to("a@example.com")}
	f := fakeRequest{refuse: map[int]bool{0: true}, after: []sdk.MessagePart{call(`{"to":"[EMAIL_1]"}`), to("[EMAIL_1]")}}
	var m mapping
	res, err := p.scanRequest(parts, &f, &m)
	if err != nil || res.unredactable || res.rewritten != 1 || f.texts[1] != "[EMAIL_1]" {
		t.Fatalf("err %v, %+v, texts %v", err, res, f.texts)
	}
	if res.counts[detect.Email] != 1 || res.found != detect.SetOf(detect.Email) {
		t.Fatalf("counted %d e-mails, found %v", res.counts[detect.Email], res.found.Kinds())
	}
	// A card written as a number is in no string: it stays in the call.
	parts[0] = call(`{"to":"a@example.com","card":4111111111111111}`)
	f = fakeRequest{refuse: map[int]bool{0: true}, after: []sdk.MessagePart{call(`{"to":"[EMAIL_1]","card":4111111111111111}`), to("[EMAIL_1]")}}
	m = mapping{}
	if res, err := p.scanRequest(parts, &f, &m); err != nil || !res.unredactable {
		t.Fatalf("err %v, unredactable %v", err, res.unredactable)
	}
}

// TestNeedsReply: the reply phase is skipped unless there is something to
// restore or the reply is scanned.
func TestNeedsReply(t *testing.T) {
	some := requestResult{entries: testEntries[:1], found: detect.SetOf(detect.Email)}
	tests := []struct {
		cfg  string
		res  requestResult
		want bool
	}{
		{`{"mode":"mask-and-restore"}`, some, true},
		{`{"mode":"mask-and-restore"}`, requestResult{}, false},
		{`{"mode":"mask-and-restore","reply":"off"}`, some, false},
		{`{"mode":"redact"}`, some, false},
		{`{"mode":"redact","reply":"redact"}`, requestResult{}, true},
		{`{"mode":"reject","reply":"redact"}`, requestResult{}, true},
	}
	for _, tt := range tests {
		if got := mustPolicy(t, tt.cfg).needsReply(&tt.res); got != tt.want {
			t.Errorf("%s with %d entries: %v", tt.cfg, len(tt.res.entries), got)
		}
	}
}

// A finding in a tool call's arguments outside a JSON string becomes a
// quoted placeholder: the arguments stay JSON.
func TestScanRequestToolCallJSON(t *testing.T) {
	p := mustPolicy(t, `{"mode":"redact"}`)
	args := `{"card": 4111111111111111, "to": "a@example.com", "note": "say \"b@example.com\"", "ip": [8.8.8.8]}`
	call := sdk.MessagePart{Index: 1, Record: 1, Kind: sdk.PartToolCall, Role: []byte("assistant"), Name: []byte("pay"), Text: []byte(args)}
	var f fakeRequest
	var m mapping
	if _, err := p.scanRequest([]sdk.MessagePart{call}, &f, &m); err != nil {
		t.Fatal(err)
	}
	want := `{"card": "[CARD_1]", "to": "[EMAIL_1]", "note": "say \"[EMAIL_2]\"", "ip": ["[IP_1]"]}`
	if f.texts[1] != want {
		t.Fatalf("got  %s\nwant %s", f.texts[1], want)
	}
	if !json.Valid([]byte(f.texts[1])) {
		t.Fatal("not JSON")
	}
}
