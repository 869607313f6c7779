package plugintest

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk"
)

// FuzzParseHTTPCall: the harness reads back whatever the SDK writes
// (sdk.AppendHTTPRequest), field for field, and never panics on bytes a
// plugin wrote by hand.
func FuzzParseHTTPCall(f *testing.F) {
	f.Add("POST", "https://x.test/a", "X-A", "v", "key", int64(1000), []byte("body\n\nmore"), []byte("GET / \n\n"))
	f.Add("", "http://h/", "X", "", "", int64(0), []byte(nil), []byte(":cache 1 k\n\n"))
	f.Fuzz(func(t *testing.T, method, url, name, value, key string, ttlMS int64, body, raw []byte) {
		parseHTTPCall(raw)
		req := sdk.HTTPRequest{Method: method, URL: url, Header: [][2]string{{name, value}}, Body: body,
			CacheKey: key, CacheTTL: time.Duration(ttlMS) * time.Millisecond}
		b, err := sdk.AppendHTTPRequest(nil, req)
		if err != nil {
			return
		}
		c, err := parseHTTPCall(b)
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if (method != "" && c.Method != method) || c.URL != url || c.Header[name] != value || c.Body != string(body) {
			t.Fatalf("%q read as %+v", b, c)
		}
		if key != "" && (c.CacheKey != key || c.CacheTTL != req.CacheTTL.Truncate(time.Millisecond)) {
			t.Fatalf("cache %q %v, want %q %v", c.CacheKey, c.CacheTTL, key, req.CacheTTL)
		}
	})
}
