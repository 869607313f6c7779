package convo

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var cases = []struct{ name, body string }{
	{"chat_string", `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`},
	{"chat_parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://x/y.png"}},{"text":"second","type":"text"}]}]}`},
	{"chat_tool_calls", `{"messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"c2","type":"function","function":{"arguments":"{}","name":"now"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"18C, sunny"},` +
		`{"content":[{"type":"text","text":"12:"},{"type":"text","text":"00"}],"tool_call_id":"c2","role":"tool"}]}`},
	{"developer_role", `{"messages":[{"role":"developer","content":"rules"},{"content":"no role"}]}`},
	{"escapes", `{"messages":[{"role":"us\u0065r","content":"caf\u00e9 \"q\" \ud83d\ude00 \ud800 line\nbreak"}],"mess\u0061ges":[{"role":"user","content":"escaped key"}]}`},
	{"invalid_utf8", "{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff byte\"}]}"},
	{"duplicates", `{"messages":[{"role":"user","content":"first"}],"messages":[{"role":"user","role":"assistant","content":"a","content":"b"}]}`},
	{"completions", `{"model":"m","prompt":"Once upon","suffix":"the end","max_tokens":5}`},
	{"completions_array", `{"prompt":["one","two",[1,2],3]}`},
	{"completions_tokens", `{"prompt":[1,2,3]}`},
	{"embeddings", `{"input":["alpha","beta"]}`},
	{"embeddings_string", `{"input":"alpha"}`},
	{"responses_items", `{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"x"}]},{"type":"function_call_output","call_id":"c","output":"o"}]}`},
	{"responses_function_items", `{"instructions":"Be terse.","input":[{"role":"user","content":"weather?"},` +
		`{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","id":"fc_1"},` +
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"18C"},{"type":"input_image","image_url":"x"},{"type":"output_text","text":", sunny"}]},` +
		`{"type":"reasoning","id":"rs_1","summary":[]},{"call_id":"c2","type":"function_call_output"}]}`},
	{"anthropic", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"Hi"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"tu1","name":"search","input":{"q": "cats", "n": [1, 2]}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":[{"type":"text","text":"3 "},{"type":"image","source":{}},{"type":"text","text":"results"}]},{"type":"text","text":"thanks"}]}],` +
		`"system":"You are terse."}`},
	{"anthropic_system_blocks", `{"system":[{"type":"text","text":"one"},{"type":"text","text":"two"}],"messages":[{"role":"user","content":"x"}]}`},
	{"anthropic_tool_result_string", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"done","is_error":false},{"type":"tool_result","tool_use_id":"u"}]}]}`},
	{"anthropic_tool_use_no_input", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"ping"}]}]}`},
	{"no_conversation", `{"model":"m","stream":true}`},
	{"not_object", `["messages"]`},
	{"odd_values", `{"messages":[1,"x",null,{"role":5,"content":{"text":"obj"}},{"role":"tool","content":null}],"system":null,"prompt":{"a":"b"}}`},
}

func TestAppendGolden(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Append(nil, []byte(tc.body))
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got\n%q\nwant\n%q", got, want)
			}
			if ref := reference([]byte(tc.body)); !bytes.Equal(got, ref) {
				t.Errorf("reference disagrees:\n%q", ref)
			}
		})
	}
}

// TestAppendKeepsDst: the records are appended after what dst holds.
func TestAppendKeepsDst(t *testing.T) {
	got := Append([]byte("prefix|"), []byte(`{"input":"x"}`))
	if string(got) != "prefix|0 text 4 0 1\nuserx\n" {
		t.Fatalf("%q", got)
	}
}

// TestAppendMalformed: a body cut short gives the records read before the
// cut, each whole.
func TestAppendMalformed(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"one"},{"role":"user","content":"tw`
	if got := string(Append(nil, []byte(body))); got != "0 text 4 0 3\nuserone\n" {
		t.Fatalf("%q", got)
	}
	deep := `{"messages":[{"role":"user","content":"x"}],"m":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`
	if got := string(Append(nil, []byte(deep))); got != "0 text 4 0 1\nuserx\n" {
		t.Fatalf("deeper than maxDepth: %q", got)
	}
	deep = `{"messages":[{"role":"user","content":"x"}],"m":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`
	if got := string(Append(nil, []byte(deep))); got != "0 text 4 0 1\nuserx\n" {
		t.Fatalf("300 levels, as the gateway accepts: %q", got)
	}
}

func TestAppendAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	var body []byte
	for _, tc := range cases {
		if tc.name == "anthropic" {
			body = []byte(tc.body)
		}
	}
	dst := Append(nil, body)
	n := testing.AllocsPerRun(100, func() { dst = Append(dst[:0], body) })
	if n != 0 {
		t.Fatalf("%v allocations per Append into a reused dst", n)
	}
}

func FuzzAppend(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := Append(nil, body)
		if !json.Valid(body) || depth(body) >= maxDepth {
			return // only must not panic
		}
		if want := reference(body); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got  %q\n want %q", body, got, want)
		}
	})
}

// depth is the deepest nesting of brackets in a valid JSON document.
func depth(doc []byte) int {
	d, max, inString := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			d++
			max = maxInt(max, d)
		case c == ']' || c == '}':
			d--
		}
	}
	return max
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// BenchmarkAppend renders a 2 KB chat request with escapes.
func BenchmarkAppend(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"temperature":0.7,"max_tokens":512,` +
		`"messages":[{"role":"system","content":"You are a helpful assistant. Answer concisely and cite sources when you can."},` +
		`{"role":"user","content":"` + strings.Repeat("Summarize the quarterly report for the board. ", 20) + `"},` +
		`{"role":"assistant","content":"Here is a summary: revenue grew, costs fell, and the outlook is stable."},` +
		`{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("Now list the risks, with \\\"quotes\\\" kept. ", 10) + `"}]}]}`)
	dst := Append(nil, body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dst = Append(dst[:0], body)
	}
}
