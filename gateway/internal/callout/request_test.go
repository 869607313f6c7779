package callout

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Request
	}{
		{"minimal", "GET https://x/y\n\n", Request{Method: []byte("GET"), URL: []byte("https://x/y"), Body: []byte{}}},
		{"headers and body", "POST https://x/v1/moderations\nContent-Type: application/json\nX-A: b c\n\n{\"input\":\"hi\"}",
			Request{Method: []byte("POST"), URL: []byte("https://x/v1/moderations"),
				Header: [][2][]byte{{[]byte("Content-Type"), []byte("application/json")}, {[]byte("X-A"), []byte("b c")}},
				Body:   []byte(`{"input":"hi"}`)}},
		{"cache", "POST https://x/\nA: 1\n:cache 60000 mod:abc def\n\nbody\n\nmore",
			Request{Method: []byte("POST"), URL: []byte("https://x/"), Header: [][2][]byte{{[]byte("A"), []byte("1")}},
				CacheKey: []byte("mod:abc def"), CacheTTL: time.Minute, Body: []byte("body\n\nmore")}},
		{"empty header value", "GET https://x/\nA: \n\n", Request{Method: []byte("GET"), URL: []byte("https://x/"),
			Header: [][2][]byte{{[]byte("A"), []byte("")}}, Body: []byte{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
			if out := got.Append(nil); string(out) != tt.in {
				t.Errorf("Append = %q, want %q", out, tt.in)
			}
		})
	}
}

func TestParseRequestRefused(t *testing.T) {
	for _, in := range []string{
		"",
		"GET https://x/",                             // no LF
		"GET https://x/\n",                           // no blank line
		"GET\n\n",                                    // no URL
		" https://x/\n\n",                            // no method
		"G(T https://x/\n\n",                         // method not a token
		"GET https://x/ y\n\n",                       // space in URL
		"GET https://x/\x01\n\n",                     // control byte in URL
		"GET https://x/\nHost: y\n\n",                // framing header
		"GET https://x/\nContent-Length: 3\n\n",      // framing header
		"GET https://x/\nA:b\n\n",                    // no ": "
		"GET https://x/\nA b: c\n\n",                 // name not a token
		"GET https://x/\nA: b\rc\n\n",                // CR in value
		"GET https://x/\nA: b\x00\n\n",               // NUL in value
		"GET https://x/\n:cache 0 k\n\n",             // TTL 0
		"GET https://x/\n:cache 3600001 k\n\n",       // TTL above an hour
		"GET https://x/\n:cache -5 k\n\n",            // negative
		"GET https://x/\n:cache +5 k\n\n",            // sign
		"GET https://x/\n:cache 5\n\n",               // no key
		"GET https://x/\n:cache 5 \n\n",              // empty key
		"GET https://x/\n:cache 5 k\nA: b\n\n",       // header after :cache
		"GET https://x/\n:cache 5 k\n:cache 5 k\n\n", // two :cache lines
	} {
		if _, err := ParseRequest([]byte(in)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseRequest(%q) = %v, want ErrBadRequest", in, err)
		}
	}
}

// FuzzParseRequest checks that whatever ParseRequest accepts, Append
// writes back byte for byte, and that accepted headers pass ValidHeader.
func FuzzParseRequest(f *testing.F) {
	f.Add([]byte("POST https://x/v1/moderations\nContent-Type: application/json\n:cache 60000 k\n\n{}"))
	f.Add([]byte("GET http://127.0.0.1:1/\n\n"))
	f.Add([]byte("GET https://x/\nA: b: c\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := ParseRequest(in)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v does not wrap ErrBadRequest", err)
			}
			return
		}
		for _, h := range r.Header {
			if !ValidHeader(h[0], h[1]) {
				t.Fatalf("accepted header %q: %q", h[0], h[1])
			}
		}
		if r.CacheKey != nil && (r.CacheTTL <= 0 || r.CacheTTL > MaxCacheTTL) {
			t.Fatalf("accepted TTL %v", r.CacheTTL)
		}
		if out := r.Append(nil); !bytes.Equal(out, in) {
			// A leading zero in the TTL is the one spelling Append does
			// not keep; anything else is a parser bug.
			r2, err := ParseRequest(out)
			if err != nil || !reflect.DeepEqual(r2.Header, r.Header) || !bytes.Equal(r2.Body, r.Body) || r2.CacheTTL != r.CacheTTL {
				t.Fatalf("Append = %q, input %q", out, in)
			}
		}
	})
}
