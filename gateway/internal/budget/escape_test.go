package budget

import (
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

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

// TestKeysAreDistinct: scope-periods that a naive join with ':' would
// confuse get different keys, and every key of a tenant carries its hash
// tag.
func TestKeysAreDistinct(t *testing.T) {
	r := &Redis{prefix: DefaultPrefix}
	type sp struct {
		tenant string
		s      Scope
	}
	key := func(id, period string) Scope { return Scope{Kind: ScopeKey, ID: id, Period: period} }
	all := []sp{
		{"a:b", Scope{Kind: ScopeTenant, Period: "c"}}, {"a", Scope{Kind: ScopeTenant, Period: "b:c"}},
		{"a", key("b:c", "d")}, {"a", key("b", "c:d")}, {"a:key:b", key("", "d")},
		{"{", Scope{Kind: ScopeTenant, Period: "2026-11"}}, {"%7B", Scope{Kind: ScopeTenant, Period: "2026-11"}},
		{"a}", Scope{Kind: ScopeTenant, Period: "2026-11"}}, {"a", Scope{Kind: ScopeTenant, Period: "}2026-11"}},
		{"", Scope{Kind: ScopeTenant, Period: "x"}}, {"#", Scope{Kind: ScopeTenant, Period: "x"}},
		{"#e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Scope{Kind: ScopeTenant, Period: "x"}},
		{"a", Scope{Kind: ScopeUser, ID: "settled", Period: "x"}}, {"a", Scope{Kind: ScopeKey, ID: "settled", Period: "x"}},
	}
	seen := map[string]sp{}
	for _, p := range all {
		for _, k := range r.keys(p.tenant, "", []Scope{p.s}, holdSuffixes[:]) {
			if q, ok := seen[k]; ok {
				t.Errorf("%+v and %+v share the key %q", p, q, k)
			}
			seen[k] = p
			if tag := "{" + redisx.TenantTag(p.tenant) + "}"; !strings.HasPrefix(k, DefaultPrefix+tag+":") {
				t.Errorf("key %q does not start with the hash tag %q", k, tag)
			}
		}
	}
	// A settled marker never equals a scope's key: request ids follow
	// "settled:", and no scope kind is "settled".
	marker := r.keys("a", "key:b:c:spent", nil, nil)
	if _, ok := seen[marker[0]]; ok || len(marker) != 1 {
		t.Errorf("marker %q is also a scope's key", marker)
	}
}

func TestKeys(t *testing.T) {
	r := &Redis{prefix: "p:"}
	scopes := []Scope{
		{Kind: ScopeTenant, Window: Month, Period: "2026-11"},
		{Kind: ScopeUser, ID: "u:1{x}", Window: Day, Period: "2026-11-03"},
	}
	want := []string{
		"p:{a:b}:settled:req-1",
		"p:{a:b}:tenant::2026-11:spent", "p:{a:b}:tenant::2026-11:holds", "p:{a:b}:tenant::2026-11:leases",
		"p:{a:b}:user:u%3A1%7Bx%7D:2026-11-03:spent", "p:{a:b}:user:u%3A1%7Bx%7D:2026-11-03:holds", "p:{a:b}:user:u%3A1%7Bx%7D:2026-11-03:leases",
	}
	if got := r.keys("a:b", "req-1", scopes, holdSuffixes[:]); !slices.Equal(got, want) {
		t.Errorf("keys =\n%q\nwant\n%q", got, want)
	}
	if got := r.keys("a:b", "", scopes, shrinkSuffixes[:]); !slices.Equal(got, []string{want[2], want[3], want[5], want[6]}) {
		t.Errorf("shrink keys = %q", got)
	}
	// A tenant id with a brace is hashed into the tag, as the rate
	// limiter's keys do, so both counters of a tenant share its slot.
	if got := r.keys("a{b", "", scopes[:1], holdSuffixes[:1])[0]; got != "p:{"+redisx.TenantTag("a{b")+"}:tenant::2026-11:spent" || !strings.HasPrefix(got, "p:{#") {
		t.Errorf("key of a tenant with a brace = %q", got)
	}
}
