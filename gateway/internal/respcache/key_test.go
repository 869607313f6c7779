package respcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func mustKey(t testing.TB, scope, endpoint, body string) string {
	t.Helper()
	k, err := Key(nil, scope, endpoint, []byte(body))
	if err != nil {
		t.Fatalf("Key(%q, %q, %s): %v", scope, endpoint, body, err)
	}
	return string(k)
}

// TestKeyEqual: bodies that are the same request share a key.
func TestKeyEqual(t *testing.T) {
	t.Parallel()
	groups := []struct {
		name   string
		bodies []string
	}{
		{"key order", []string{`{"a":1,"b":2}`, `{"b":2,"a":1}`}},
		{"whitespace", []string{`{"a":[1,2],"b":{"c":null}}`, " \n{ \"a\" : [ 1 ,\t2 ] ,\r\n \"b\":{\"c\" :null} }\n "}},
		{"unicode escape", []string{`{"a":"A"}`, `{"a":"\u0041"}`, `{"\u0061":"\u0041"}`}},
		{"solidus", []string{`{"a":"/"}`, `{"a":"\/"}`}},
		{"non-ascii", []string{`{"a":"é😀"}`, `{"a":"\u00e9\ud83d\ude00"}`, `{"a":"\u00E9\uD83D\uDE00"}`}},
		{"control escapes", []string{`{"a":"\n\t\u001f"}`, `{"a":"\u000a\u0009\u001F"}`}},
		{"quote escapes", []string{`{"a":"\"\\"}`, `{"a":"\u0022\u005c"}`}},
		{"zero", []string{`{"temperature":0}`, `{"temperature":0.0}`, `{"temperature":0e0}`, `{"temperature":-0}`, `{"temperature":-0.000e-7}`, `{"temperature":0E+99}`}},
		{"one", []string{`{"t":1}`, `{"t":1.0}`, `{"t":10e-1}`, `{"t":1e0}`, `{"t":0.1e1}`, `{"t":1E+0}`, `{"t":100e-2}`, `{"t":0.00100e3}`}},
		{"fraction", []string{`{"t":1.5}`, `{"t":15e-1}`, `{"t":0.15E1}`, `{"t":150.0e-2}`}},
		{"negative", []string{`{"t":-2.50}`, `{"t":-25e-1}`, `{"t":-0.25e1}`}},
		{"big integer", []string{`{"seed":12345678901234567890}`, `{"seed":1234567890123456789e1}`, `{"seed":12345678901234567890.000}`}},
		{"huge exponent", []string{`{"x":1e999999999999999}`, `{"x":10e999999999999998}`}},
		{"removed fields", []string{
			`{"model":"m","messages":[]}`,
			`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			`{"user":"u1","model":"m","metadata":{"k":"v"},"store":true,"messages":[],"safety_identifier":"s","prompt_cache_key":"p","service_tier":"flex"}`,
			`{"model":"m","messages":[],"str\u0065am":false}`,
		}},
		{"nested", []string{
			`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"function":{"parameters":{"b":{"type":"string"},"a":{"type":"integer"}},"name":"f"},"type":"function"}]}`,
			`{"tools":[{"type":"function","function":{"name":"f","parameters":{"a":{"type":"integer"},"b":{"type":"string"}}}}],"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}]}`,
		}},
		{"empty containers", []string{`{"a":{},"b":[]}`, `{ "b" : [ ] , "a" : { } }`}},
	}
	for _, g := range groups {
		first := mustKey(t, "acme", "chat/completions", g.bodies[0])
		for _, b := range g.bodies[1:] {
			if k := mustKey(t, "acme", "chat/completions", b); k != first {
				t.Errorf("%s: %s and %s have different keys", g.name, g.bodies[0], b)
			}
		}
	}
}

