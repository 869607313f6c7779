package convo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"unicode/utf8"
)

// rec is one parsed request_messages record.
type rec struct {
	index            int
	kind, role, name string
	text             string
}

// parseRecords parses a request_messages value.
func parseRecords(t testing.TB, b []byte) []rec {
	t.Helper()
	var out []rec
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			t.Fatalf("record header without LF: %q", b)
		}
		f := bytes.Fields(b[:nl])
		if len(f) != 5 {
			t.Fatalf("record header %q", b[:nl])
		}
		var n [4]int
		for i, s := range [][]byte{f[0], f[2], f[3], f[4]} {
			v, err := strconv.Atoi(string(s))
			if err != nil {
				t.Fatalf("record header %q: %v", b[:nl], err)
			}
			n[i] = v
		}
		b = b[nl+1:]
		if len(b) < n[1]+n[2]+n[3]+1 {
			t.Fatalf("record body short: %q", b)
		}
		r := rec{index: n[0], kind: string(f[1])}
		r.role, b = string(b[:n[1]]), b[n[1]:]
		r.name, b = string(b[:n[2]]), b[n[2]:]
		r.text, b = string(b[:n[3]]), b[n[3]+1:]
		out = append(out, r)
	}
	return out
}

// spansOf renders body and returns its records and their spans.
func spansOf(t testing.TB, body []byte) ([]rec, []TextSpan) {
	t.Helper()
	msgs, spans := AppendSpans(nil, body, nil)
	recs := parseRecords(t, msgs)
	if len(recs) != len(spans) {
		t.Fatalf("%d records, %d spans", len(recs), len(spans))
	}
	if plain := Append(nil, body); !bytes.Equal(plain, msgs) {
		t.Fatalf("AppendSpans renders %q, Append %q", msgs, plain)
	}
	return recs, spans
}

// checkSplice replaces record i's text and checks the result: valid JSON
// when body was, record i reads text, every other record is unchanged.
func checkSplice(t testing.TB, body []byte, i int, text string) []byte {
	t.Helper()
	recs, spans := spansOf(t, body)
	out := Splice(nil, body, spans[i], text)
	if json.Valid(body) && !json.Valid(out) {
		t.Fatalf("splice of record %d made invalid JSON: %q", i, out)
	}
	after, _ := spansOf(t, out)
	if len(after) != len(recs) {
		t.Fatalf("%d records after the splice, %d before:\n%q", len(after), len(recs), out)
	}
	want := text
	if !utf8.ValidString(text) {
		want = string([]rune(text)) // invalid bytes read as U+FFFD
	}
	for j := range recs {
		w := recs[j]
		if j == i {
			w.text = want
		}
		if after[j] != w {
			t.Fatalf("record %d after splicing record %d: got %+v, want %+v\nbody %q", j, i, after[j], w, out)
		}
	}
	return out
}

