package openai

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func decodeErrorBody(t *testing.T, b []byte) errorBody {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("invalid JSON: %q", b)
	}
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil {
		t.Fatal(err)
	}
	return eb
}

func TestErrorAppendJSON(t *testing.T) {
	e := &Error{Status: 400, Type: TypeInvalidRequest, Code: "c1", Param: "messages[0].role", Message: "bad"}
	got := string(e.AppendJSON([]byte("x")))
	want := `x{"error":{"message":"bad","type":"invalid_request_error","param":"messages[0].role","code":"c1"}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	e = Internal("boom")
	got = string(e.AppendJSON(nil))
	want = `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAppendJSONStringEscaping(t *testing.T) {
	tests := []string{
		"",
		"plain ascii",
		`quote " and backslash \ and slash /`,
		"newline\n tab\t cr\r nul\x00 bell\x07 esc\x1b del\x7f",
		"unicode é 日本 🎉",
		"separators \u2028 \u2029",
		"model `gpt-4o` <script>&",
	}
	for _, s := range tests {
		b := AppendJSONString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		if got != s {
			t.Fatalf("round trip %q -> %s -> %q", s, b, got)
		}
	}
	// Invalid UTF-8 becomes U+FFFD, as encoding/json does.
	for _, s := range []string{"bad \xff byte", "\xc3", "trunc \xe6\x97"} {
		b := AppendJSONString(nil, s)
		want, _ := json.Marshal(s)
		var got, wantS string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		_ = json.Unmarshal(want, &wantS)
		if got != wantS {
			t.Fatalf("%q -> %q, want %q", s, got, wantS)
		}
	}
	if got := string(AppendJSONString(nil, "a\u2028b\x01")); got != `"a\u2028b\u0001"` {
		t.Fatalf("got %s", got)
	}
}

func TestConstructors(t *testing.T) {
	tests := []struct {
		e                     *Error
		status                int
		typ, code, param, msg string
	}{
		{BadRequest("model", "'model' is a required property"), 400, TypeInvalidRequest, "", "model", "'model' is a required property"},
		{BadRequest("n", "'%s' must be at most %d", "n", 8), 400, TypeInvalidRequest, "", "n", "'n' must be at most 8"},
		{BadRequest("", "%s", "100% literal"), 400, TypeInvalidRequest, "", "", "100% literal"},
		{NotFoundModel("gpt-9"), 404, TypeInvalidRequest, "model_not_found", "", "The model `gpt-9` does not exist or is not routed by this gateway."},
		{TooLarge(1024), 413, TypeInvalidRequest, "request_too_large", "", "The request body is too large: the limit is 1024 bytes."},
		{UpstreamUnreachable("dial tcp: refused"), 502, TypeUpstream, "upstream_unreachable", "", "dial tcp: refused"},
		{UpstreamTimeout("no answer in 30s"), 504, TypeUpstream, "upstream_timeout", "", "no answer in 30s"},
		{Internal("oops"), 500, TypeServer, "", "", "oops"},
	}
	for _, tc := range tests {
		e := tc.e
		if e.Status != tc.status || e.Type != tc.typ || e.Code != tc.code || e.Param != tc.param || e.Message != tc.msg {
			t.Errorf("got %+v, want %d %s %q %q %q", *e, tc.status, tc.typ, tc.code, tc.param, tc.msg)
		}
		eb := decodeErrorBody(t, e.AppendJSON(nil))
		if eb.Error.Message != tc.msg || eb.Error.Type != tc.typ {
			t.Errorf("body %+v", eb)
		}
		if (eb.Error.Code == nil) != (tc.code == "") || (eb.Error.Param == nil) != (tc.param == "") {
			t.Errorf("null rendering wrong for %+v", *e)
		}
	}
	if http.StatusText(NotFoundModel("x").Status) == "" {
		t.Fatal("bad status")
	}
}

func TestErrorIsAnError(t *testing.T) {
	var err error = UpstreamTimeout("slow")
	var e *Error
	if !errors.As(err, &e) || e.Status != 504 {
		t.Fatal("errors.As failed")
	}
	if got := err.Error(); got != "upstream_error (504): slow" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestAppendJSONDoesNotAllocate(t *testing.T) {
	e := BadRequest("messages", "'messages' must be an array")
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf = e.AppendJSON(buf[:0]) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
