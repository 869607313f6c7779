package mcp

import "testing"

func TestAllowed(t *testing.T) {
	tests := []struct {
		patterns []string
		model    string
		want     bool
	}{
		{nil, "mcp:docs/search", true},
		{[]string{"mcp:docs"}, "mcp:docs", true},
		{[]string{"mcp:docs"}, "mcp:docs/search", false},
		{[]string{"mcp:docs/*"}, "mcp:docs/search", true},
		{[]string{"mcp:docs/*"}, "mcp:docs", false},
		{[]string{"mcp:docs/*"}, "mcp:docs/a/b", false}, // * does not cross '/'
		{[]string{"mcp:*"}, "mcp:docs", true},
		{[]string{"mcp:*"}, "mcp:docs/search", false},
		{[]string{"mcp:docs/s?arch"}, "mcp:docs/search", true},
		{[]string{"mcp:*/search"}, "mcp:docs/search", true},
		{[]string{"gpt-4o*"}, "mcp:docs", false},
	}
	for _, tc := range tests {
		if got := Allowed(tc.patterns, tc.model); got != tc.want {
			t.Errorf("Allowed(%q, %q) = %v", tc.patterns, tc.model, got)
		}
	}
	if m := AppendModel(nil, "docs", []byte("search")); string(m) != "mcp:docs/search" {
		t.Errorf("%s", m)
	}
	if m := AppendModel(nil, "docs", nil); string(m) != "mcp:docs" {
		t.Errorf("%s", m)
	}
}
