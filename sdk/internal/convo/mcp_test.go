package convo

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

var mcpCases = []struct{ name, body, want string }{
	{"call", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"alice@example.com","limit":5,"filters":{"tags":["a","b"]}}}}`,
		"0 tool_call 9 6 68\nassistantsearch{\"query\":\"alice@example.com\",\"limit\":5,\"filters\":{\"tags\":[\"a\",\"b\"]}}\n" +
			"0 text 9 6 17\nassistant/queryalice@example.com\n" +
			"0 text 9 15 1\nassistant/filters/tags/0a\n" +
			"0 text 9 15 1\nassistant/filters/tags/1b\n"},
	{"method_after_params", `{"params":{"arguments":{"a/b~c":"x\ny"},"name":"w\u00e9b"},"id":1,"method":"tools/call","jsonrpc":"2.0"}`,
		"0 tool_call 9 4 16\nassistantwéb{\"a/b~c\":\"x\\ny\"}\n" +
			"0 text 9 8 3\nassistant/a~1b~0cx\ny\n"},
	{"no_arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"now"}}`,
		"0 tool_call 9 3 0\nassistantnow\n"},
	{"string_arguments", `{"method":"tools/call","params":{"name":"echo","arguments":"hi"}}`,
		"0 tool_call 9 4 4\nassistantecho\"hi\"\n0 text 9 0 2\nassistanthi\n"},
	{"repeated", `{"method":"tools/call","method":"tools/list","params":{"name":"a","arguments":{"k":"1"},"name":"b","arguments":{"k":"2"}},"params":{"arguments":[]}}`,
		"0 tool_call 9 1 9\nassistantb{\"k\":\"1\"}\n0 text 9 2 1\nassistant/k1\n" +
			"0 tool_call 9 1 9\nassistantb{\"k\":\"2\"}\n0 text 9 2 1\nassistant/k2\n" +
			"0 tool_call 9 0 2\nassistant[]\n"},
	{"other_method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"x","arguments":{"a":"b"}}}`, ""},
	{"initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"c"}}}`, ""},
	{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, ""},
	{"chat_body", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
	{"params_not_object", `{"method":"tools/call","params":["x"]}`, ""},
	{"not_object", `["tools/call"]`, ""},
	{"malformed", `{"method":"tools/call","params":{"name":"a","arguments":{"q":"x"}}`, ""},
}

func TestAppendMCP(t *testing.T) {
	for _, tc := range mcpCases {
		t.Run(tc.name, func(t *testing.T) {
			got := AppendMCP(nil, []byte(tc.body))
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			if ref := mcpReference([]byte(tc.body)); json.Valid([]byte(tc.body)) && !bytes.Equal(got, ref) {
				t.Errorf("reference disagrees:\n%q", ref)
			}
			withSpans, spans := AppendMCPSpans(nil, []byte(tc.body), nil)
			if !bytes.Equal(withSpans, got) || len(spans) != strings.Count(tc.want, "assistant") {
				t.Errorf("AppendMCPSpans: %q, %d spans", withSpans, len(spans))
			}
		})
	}
}

// TestMCPChatSelection: the endpoint selects the reading, not the body's
// shape: a chat body with JSON-RPC keys is still a chat body for Append,
// and a tool call read as chat gives nothing.
func TestMCPChatSelection(t *testing.T) {
	chat := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x","arguments":{"q":"hidden"}},"messages":[{"role":"user","content":"hi"}]}`
	if got := string(Append(nil, []byte(chat))); got != "0 text 4 0 2\nuserhi\n" {
		t.Errorf("Append: %q", got)
	}
	if got := string(AppendMCP(nil, []byte(chat))); !strings.Contains(got, "/qhidden") || strings.Contains(got, "userhi") {
		t.Errorf("AppendMCP: %q", got)
	}
}

// TestMCPSpans: the text records are rewritable, the tool_call is not,
// and a rewrite changes the one string.
func TestMCPSpans(t *testing.T) {
	body := []byte(mcpCases[0].body)
	_, spans := AppendMCPSpans(nil, body, nil)
	want := []bool{false, true, true, true}
	if len(spans) != len(want) {
		t.Fatalf("%d spans", len(spans))
	}
	for i, w := range want {
		if spans[i].Rewritable() != w {
			t.Errorf("record %d rewritable %v", i, !w)
		}
	}
	out := Splice(nil, body, spans[1], "[EMAIL_1]")
	if w := strings.Replace(string(body), "alice@example.com", "[EMAIL_1]", 1); string(out) != w {
		t.Fatalf("got %s\nwant %s", out, w)
	}
}

func TestAppendMCPAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := []byte(mcpCases[0].body)
	dst, spans := AppendMCPSpans(nil, body, nil)
	n := testing.AllocsPerRun(100, func() { dst, spans = AppendMCPSpans(dst[:0], body, spans[:0]) })
	if n != 0 {
		t.Fatalf("%v allocations per AppendMCPSpans into reused buffers", n)
	}
}

// FuzzAppendMCP: AppendMCP agrees with the reference on valid bodies, and
// rewriting any text record to "X" gives valid JSON whose arguments
// differ from the old ones at that record's pointer only.
func FuzzAppendMCP(f *testing.F) {
	for _, tc := range mcpCases {
		f.Add([]byte(tc.body), uint8(1))
	}
	f.Add([]byte(`{"method":"tools/call","params":{"arguments":{"":["\ud800",{"~":"\u2028"}],"x":"y"}}}`), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, pick uint8) {
		got, spans := AppendMCPSpans(nil, body, nil)
		recs := parseRecords(t, got)
		if len(recs) != len(spans) {
			t.Fatalf("%d records, %d spans", len(recs), len(spans))
		}
		if !json.Valid(body) || depth(body) >= maxDepth {
			return // only must not panic
		}
		if want := mcpReference(body); !bytes.Equal(got, want) {
			t.Fatalf("%q:\n got  %q\n want %q", body, got, want)
		}
		var texts []int
		for i, r := range recs {
			if r.kind == KindText {
				texts = append(texts, i)
			} else if spans[i].Rewritable() {
				t.Fatalf("tool_call record %d is rewritable", i)
			}
		}
		if len(texts) == 0 {
			return
		}
		i := texts[int(pick)%len(texts)]
		out := Splice(nil, body, spans[i], "X")
		if !json.Valid(out) {
			t.Fatalf("rewriting record %d made invalid JSON: %q", i, out)
		}
		after := parseRecords(t, AppendMCP(nil, out))
		if len(after) != len(recs) {
			t.Fatalf("%d records after rewriting record %d, %d before: %q", len(after), i, len(recs), out)
		}
		for j := range recs {
			w := recs[j]
			switch {
			case j == i:
				w.text = "X"
			case w.kind == KindToolCall:
				continue // its raw JSON holds the rewritten string
			}
			if after[j] != w {
				t.Fatalf("record %d after rewriting record %d: got %+v, want %+v\nbody %q", j, i, after[j], w, out)
			}
		}
	})
}

