package sse

import (
	"strings"
	"testing"
)

func TestAppendData(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
		ok   bool
	}{
		{"single", "data: hello\n\n", "hello", true},
		{"no space", "data:hello\n\n", "hello", true},
		{"only one space removed", "data:  two\n\n", " two", true},
		{"multi line joined", "data: a\ndata: b\ndata: c\n\n", "a\nb\nc", true},
		{"crlf", "data: a\r\ndata: b\r\n\r\n", "a\nb", true},
		{"cr", "data: a\rdata: b\r\r", "a\nb", true},
		{"empty value", "data:\n\n", "", true},
		{"no colon", "data\n\n", "", true},
		{"no colon joined", "data\ndata: x\n\n", "\nx", true},
		{"other fields ignored", "event: delta\nid: 42\nretry: 100\n: comment\ndata: x\n\n", "x", true},
		{"comment looks like data", ": data: nope\ndata: yes\n\n", "yes", true},
		{"similar field name", "database: nope\ndatum: no\ndata: yes\n\n", "yes", true},
		{"no data", "event: ping\nid: 1\n\n", "", false},
		{"comment only", ": keep-alive\n\n", "", false},
		{"blank", "\n", "", false},
		{"leading carried lf", "\ndata: x\r\r", "x", true},
		{"no terminator", "data: x", "x", true},
		{"colon in value", "data: {\"a\":\"b:c\"}\n\n", "{\"a\":\"b:c\"}", true},
		{"done", "data: [DONE]\n\n", "[DONE]", true},
		{"value with trailing space", "data: x \n\n", "x ", true},
		{"tab not stripped", "data:\tx\n\n", "\tx", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("keep:")
			got, ok := AppendData(prefix, []byte(tc.raw))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if string(got) != "keep:"+tc.want {
				t.Fatalf("got %q, want %q", got[len(prefix):], tc.want)
			}
		})
	}
}

func TestAppendDataLongCROnlyEvent(t *testing.T) {
	var b strings.Builder
	for range 20000 {
		b.WriteString("data: abcdefgh\r")
	}
	b.WriteString("\r")
	got, ok := AppendData(nil, []byte(b.String()))
	if !ok || len(got) != 20000*9-1 {
		t.Fatalf("ok=%v len=%d", ok, len(got))
	}
}

func TestIsDone(t *testing.T) {
	for in, want := range map[string]bool{
		"[DONE]":  true,
		"[DONE] ": false,
		" [DONE]": false,
		"[done]":  false,
		"":        false,
		"{}":      false,
	} {
		if got := IsDone([]byte(in)); got != want {
			t.Errorf("IsDone(%q) = %v", in, got)
		}
	}
}
