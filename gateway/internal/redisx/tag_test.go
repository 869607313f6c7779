package redisx

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestTenantTag(t *testing.T) {
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return "#" + hex.EncodeToString(h[:]) }
	tests := []struct{ in, want string }{
		{"acme", "acme"},
		{"a:b", "a:b"},
		{"é", "é"},
		{"", hash("")},
		{"{", hash("{")},
		{"a}b", hash("a}b")},
		{"#x", hash("#x")},
		{hash("{")[1:], hash("{")[1:]}, // a hex id without '#' stays itself
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := TenantTag(tt.in)
		if got != tt.want {
			t.Errorf("TenantTag(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if b := AppendTenantTag([]byte("x"), tt.in); string(b) != "x"+tt.want {
			t.Errorf("AppendTenantTag(%q) = %q", tt.in, b)
		}
		if other, ok := seen[got]; ok && other != tt.in {
			t.Errorf("%q and %q share the tag %q", tt.in, other, got)
		}
		seen[got] = tt.in
	}
}