// mcpReference is AppendMCP written again on the ordered tree of
// reference_test.go.
func mcpReference(body []byte) []byte {
	if !json.Valid(body) {
		return nil
	}
	root, err := parseNode(bytes.TrimSpace(body))
	if err != nil || !root.isObject() {
		return nil
	}
	call := false
	for _, m := range root.obj {
		if m.key == "method" && m.val.str != nil && *m.val.str == toolsCall {
			call = true
		}
	}
	if !call {
		return nil
	}
	r := &refEncoder{}
	for _, m := range root.obj {
		if m.key != "params" || !m.val.isObject() {
			continue
		}
		name, _ := m.val.lastString("name")
		args := false
		for _, a := range m.val.obj {
			if a.key != "arguments" {
				continue
			}
			args = true
			r.record(KindToolCall, "assistant", name, string(a.val.raw))
			r.strings(a.val, "")
		}
		if !args {
			r.record(KindToolCall, "assistant", name, "")
		}
	}
	return r.out
}

func (r *refEncoder) strings(n node, ptr string) {
	switch {
	case n.str != nil:
		r.record(KindText, "assistant", ptr, *n.str)
	case n.isObject():
		for _, m := range n.obj {
			tok := strings.NewReplacer("~", "~0", "/", "~1").Replace(m.key)
			r.strings(m.val, ptr+"/"+tok)
		}
	case n.isArray():
		for i, el := range n.arr {
			r.strings(el, ptr+"/"+strconv.Itoa(i))
		}
	}
}
