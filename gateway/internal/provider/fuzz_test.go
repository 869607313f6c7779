package provider

import (
	"net/url"
	"testing"
)

// FuzzAppendPathEscaped checks the segment escaping against net/url: the
// result unescapes to the input, holds no "/" (one segment), and only
// unreserved characters or %XX.
func FuzzAppendPathEscaped(f *testing.F) {
	for _, s := range []string{"gpt4o-prod", "a b/c:d%é", "anthropic.claude-3-5-sonnet-20240620-v1:0", "", "~._-", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := string(AppendPathEscaped([]byte("x"), s))[1:]
		back, err := url.PathUnescape(got)
		if err != nil || back != s {
			t.Fatalf("%q escaped to %q, which unescapes to %q (%v)", s, got, back, err)
		}
		for i := 0; i < len(got); i++ {
			c := got[i]
			unreserved := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
			if !unreserved && c != '%' {
				t.Fatalf("%q escaped to %q: %q left as is", s, got, c)
			}
		}
	})
}
