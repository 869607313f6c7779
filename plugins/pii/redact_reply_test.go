package main

import (
	"regexp"
	"strings"
	"testing"
)

// redactCases are replies of a policy with reply: redact, and what the
// client must get.
var redactCases = []struct{ name, reply, want string }{
	{"email", "Reach me at john@example.com today.", "Reach me at [EMAIL_1] today."},
	{"same twice", "a@example.com, b@example.com, a@example.com", "[EMAIL_1], [EMAIL_2], [EMAIL_1]"},
	{"grouped", "IBAN GB82 WEST 1234 5698 7654 32 and card 4111 1111 1111 1111.", "IBAN [IBAN_1] and card [CARD_1]."},
	{"at the end", "call +1 415 555 0100", "call [PHONE_1]"},
	{"none", "Nothing personal in 1.2.3 or 2024-01-15.", "Nothing personal in 1.2.3 or 2024-01-15."},
	{"pem", "key:\n-----BEGIN PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf\n-----END PRIVATE KEY-----\nok", "key:\n[SECRET_1]\nok"},
	{"jwt", "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abc_DEF-123 end", "token [SECRET_1] end"},
}

func TestRedactReplyWhole(t *testing.T) {
	p := mustPolicy(t, `{"reply":"redact"}`)
	for _, tc := range redactCases {
		if got := wholeReply(t, p, nil, tc.reply); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestRedactReplyEverySplit: a streamed reply cut anywhere, in two or
// three events, is redacted as the whole reply is.
func TestRedactReplyEverySplit(t *testing.T) {
	p := mustPolicy(t, `{"reply":"redact"}`)
	for _, tc := range redactCases {
		n := len(tc.reply)
		for a := 0; a <= n; a++ {
			for b := a; b <= n; b++ {
				pieces := []string{tc.reply[:a], tc.reply[a:b], tc.reply[b:]}
				if got := streamReply(t, p, nil, pieces); got != tc.want {
					t.Fatalf("%s, cuts at %d, %d: got %q, want %q", tc.name, a, b, got, tc.want)
				}
			}
		}
	}
}

// The request's placeholders number the reply's findings after them.
func TestRedactReplyContinuesNumbering(t *testing.T) {
	p := mustPolicy(t, `{"reply":"redact"}`)
	got := streamReply(t, p, testEntries[:2], []string{"Also jane@example.org and x@exa", "mple.com."})
	if want := "Also [EMAIL_2] and [EMAIL_3]."; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestRedactReplyBound: a long reply streamed in small events is held
// back by at most the documented bound at any time.
func TestRedactReplyBound(t *testing.T) {
	p := mustPolicy(t, `{"reply":"redact"}`)
	var w replyWork
	var st replyState
	text := strings.Repeat("Some words of prose, and a@example.com in them. ", 200)
	released := 0
	for i := 0; i < len(text); i += 7 {
		piece := text[i:min(i+7, len(text))]
		d := p.onEvent(&w, &st, []byte(piece), 1)
		released += len(d.emit)
		if len(st.held) > holdTail+48 {
			t.Fatalf("after %d bytes, %d held", i+len(piece), len(st.held))
		}
	}
	if released == 0 {
		t.Fatal("nothing released")
	}
	long := strings.Repeat("x", maxHold+500)
	st = replyState{}
	for i := 0; i < len(long); i += 100 {
		p.onEvent(&w, &st, []byte(long[i:min(i+100, len(long))]), 1)
		if len(st.held) > maxHold+100 {
			t.Fatalf("a run without spaces: %d held", len(st.held))
		}
	}
}

// FuzzRedactReplyStream: a reply cut into three events is redacted as the
// whole reply is (the text is repeated past the hold-back's 64 bytes, so
// that events are released before the end): the same text is replaced by
// placeholders of the same kinds. Their numbers may differ where a cut
// changes how findings pair up (a PEM block whose END line is another
// block's), so they are not compared.
func FuzzRedactReplyStream(f *testing.F) {
	for _, tc := range redactCases {
		f.Add(tc.reply, uint8(3), uint16(40), uint16(200))
	}
	p, err := parseConfig([]byte(`{"reply":"redact"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, piece string, times uint8, a, b uint16) {
		if len(piece) == 0 || len(piece)*int(times) > 2000 {
			return
		}
		reply := strings.Repeat(piece, int(times))
		i, j := int(a)%(len(reply)+1), int(b)%(len(reply)+1)
		i, j = min(i, j), max(i, j)
		want := unnumbered(wholeReply(t, p, nil, reply))
		if got := unnumbered(streamReply(t, p, nil, []string{reply[:i], reply[i:j], reply[j:]})); got != want {
			t.Fatalf("cuts %d, %d of %q:\n got %q\nwant %q", i, j, reply, got, want)
		}
	})
}

var placeholderNumber = regexp.MustCompile(`\[([A-Z_]+?)_[0-9]+\]`)

// unnumbered is text with its placeholders' numbers taken out.
func unnumbered(text string) string { return placeholderNumber.ReplaceAllString(text, "[$1]") }