// TestKeyDifferent: requests that differ never share a key.
func TestKeyDifferent(t *testing.T) {
	t.Parallel()
	type req struct{ scope, endpoint, body string }
	pairs := []struct {
		name string
		a, b req
	}{
		{"scope", req{"acme", "chat/completions", `{}`}, req{"globex", "chat/completions", `{}`}},
		{"endpoint", req{"acme", "chat/completions", `{}`}, req{"acme", "completions", `{}`}},
		{"scope/endpoint boundary", req{"a", "b:c", `{}`}, req{"a:b", "c", `{}`}},
		{"scope/endpoint boundary 2", req{"ab", "c", `{}`}, req{"a", "bc", `{}`}},
		{"scope/body boundary", req{"a", "", `{}`}, req{"", "a", `{}`}},
		{"big integers one apart (equal as float64)", req{"s", "e", `{"seed":12345678901234567890}`}, req{"s", "e", `{"seed":12345678901234567891}`}},
		{"decimals equal as float64", req{"s", "e", `{"t":0.1}`}, req{"s", "e", `{"t":0.10000000000000001}`}},
		{"sign", req{"s", "e", `{"t":1}`}, req{"s", "e", `{"t":-1}`}},
		{"exponent", req{"s", "e", `{"t":1e400}`}, req{"s", "e", `{"t":1e401}`}},
		{"scale", req{"s", "e", `{"t":1}`}, req{"s", "e", `{"t":10}`}},
		{"number vs string", req{"s", "e", `{"t":1}`}, req{"s", "e", `{"t":"1"}`}},
		{"true vs string", req{"s", "e", `{"t":true}`}, req{"s", "e", `{"t":"true"}`}},
		{"null vs false", req{"s", "e", `{"t":null}`}, req{"s", "e", `{"t":false}`}},
		{"empty string vs absent", req{"s", "e", `{"t":""}`}, req{"s", "e", `{}`}},
		{"array order", req{"s", "e", `{"t":[1,2]}`}, req{"s", "e", `{"t":[2,1]}`}},
		{"nul in string", req{"s", "e", `{"t":"a\u0000"}`}, req{"s", "e", `{"t":"a"}`}},
		{"case", req{"s", "e", `{"t":"A"}`}, req{"s", "e", `{"t":"a"}`}},
		{"nested stream kept", req{"s", "e", `{"x":{"stream":true}}`}, req{"s", "e", `{"x":{}}`}},
		{"message content", req{"s", "e", `{"messages":[{"role":"user","content":"hi"}]}`}, req{"s", "e", `{"messages":[{"role":"user","content":"hi "}]}`}},
		{"temperature", req{"s", "e", `{"temperature":0}`}, req{"s", "e", `{"temperature":0.01}`}},
		{"array vs object", req{"s", "e", `{"t":[]}`}, req{"s", "e", `{"t":{}}`}},
		{"key vs value", req{"s", "e", `{"a":"b"}`}, req{"s", "e", `{"b":"a"}`}},
		{"nesting", req{"s", "e", `{"a":[[1]]}`}, req{"s", "e", `{"a":[1]}`}},
	}
	for _, p := range pairs {
		ka := mustKey(t, p.a.scope, p.a.endpoint, p.a.body)
		kb := mustKey(t, p.b.scope, p.b.endpoint, p.b.body)
		if ka == kb {
			t.Errorf("%s: %+v and %+v share the key %s", p.name, p.a, p.b, ka)
		}
	}
}

