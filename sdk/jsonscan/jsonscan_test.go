package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// decode reads the document in data into the values encoding/json (with
// UseNumber) gives: map[string]any (the last copy of a key wins),
// []any, string, json.Number, bool, nil.
func decode(data []byte) (any, error) {
	var s Scanner
	s.Reset(data)
	v, err := value(&s)
	if err == nil {
		err = s.End()
	}
	return v, err
}

func value(s *Scanner) (any, error) {
	switch s.Peek() {
	case '{':
		m := map[string]any{}
		err := s.Object(func(key []byte) error {
			k := string(key)
			v, err := value(s)
			m[k] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := s.Array(func(int) error {
			v, err := value(s)
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		b, err := s.Str()
		return string(b), err
	case 't':
		return true, s.Literal("true")
	case 'f':
		return false, s.Literal("false")
	case 'n':
		return nil, s.Literal("null")
	}
	n, err := s.Number()
	return json.Number(n), err
}

func oracle(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

var corpus = []string{
	`{"model":"m","messages":[{"role":"user","content":"hello"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a\"b\\c\/d\b\f\n\r\t"}]}]}`,
	`{"messages":[{"content":"\ud83d\ude00 \ud83d x \ude00 \ud83d\u0041 \u00e9 \uD83D\uDE00"}]}`,
	"{\"messages\":[{\"content\":\"bad \xff\xfe utf8 \xe2\x82\"}]}",
	`{"prompt":["a",1,true,null,{"text":"t"},[["deep"]]],"input":-1.5e+3,"suffix":"s"}`,
	`{"stream":true,"max_tokens":10,"temperature":0.2,"messages":[],"prompt":{},"input":[]}`,
	` { "input" : [ "spaced" , { "content" : [ { "text" : "x" } ] } ] } `,
	`{"a":1,"a":2,"k\u0065y":0.5E-7}`,
	`[0, -0, 1e9, "x", [], {}]`,
	`"just a string"`,
	`null`,
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, doc := range corpus {
		got, err := decode([]byte(doc))
		want, werr := oracle([]byte(doc))
		if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got  %#v %v\n want %#v %v", doc, got, err, want, werr)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"empty", ``, "expected a value at offset 0"},
		{"unterminated object", `{"a":1`, "expected ',' or '}' at offset 6"},
		{"unterminated string", `{"a":"x`, "unterminated string"},
		{"control character", "\"a\x01\"", "control character in string"},
		{"bad escape", `"\x"`, "bad escape"},
		{"bad unicode escape", `"\u12g4"`, `bad \u escape`},
		{"leading zero", `01`, "bad number"},
		{"bare minus", `-`, "expected a value"},
		{"bad fraction", `1.`, "bad number"},
		{"bad exponent", `1e+`, "bad number"},
		{"bad literal", `nul`, "expected a value"},
		{"member name", `{1:2}`, "expected a member name"},
		{"trailing data", `{} {}`, "unexpected data after the value"},
		{"trailing comma", `[1,]`, "expected a value"},
		{"too deep", strings.Repeat("[", DefaultMaxDepth+1) + strings.Repeat("]", DefaultMaxDepth+1), ErrDepth.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if json.Valid([]byte(tt.doc)) && !errors.Is(err, ErrDepth) {
				t.Fatalf("encoding/json accepts %q", tt.doc)
			}
		})
	}
}

func TestMaxDepth(t *testing.T) {
	doc := []byte(strings.Repeat("[", 300) + strings.Repeat("]", 300))
	s := Scanner{MaxDepth: 300}
	s.Reset(doc)
	if err := s.Skip(); err != nil {
		t.Fatalf("300 levels with MaxDepth 300: %v", err)
	}
	s.MaxDepth = 299
	s.Reset(doc)
	if err := s.Skip(); !errors.Is(err, ErrDepth) {
		t.Fatalf("300 levels with MaxDepth 299: %v", err)
	}
}

func TestOffsetAndSeek(t *testing.T) {
	var s Scanner
	s.Reset([]byte(`{"input": {"b": [1, 2]} , "z": 3}`))
	var raw string
	var again []byte
	err := s.Object(func(key []byte) error {
		if string(key) != "input" {
			return s.Skip()
		}
		s.Peek()
		start := s.Offset()
		if err := s.Skip(); err != nil {
			return err
		}
		raw = string(s.data[start:s.Offset()])
		end := s.Offset()
		s.Seek(start)
		err := s.Object(func(k []byte) error { again = append(again, k...); return s.Skip() })
		if s.Offset() != end {
			t.Errorf("reread ends at %d, want %d", s.Offset(), end)
		}
		return err
	})
	if err != nil || raw != `{"b": [1, 2]}` || string(again) != "b" {
		t.Fatalf("raw %q again %q err %v", raw, again, err)
	}
}

func TestNoAllocations(t *testing.T) {
	doc := []byte(`{"messages":[{"role":"user","content":"caf\u00e9 \"quoted\""},{"content":[{"text":"plain"}]}],"n":[1.5,true,null]}`)
	var s Scanner
	var total int
	walk := func() {
		s.Reset(doc)
		_ = s.Object(func([]byte) error {
			return s.Skip()
		})
		s.Reset(doc)
		_ = s.Object(func(key []byte) error {
			if string(key) != "messages" {
				return s.Skip()
			}
			return s.Array(func(int) error {
				return s.Object(func([]byte) error {
					if s.Peek() == '"' {
						b, err := s.Str()
						total += len(b)
						return err
					}
					return s.Skip()
				})
			})
		})
	}
	walk() // grows the string buffer
	if n := testing.AllocsPerRun(100, walk); n != 0 {
		t.Fatalf("%v allocations per walk", n)
	}
	if total == 0 {
		t.Fatal("no strings read")
	}
}

func FuzzScanner(f *testing.F) {
	for _, doc := range corpus {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := decode(doc)
		want, werr := oracle(doc)
		var s Scanner
		s.Reset(doc)
		serr := s.Skip()
		if serr == nil {
			serr = s.End()
		}
		if (serr == nil) != (err == nil) {
			t.Fatalf("%q: Skip says %v, reading the values %v", doc, serr, err)
		}
		if !json.Valid(doc) {
			if err == nil {
				t.Fatalf("%q: encoding/json refuses it, the scanner read %#v", doc, got)
			}
			return
		}
		if errors.Is(err, ErrDepth) {
			return
		}
		if err != nil || werr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got  %#v %v\n want %#v %v", doc, got, err, want, werr)
		}
	})
}
