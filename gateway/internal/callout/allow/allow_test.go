package allow

import (
	"errors"
	"strings"
	"testing"
)

func TestAllows(t *testing.T) {
	tests := []struct {
		prefix, target string
		want           bool
	}{
		{"https://api.example.com/v1/moderations", "https://api.example.com/v1/moderations", true},
		{"https://api.example.com/v1/moderations", "https://api.example.com/v1/moderations/x?y=1", true},
		{"https://api.example.com/v1/moderations", "https://api.example.com/v1/moderationsX", false},
		{"https://api.example.com/v1/", "https://api.example.com/v1/anything", true},
		{"https://api.example.com/v1/", "https://api.example.com/v1", false},
		{"https://api.example.com/v1", "https://api.example.com/v2", false},
		{"https://api.example.com", "https://api.example.com/", true},
		{"https://api.example.com", "https://api.example.com", true},
		{"https://api.example.com", "https://API.Example.com/x", true},
		{"https://api.example.com", "http://api.example.com/x", false},
		{"https://api.example.com", "https://api.example.com:443/x", true},
		{"https://api.example.com", "https://api.example.com:8443/x", false},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/x", true},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.1:8081/v1/x", false},
		{"http://127.0.0.1:8080/v1", "http://127.0.0.2:8080/v1/x", false},
		{"https://api.example.com", "https://api.example.com.evil.net/x", false},
		{"https://api.example.com/v1", "https://api.example.com/v1%2Fx", true}, // decoded: /v1/x
		{"https://api.example.com/v1/a", "https://api.example.com/v1/b", false},
		{"http://[::1]:9000/v1", "http://[::1]:9000/v1/x", true},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+" "+tt.target, func(t *testing.T) {
			p, err := Parse(tt.prefix)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.prefix, err)
			}
			u, err := Target(tt.target)
			if err != nil {
				t.Fatalf("Target(%q): %v", tt.target, err)
			}
			if got := p.Allows(u); got != tt.want {
				t.Errorf("Allows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTargetRefused(t *testing.T) {
	tests := []struct {
		target string
		want   error
	}{
		{"ftp://api.example.com/x", ErrScheme},
		{"file:///etc/passwd", ErrScheme},
		{"https://user:pw@api.example.com/x", ErrUserinfo},
		{"https://user@api.example.com/x", ErrUserinfo},
		{"https://api.example.com/x#frag", ErrFragment},
		{"https://api.example.com/v1/../admin", ErrDotPath},
		{"https://api.example.com/v1/%2e%2e/admin", ErrDotPath},
		{"https://api.example.com/v1/./x", ErrDotPath},
		{`https://api.example.com/v1/..\admin`, ErrDotPath},
		{"https:///x", ErrNoHost},
		{"https:api.example.com", ErrNoHost},
		{"/relative", ErrScheme},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			_, err := Target(tt.target)
			if !errors.Is(err, tt.want) {
				t.Errorf("Target(%q) = %v, want %v", tt.target, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"https://api.example.com:0/x", "https://api.example.com:99999/x", "https://api.example.com:+80/x"} {
		if _, err := Target(bad); err == nil {
			t.Errorf("Target(%q) accepted a bad port", bad)
		}
	}
}

func TestParseRefused(t *testing.T) {
	for _, s := range []string{"https://api.example.com/v1?key=1", "https://api.example.com/a/../b", "ftp://x/", "https://u@x/", ""} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestRedact(t *testing.T) {
	if got := Redact("https://x/y?key=secret#f"); got != "https://x/y" {
		t.Errorf("Redact = %q", got)
	}
	_, err := Target("ftp://x/y?key=secret")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %v shows the query", err)
	}
}

// FuzzAllows cross-checks Allows against its definition: an allowed target
// has the prefix's scheme, no dot segment, and a path that begins with the
// prefix's.
func FuzzAllows(f *testing.F) {
	f.Add("https://api.example.com/v1", "https://api.example.com/v1/x")
	f.Add("http://127.0.0.1:80/", "http://127.0.0.1/a/../b")
	f.Add("https://a/v1", "https://a/v1%2F..%2Fb")
	f.Fuzz(func(t *testing.T, prefix, target string) {
		p, err := Parse(prefix)
		if err != nil {
			return
		}
		u, err := Target(target)
		if err != nil || !p.Allows(u) {
			return
		}
		if u.Scheme != p.scheme || dotSegments(u.Path) || u.User != nil || u.Fragment != "" {
			t.Fatalf("%q allowed %q", prefix, target)
		}
		path := u.Path
		if path == "" {
			path = "/"
		}
		if !strings.HasPrefix(path, p.path) {
			t.Fatalf("%q allowed %q: path outside", prefix, target)
		}
	})
}
