package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRawControlInString(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"a":"b\nc"}`, false},
		{"{\n  \"a\": \"b\",\r\n\t\"c\": [1, 2]\n}", false},
		{"{\"a\":\"b\x01\\nc\"}", true},
		{"{\"\x01\\b\":0}", true},
		{"{\"a\":\"b\nc\\\"\"}", true},
		{"{\"a\":\"b\\\\\",\n\"c\":1}", false},
		{"{\"a\":\"\\\"\x1f\"}", true},
		{strings.Repeat(" ", 17) + `{"a":"b"}`, false},
	}
	for _, tt := range tests {
		if got := rawControlInString([]byte(tt.body)); got != tt.want {
			t.Errorf("%q: %v, want %v", tt.body, got, tt.want)
		}
		if tt.want && json.Valid([]byte(tt.body)) {
			t.Errorf("%q is valid JSON", tt.body)
		}
	}
	for n := 0; n < 20; n++ { // every position of the word loop and the tail
		b := []byte(strings.Repeat("a", n) + "\x1f" + strings.Repeat("b", 20-n))
		if !hasControlByte(b) || hasControlByte(b[:n]) || hasControlByte(b[n+1:]) {
			t.Errorf("hasControlByte misses or invents the control byte at %d", n)
		}
	}
}

// FuzzValidateJSON checks ValidateJSON against encoding/json's verdict.
func FuzzValidateJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b\nc"}`, "{\"a\":\"\x10\\b0000\"}", `[1,"x",{"y":null}]`, "\"\x01\\u0041\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := ValidateJSON(b) == nil, json.Valid(b); got != want {
			t.Fatalf("%q: ValidateJSON says valid %v, encoding/json %v", b, got, want)
		}
	})
}
