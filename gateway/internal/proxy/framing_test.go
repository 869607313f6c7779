package proxy

import (
	"strings"
	"testing"
)

func TestLooseFraming(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"CRLF", "Host: gw\r\nX-A: b c\r\n\r\n", ""},
		{"empty", "", ""},
		{"bare LF", "Host: gw\nX-A: b\r\n\r\n", "bare LF"},
		{"bare LF at the end", "Host: gw\r\nX-A: b\n\n", "bare LF"},
		{"LF first", "\nHost: gw\r\n\r\n", "bare LF"},
		{"folded with a space", "Host: gw\r\nX-A: b\r\n c\r\n\r\n", "obs-fold"},
		{"folded with a tab", "Host: gw\r\nX-A: b\r\n\tc\r\n\r\n", "obs-fold"},
		{"a value with spaces and tabs", "X-A: \tb \t c\r\n\r\n", ""},
	}
	for _, tt := range tests {
		got := looseFraming([]byte(tt.raw))
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
