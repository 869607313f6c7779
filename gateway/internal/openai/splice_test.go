package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// decodeObject decodes b with encoding/json, keeping numbers exact.
func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	if dec.More() {
		t.Fatalf("trailing data in %q", b)
	}
	return m
}

// checkIncludeUsage verifies out is in against encoding/json: include_usage
// is true, other stream_options members and all other top-level members
// are unchanged.
func checkIncludeUsage(t testing.TB, in, out []byte) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("invalid JSON output %q from %q", out, in)
	}
	before, after := decodeObject(t, in), decodeObject(t, out)
	so, ok := after["stream_options"].(map[string]any)
	if !ok || so["include_usage"] != true {
		t.Fatalf("stream_options = %#v in %q", after["stream_options"], out)
	}
	want := map[string]any{}
	if old, ok := before["stream_options"].(map[string]any); ok {
		for k, v := range old {
			want[k] = v
		}
	}
	want["include_usage"] = true
	if !reflect.DeepEqual(so, want) {
		t.Fatalf("stream_options = %#v, want %#v", so, want)
	}
	delete(before, "stream_options")
	delete(after, "stream_options")
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("other members changed:\n in  %q\n out %q", in, out)
	}
}

func TestAppendWithIncludeUsage(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"fast path", `{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"fast path spaces", " {\"model\":\"m\" } \n", " {\"model\":\"m\" ,\"stream_options\":{\"include_usage\":true}} \n"},
		{"empty object", `{}`, `{"stream_options":{"include_usage":true}}`},
		{"empty object spaces", `{ }`, `{ "stream_options":{"include_usage":true}}`},
		{"existing false", `{"stream":true,"stream_options":{"include_usage":false},"n":1}`, `{"stream":true,"stream_options":{"include_usage":true},"n":1}`},
		{"existing true", `{"stream_options":{"include_usage":true}}`, `{"stream_options":{"include_usage":true}}`},
		{"existing without field", `{"stream_options":{"x":1}}`, `{"stream_options":{"x":1,"include_usage":true}}`},
		{"existing empty", `{"stream_options": { } ,"a":2}`, `{"stream_options": { "include_usage":true} ,"a":2}`},
		{"existing null", `{"stream_options":null,"a":[1,{"b":"}"}]}`, `{"stream_options":{"include_usage":true},"a":[1,{"b":"}"}]}`},
		{"include usage null", `{"stream_options":{"include_usage" : null}}`, `{"stream_options":{"include_usage" : true}}`},
		{"duplicates", `{"stream_options":{"include_usage":false},"stream_options":{"include_usage":false,"include_usage":null}}`,
			`{"stream_options":{"include_usage":true},"stream_options":{"include_usage":true,"include_usage":true}}`},
		{"escaped key", `{"stream\u005foptions":{"include\u005Fusage":false}}`, `{"stream\u005foptions":{"include\u005Fusage":true}}`},
		{"escaped lookalike", `{"stream\u005fopt":1,"x":"\u00e9"}`, `{"stream\u005fopt":1,"x":"\u00e9","stream_options":{"include_usage":true}}`},
		{"mention in content", `{"messages":[{"role":"user","content":"set \"stream_options\": {}"}]}`,
			`{"messages":[{"role":"user","content":"set \"stream_options\": {}"}],"stream_options":{"include_usage":true}}`},
		{"escaped quotes in strings", `{"a":"x\\","stream_options":{"k":"\"}"}}`, `{"a":"x\\","stream_options":{"k":"\"}","include_usage":true}}`},
		{"nested stream_options not top-level", `{"meta":{"stream_options":{"include_usage":false}},"\u0061":1}`,
			`{"meta":{"stream_options":{"include_usage":false}},"\u0061":1,"stream_options":{"include_usage":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendWithIncludeUsage([]byte("prefix:"), []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got, ok := bytes.CutPrefix(out, []byte("prefix:"))
			if !ok {
				t.Fatalf("dst prefix lost: %q", out)
			}
			if string(got) != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			checkIncludeUsage(t, []byte(tc.in), got)
		})
	}
}

func TestAppendWithIncludeUsageRealBody(t *testing.T) {
	out, err := AppendWithIncludeUsage(nil, []byte(chatBody))
	if err != nil {
		t.Fatal(err)
	}
	checkIncludeUsage(t, []byte(chatBody), out)
	if !bytes.HasPrefix(out, []byte(strings.TrimSuffix(chatBody, "}"))) {
		t.Fatal("fast path re-encoded the body")
	}
}

func TestAppendWithIncludeUsageMalformed(t *testing.T) {
	for _, in := range []string{
		``, `   `, `[]`, `"x"`, `{`, `}`, `{"a":1`, `{"stream_options":{"a":1}`, `{"stream_options":}`,
		`{"stream_options":{"include_usage"}}`, `{"stream_options" 1}`, `{"stream_options":1 2}`,
		`{"stream_options":"unterminated}`, `{"stream_options":{}}}`, `{"a":1,}` + "x",
	} {
		out, err := AppendWithIncludeUsage([]byte("keep"), []byte(in))
		if !errors.Is(err, ErrNotObject) {
			t.Errorf("%q: err = %v, out %q", in, err, out)
		}
		if string(out) != "keep" {
			t.Errorf("%q: dst modified: %q", in, out)
		}
	}
}

func TestKeyEquals(t *testing.T) {
	for raw, want := range map[string]bool{
		`stream_options`:      true,
		`stream\u005foptions`: true,
		`\u0073\u0074\u0072\u0065\u0061\u006d\u005f\u006f\u0070\u0074\u0069\u006f\u006e\u0073`: true,
		`stream_option`:        false,
		`stream_optionss`:      false,
		`stream\u005foption`:   false,
		`stream\u005foptionsx`: false,
		`stream\u00`:           false,
		`stream\u005g`:         false,
		`stream\x5foptions`:    false,
		`stream\/options`:      false,
		`stream\u015foptions`:  false,
		`\"stream_options`:     false,
	} {
		if got := keyEquals([]byte(raw), "stream_options"); got != want {
			t.Errorf("keyEquals(%s) = %v", raw, got)
		}
	}
	if !keyEquals([]byte(`a\/\"\\\b\f\n\r\t`), "a/\"\\\b\f\n\r\t") {
		t.Error("simple escapes")
	}
}

func TestAppendWithIncludeUsageDoesNotAllocate(t *testing.T) {
	slow := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`)
	buf := make([]byte, 0, 4096)
	for _, body := range [][]byte{[]byte(chatBody), slow} {
		n := testing.AllocsPerRun(100, func() {
			var err error
			if buf, err = AppendWithIncludeUsage(buf[:0], body); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Fatalf("%v allocs", n)
		}
	}
}
