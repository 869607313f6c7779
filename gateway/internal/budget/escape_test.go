package budget

import "testing"

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"acme", "acme"},
		{"", ""},
		{"a{b}", "a%7Bb%7D"},
		{"}", "%7D"},
		{"a:b", "a%3Ab"},
		{"100%", "100%25"},
		{"%7B", "%257B"},
		{"é{", "é%7B"},
	}
	for _, tt := range tests {
		if got := escape(tt.in); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestKeysAreDistinct: tenant-months that a naive tenant+":"+month would
// confuse get different keys.
func TestKeysAreDistinct(t *testing.T) {
	r := &Redis{prefix: DefaultPrefix}
	pairs := [][2]string{
		{"a:b", "c"}, {"a", "b:c"},
		{"{", "2026-11"}, {"%7B", "2026-11"},
		{"a}", "2026-11"}, {"a", "}2026-11"},
	}
	seen := map[string][2]string{}
	for _, p := range pairs {
		b := r.base(p[0], p[1])
		if q, ok := seen[b]; ok {
			t.Errorf("%q and %q share the key base %q", p, q, b)
		}
		seen[b] = p
	}
}

func TestKeys(t *testing.T) {
	r := &Redis{prefix: "p:"}
	want := []string{"p:{a%7Bb:2026-11}:spent", "p:{a%7Bb:2026-11}:holds", "p:{a%7Bb:2026-11}:leases", "p:{a%7Bb:2026-11}:settled:req-1"}
	got := r.keys("a{b", "2026-11", "req-1")
	if len(got) != len(want) {
		t.Fatalf("keys = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("key %d = %q, want %q", i, got[i], want[i])
		}
	}
	if got := r.keys("a{b", "2026-11", ""); len(got) != 3 || got[2] != want[2] {
		t.Errorf("keys without a request id = %q, want %q", got, want[:3])
	}
}