func TestSpans(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		rewritable []bool // per record
	}{
		{"chat_string", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}]}`, []bool{true, true}},
		{"chat_parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"text":"b","type":"text"}]}]}`, []bool{true, true}},
		{"chat_tool_calls", `{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}},{"function":{"name":"g"}}]}]}`, []bool{true, false}},
		{"chat_tool_message", `{"messages":[{"role":"tool","tool_call_id":"c","content":"18C"},{"role":"tool","content":[{"type":"text","text":"one"}]},{"role":"tool","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, []bool{true, true, false}},
		{"chat_tool_message_duplicate_content", `{"messages":[{"role":"tool","content":"a","content":"b"}]}`, []bool{false}},
		{"anthropic_system_string", `{"system":"terse","messages":[{"role":"user","content":"Hi"}]}`, []bool{true, true}},
		{"anthropic_system_blocks", `{"messages":[{"role":"user","content":"x"}],"system":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}`, []bool{true, true, true}},
		{"anthropic_blocks", `{"messages":[{"role":"assistant","content":[{"type":"text","text":"look"},{"type":"tool_use","name":"s","input":{"q":"x"}},{"type":"tool_use","name":"t","input":"str"}]}]}`, []bool{true, false, false}},
		{"anthropic_tool_result", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"done"},{"type":"tool_result","content":[{"type":"text","text":"3"},{"type":"image"},{"type":"text","text":"x"}]},{"type":"tool_result","content":[{"type":"text","text":"one"}]},{"type":"tool_result"}]}]}`, []bool{true, false, true, false}},
		{"responses", `{"instructions":"Be terse.","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"},{"type":"function_call_output","call_id":"d","output":[{"type":"input_text","text":"p"},{"type":"output_text","text":"q"}]}]}`, []bool{true, true, true, true, false}},
		{"responses_string_input", `{"input":"hello","instructions":"sys"}`, []bool{true, true}},
		{"completions", `{"prompt":"Once","suffix":"end"}`, []bool{true, true}},
		{"completions_array", `{"prompt":["one","two",[1,2]]}`, []bool{true, true}},
		{"embeddings", `{"input":["alpha","beta"]}`, []bool{true, true}},
		{"duplicates", `{"messages":[{"role":"user","content":"first"}],"messages":[{"role":"user","content":"a","content":"b"}],"system":"s1","system":"s2"}`, []bool{true, true, true, true, true}},
		{"escapes", `{"messages":[{"role":"user","content":"caf\u00e9 \"q\" \ud83d\ude00"}]}`, []bool{true}},
		{"whitespace", "{ \"messages\" : [ { \"role\" : \"user\" , \"content\" :\n\t\"spaced\" } ] }", []bool{true}},
	}
	texts := []string{"", "REDACTED", "quote \" backslash \\ newline \n tab \t nul \x00 bell \x07", "emoji 😀 line\u2028sep\u2029", "<script>&amp;</script>", "bad \xff byte"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			if !json.Valid(body) {
				t.Fatalf("test body is not JSON")
			}
			recs, spans := spansOf(t, body)
			if len(spans) != len(tc.rewritable) {
				t.Fatalf("%d records %+v, want %d", len(spans), recs, len(tc.rewritable))
			}
			for i, sp := range spans {
				if sp.Rewritable() != tc.rewritable[i] {
					t.Fatalf("record %d (%+v): rewritable %v, want %v", i, recs[i], sp.Rewritable(), tc.rewritable[i])
				}
				if !sp.Rewritable() {
					continue
				}
				var decoded string
				if err := json.Unmarshal(body[sp.Start:sp.End], &decoded); err != nil || decoded != recs[i].text {
					t.Fatalf("record %d: span %q decodes to %q (%v), record text %q", i, body[sp.Start:sp.End], decoded, err, recs[i].text)
				}
				for _, text := range texts {
					checkSplice(t, body, i, text)
				}
			}
		})
	}
}

// TestSpliceKeepsTheRest: only the literal changes.
func TestSpliceKeepsTheRest(t *testing.T) {
	body := []byte(`{"model":"m", "messages":[{"role":"user","content":"my email is a@b.c"}],"stream":true}`)
	_, spans := spansOf(t, body)
	got := string(Splice(nil, body, spans[0], "my email is <EMAIL_1>"))
	want := `{"model":"m", "messages":[{"role":"user","content":"my email is <EMAIL_1>"}],"stream":true}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{"a\"b\\c", `"a\"b\\c"`},
		{"\n\r\t\x00\x1f", `"\n\r\t\u0000\u001f"`},
		{"\u2028\u2029", `"\u2028\u2029"`},
		{"é😀<>&", `"é😀<>&"`},
		{"x\xffy", `"x\ufffdy"`},
		{"\x7f", "\"\x7f\""},
	}
	for _, tc := range tests {
		if got := string(AppendString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
		var back string
		if err := json.Unmarshal(AppendString(nil, tc.in), &back); err != nil || back != string([]rune(tc.in)) {
			t.Errorf("AppendString(%q) decodes to %q (%v)", tc.in, back, err)
		}
	}
}

func FuzzSplice(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.body), uint8(0), "new text")
	}
	f.Add([]byte(`{"messages":[{"role":"tool","content":"a"}]}`), uint8(0), "\u2028\"\\")
	f.Fuzz(func(t *testing.T, body []byte, pick uint8, text string) {
		_, spans := AppendSpans(nil, body, nil)
		var rewritable []int
		for i, sp := range spans {
			if sp.Rewritable() {
				if sp.End > len(body) || body[sp.Start] != '"' || body[sp.End-1] != '"' {
					t.Fatalf("span %d %+v of %q is not a string literal", i, sp, body)
				}
				rewritable = append(rewritable, i)
			}
		}
		if len(rewritable) == 0 {
			return
		}
		i := rewritable[int(pick)%len(rewritable)]
		out := checkSplice(t, body, i, text)
		if json.Valid(body) {
			var a, b any
			if json.Unmarshal(body, &a) != nil || json.Unmarshal(out, &b) != nil {
				t.Fatalf("unmarshal failed")
			}
			if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", b) {
				t.Fatalf("the body's kind changed")
			}
		}
	})
}
