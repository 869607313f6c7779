package mcp

import (
	"bytes"
	"encoding/base64"
	"testing"
)

func b64(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }

func TestParamRewrites(t *testing.T) {
	before := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mail","arguments":{"to":"a@x.io","cc":["a@x.io","b@y.io","keep"],"n":3,"o":{"deep":"c@z.io"}}}}`)
	after := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mail","arguments":{"to":"[EMAIL_1]","cc":["[EMAIL_1]","[EMAIL_2]","keep"],"n":3,"o":{"deep":"[EMAIL_3]"}}}}`)
	var r ParamRewrites
	r.Diff(before, after)
	for _, tc := range []struct {
		in, out string
		drop    bool
	}{
		{"a@x.io", b64("[EMAIL_1]"), false},
		{b64("a@x.io"), b64("[EMAIL_1]"), false},
		{"c@z.io", b64("[EMAIL_3]"), false},
		{"keep", "keep", false},
		{"3", "3", false},
		{"unrelated", "unrelated", false},
		{"=?base64?***?=", "", true},
	} {
		out, drop := r.Header(nil, []byte(tc.in))
		if drop != tc.drop || (!drop && string(out) != tc.out) {
			t.Errorf("%q: %q drop=%v, want %q drop=%v", tc.in, out, drop, tc.out, tc.drop)
		}
	}

	// One value rewritten in one place and kept in another: which one a
	// header mirrors cannot be told, so it is dropped.
	r.Diff([]byte(`{"params":{"arguments":{"a":"s","b":"s"}}}`), []byte(`{"params":{"arguments":{"a":"X","b":"s"}}}`))
	if _, drop := r.Header(nil, []byte("s")); !drop {
		t.Error("an ambiguous header was kept")
	}
	// Shapes that differ (not a rewrite of strings): every header dropped.
	for _, after := range []string{`{"params":{"arguments":{"a":"s"}}}`, `{"params":{"arguments":{"a":["s"],"b":"s"}}}`, `{"params":{"arguments":{"b":"s","a":"s"}}}`, `not json`} {
		r.Diff([]byte(`{"params":{"arguments":{"a":"s","b":"s"}}}`), []byte(after))
		if _, drop := r.Header(nil, []byte("unrelated")); !drop {
			t.Errorf("after %s: a header was kept", after)
		}
	}
}

// FuzzParamRewrites: any two bodies and any header value; Header never
// panics, and what it keeps is the value as sent or a rewritten string
// of the arguments, never a string the rewrite replaced.
func FuzzParamRewrites(f *testing.F) {
	f.Add([]byte(`{"params":{"arguments":{"to":"a@x.io"}}}`), []byte(`{"params":{"arguments":{"to":"[E]"}}}`), []byte("a@x.io"))
	f.Add([]byte(`{"params":{"arguments":{"to":["a",{"b":"c"}]}}}`), []byte(`{"params":{"arguments":{"to":["a",{"b":"d"}]}}}`), []byte(b64("c")))
	f.Fuzz(func(t *testing.T, before, after, value []byte) {
		var r ParamRewrites
		r.Diff(before, after)
		out, drop := r.Header(nil, value)
		if drop {
			return
		}
		dec, _ := decodeParam(value)
		if bytes.Equal(out, value) {
			for _, p := range r.pairs {
				if bytes.Equal(p[0], dec) && !bytes.Equal(p[1], dec) {
					t.Fatalf("kept %q, which the rewrite replaced by %q", value, p[1])
				}
			}
			return
		}
		got, ok := decodeParam(out)
		if !ok {
			t.Fatalf("wrote %q, which does not decode", out)
		}
		for _, p := range r.pairs {
			if bytes.Equal(p[0], dec) && bytes.Equal(p[1], got) {
				return
			}
		}
		t.Fatalf("%q became %q, no rewrite of it", value, out)
	})
}
