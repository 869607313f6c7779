package mcp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestResolveEndpoint(t *testing.T) {
	tests := []struct {
		base, ref, want string // want "": refused
	}{
		{"http://h:9000/sse?x=1", "/messages?sessionId=a", "/messages?sessionId=a"},
		{"http://h:9000/sse?x=1", "?sessionid=a", "/sse?sessionid=a"},
		{"http://h:9000/v1/sse", "messages", "/v1/messages"},
		{"http://h:9000/sse", " /m \r", "/m"}, // surrounding blanks, as a data line may carry
		{"http://h:9000/sse", "http://h:9000/m", "/m"},
		{"http://h:9000/sse", "HTTP://H:9000/m", "/m"},
		{"http://h/sse", "http://h:80/m", "/m"},
		{"https://h/sse", "https://h:443/m?", "/m?"},
		{"http://h:9000/sse", "/m#frag", "/m"},
		{"http://h:9000/sse", "/a%20b?q=%2F", "/a%20b?q=%2F"},
		{"http://h:9000/sse", "", "/sse"},
		{"http://h:9000/sse", "http://h/m", ""},            // another port
		{"http://h:9000/sse", "https://h:9000/m", ""},      // another scheme
		{"http://h:9000/sse", "//evil:9000/m", ""},         // another host, scheme-relative
		{"http://h:9000/sse", "http://evil:9000/m", ""},    // another host
		{"http://h:9000/sse", "http://u@h:9000/m", ""},     // user info
		{"http://h:9000/sse", "http://h:9000/m?q=a b", ""}, // no request line carries it
		{"http://h:9000/sse", "http://[::1", ""},           // not a URI reference
		{"http://h:9000/sse", "/" + strings.Repeat("a", MaxEndpointTarget), ""},
	}
	for _, tc := range tests {
		got, err := ResolveEndpoint(mustURL(t, tc.base), tc.ref)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrEndpoint) {
			t.Errorf("ResolveEndpoint(%q, %q) = %q, %v; want %q", tc.base, tc.ref, got, err, tc.want)
		}
	}
}

// testKey signs the tests' tokens.
var testKey = NewEndpointKey("the tests' endpoint key, 32 bytes or more")

func TestEndpointToken(t *testing.T) {
	for _, target := range []string{"/", "/messages?sessionId=abc", "/a%20b?q=%2F&x=~"} {
		tok := testKey.AppendToken(nil, "docs", target)
		if bytes.ContainsAny(tok, "+/=?&#%") {
			t.Errorf("token %q is not query-safe", tok)
		}
		if got, err := testKey.ParseToken(tok, "docs"); got != target || err != nil {
			t.Errorf("%q: token %q read as %q, %v", target, tok, got, err)
		}
		// A replica with the same secret reads it; another key, or
		// another server's name, does not.
		if got, err := NewEndpointKey("the tests' endpoint key, 32 bytes or more").ParseToken(tok, "docs"); got != target || err != nil {
			t.Errorf("%q: another replica read %q, %v", target, got, err)
		}
		if got, err := NewEndpointKey("").ParseToken(tok, "docs"); !errors.Is(err, ErrEndpoint) {
			t.Errorf("%q: read with another key as %q", target, got)
		}
		if got, err := testKey.ParseToken(tok, "other"); !errors.Is(err, ErrEndpoint) {
			t.Errorf("%q: read for another server as %q", target, got)
		}
	}
	signed := testKey.AppendToken(nil, "docs", "/messages?sessionId=abc")
	dot := bytes.LastIndexByte(signed, '.')
	forged := append(base64.RawURLEncoding.AppendEncode(nil, []byte("/admin/delete")), signed[dot:]...)
	for _, tok := range []string{
		"",
		"!!",
		".",
		string(base64.RawURLEncoding.AppendEncode(nil, []byte("/messages"))), // unsigned
		string(forged), // another path under a real signature
		string(signed[:len(signed)-2]),
		string(signed) + "AA",
		string(testKey.AppendToken(nil, "docs", "messages")), // not a path
		string(testKey.AppendToken(nil, "docs", "/a b")),
		string(testKey.AppendToken(nil, "docs", "/a\r\nHost: evil")),
		string(testKey.AppendToken(nil, "docs", "/a#b")),
		string(testKey.AppendToken(nil, "docs", "/"+strings.Repeat("a", MaxEndpointTarget))),
	} {
		if got, err := testKey.ParseToken([]byte(tok), "docs"); !errors.Is(err, ErrEndpoint) {
			t.Errorf("token %q read as %q", tok, got)
		}
	}
}

func TestRewriteEndpointEvent(t *testing.T) {
	base := mustURL(t, "http://h:9000/sse")
	const msgURL = "/mcp/docs/message?endpoint="
	tok := func(target string) string { return string(testKey.AppendToken(nil, "docs", target)) }
	tests := []struct {
		name, ev, want, target string
		refused                bool
	}{
		{"the go-sdk's", "event: endpoint\ndata: /sse?sessionid=ABC\n\n",
			"event: endpoint\ndata: " + msgURL + tok("/sse?sessionid=ABC") + "\n\n", "/sse?sessionid=ABC", false},
		{"other lines kept", "id: 1\r\nevent: endpoint\r\n: hi\r\ndata: /m?s=1\r\nretry: 10\r\n\r\n",
			"id: 1\r\nevent: endpoint\r\n: hi\r\ndata: " + msgURL + tok("/m?s=1") + "\nretry: 10\r\n\r\n", "/m?s=1", false},
		{"no spaces", "event:endpoint\ndata:/m\n\n", "event:endpoint\ndata: " + msgURL + tok("/m") + "\n\n", "/m", false},
		{"two data lines", "event: endpoint\ndata: /m\ndata: x\n\n", "", "", true}, // "/m\nx": a control character
		{"a message", "event: message\ndata: {}\n\n", "", "", false},
		{"no event field", "data: /m\n\n", "", "", false},
		{"the last event field counts", "event: endpoint\nevent: message\ndata: http://evil/\n\n", "", "", false},
		{"an endpoint without data", "event: endpoint\n\n", "", "", false},
		{"another origin", "event: endpoint\ndata: http://evil:9000/m\n\n", "", "", true},
		{"another port, the last event field", "event: message\nevent: endpoint\ndata: http://h:9001/m\n\n", "", "", true},
		{"a CR line end", "event: message\rdata: http://evil/\revent: endpoint\n\n", "", "", true},
		{"a CR line end in a message", "event: message\ndata: {}\rdata: {}\n\n", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, target, err := RewriteEndpointEvent([]byte("x"), []byte(tc.ev), base, msgURL, testKey, "docs")
			if tc.refused {
				if !errors.Is(err, ErrEndpoint) || string(out) != "x" || target != "" {
					t.Fatalf("not refused: %q, %q, %v", out, target, err)
				}
				return
			}
			if err != nil || string(out) != "x"+tc.want || target != tc.target {
				t.Fatalf("got %q, %q, %v\nwant %q, %q", out, target, err, "x"+tc.want, tc.target)
			}
		})
	}
}