func TestKeyForm(t *testing.T) {
	t.Parallel()
	k, err := Key([]byte("pre:"), "acme", "chat/completions", []byte(`{"model":"m"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(k, []byte("pre:")) || len(k) != 4+64 {
		t.Fatalf("key %q: want pre: and 64 hex digits", k)
	}
	for _, c := range k[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			t.Fatalf("key %q is not lowercase hex", k)
		}
	}
}

func TestKeyRefused(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return `{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	bad := map[string]string{
		"array":              `[]`,
		"string":             `"x"`,
		"empty":              ``,
		"number":             `1`,
		"duplicate":          `{"a":1,"a":2}`,
		"duplicate escaped":  `{"a":1,"\u0061":2}`,
		"duplicate nested":   `{"x":{"b":1,"b":1}}`,
		"duplicate removed":  `{"stream":true,"stream":false}`,
		"too deep":           deep(64),
		"leading zero":       `{"a":01}`,
		"dot no digit":       `{"a":1.}`,
		"leading dot":        `{"a":.5}`,
		"plus":               `{"a":+1}`,
		"empty exponent":     `{"a":1e}`,
		"exponent sign only": `{"a":1e+}`,
		"minus only":         `{"a":-}`,
		"huge exponent":      `{"a":1e1234567890123456}`,
		"lone high":          `{"a":"\ud800"}`,
		"lone low":           `{"a":"\udc00x"}`,
		"high then not low":  `{"a":"\ud800\u0041"}`,
		"invalid utf-8":      "{\"a\":\"\xff\"}",
		"raw control":        "{\"a\":\"\n\"}",
		"bad escape":         `{"a":"\x"}`,
		"short escape":       `{"a":"\u12"}`,
		"unterminated":       `{"a":"b`,
		"trailing data":      `{}x`,
		"two objects":        `{} {}`,
		"bad literal":        `{"a":tru}`,
		"trailing comma":     `{"a":1,}`,
		"lone comma":         `{,}`,
		"missing colon":      `{"a" 1}`,
		"unquoted key":       `{a:1}`,
		"unclosed":           `{"a":[1,2}`,
	}
	for name, body := range bad {
		if _, err := Key(nil, "s", "e", []byte(body)); !errors.Is(err, ErrUncacheable) {
			t.Errorf("%s: %q: err %v, want ErrUncacheable", name, body, err)
		}
	}
	if _, err := Key(nil, "s", "e", []byte(deep(63))); err != nil {
		t.Errorf("64 levels refused: %v", err)
	}
	big := []byte(`{"a":"` + strings.Repeat("x", MaxBodyBytes) + `"}`)
	if _, err := Key(nil, "s", "e", big); !errors.Is(err, ErrUncacheable) {
		t.Errorf("body over the cap: err %v", err)
	}
}

var keySeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"temperature":0.0,"seed":12345678901234567890}`,
	`{"a":"\u0041\ud83d\ude00\n","b":[1,-0,1e5,1.50E-3,{"c":null}],"stream":true,"user":"u"}`,
	`{"x":{"y":{"z":[true,false,null,"",{}]}}}`,
	`{"\u00e9":"<>&\u2028"}`,
	`{}`,
}

// FuzzKey: Key never panics, accepts only valid JSON, and a body encoding/json
// reads and writes again (keys sorted, strings re-escaped, numbers as
// written) has the same key.
func FuzzKey(f *testing.F) {
	for _, s := range keySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		k, err := Key(nil, "s", "chat/completions", body)
		if err != nil {
			if !errors.Is(err, ErrUncacheable) {
				t.Fatalf("error %v does not wrap ErrUncacheable", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("Key accepted invalid JSON %q", body)
		}
		d := json.NewDecoder(bytes.NewReader(body))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("Key accepted %q, encoding/json refuses: %v", body, err)
		}
		re, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := Key(nil, "s", "chat/completions", re)
		if err != nil {
			t.Fatalf("re-serialised %q refused: %v", re, err)
		}
		if !bytes.Equal(k, k2) {
			t.Fatalf("%q and its re-serialisation %q have different keys", body, re)
		}
	})
}

// chatBody is a realistic chat request of about 2 KB.
func chatBody() []byte {
	body := map[string]any{
		"model":       "gpt-4o-mini",
		"temperature": 0.2,
		"max_tokens":  512,
		"stream":      true,
		"user":        "user-1234",
		"messages": []map[string]any{
			{"role": "system", "content": strings.Repeat("You are a helpful assistant. ", 20)},
			{"role": "user", "content": strings.Repeat("Summarise the following text please. ", 25)},
			{"role": "assistant", "content": "Sure, here is a summary."},
			{"role": "user", "content": "Thanks, now in French \u00e9\u00e8."},
		},
		"tools": []map[string]any{{"type": "function", "function": map[string]any{
			"name": "get_weather", "description": "Weather of a city",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string"}, "unit": map[string]any{"type": "string", "enum": []string{"c", "f"}},
			}, "required": []string{"city"}},
		}}},
	}
	b, _ := json.Marshal(body)
	return b
}

func BenchmarkKey(b *testing.B) {
	body := chatBody()
	if len(body) < 1800 || len(body) > 2600 {
		b.Fatalf("body of %d bytes, want about 2 KB", len(body))
	}
	dst := make([]byte, 0, 64)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		dst, err = Key(dst[:0], "acme", "chat/completions", body)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestKeyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	body := chatBody()
	dst := make([]byte, 0, 64)
	Key(dst, "acme", "chat/completions", body) // warm the pool
	n := testing.AllocsPerRun(100, func() {
		dst, _ = Key(dst[:0], "acme", "chat/completions", body)
	})
	if n > 2 {
		t.Errorf("Key allocates %v times a call, want at most 2", n)
	}
}
