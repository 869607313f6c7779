package mcp

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func readTexts(t *testing.T, r *Results, msg string) []string {
	t.Helper()
	n, err := r.Read([]byte(msg))
	if err != nil {
		t.Fatalf("Read(%s): %v", msg, err)
	}
	out := []string{}
	for i := range n {
		out = append(out, string(r.Text(i)))
	}
	return out
}

func TestResultsReadsToolOutput(t *testing.T) {
	var r Results
	for _, tc := range []struct {
		name, msg string
		want      []string
	}{
		{"text items", `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"mail alice@example.com"},{"type":"text","text":"b\u00e9\n"}],"isError":false}}`,
			[]string{"mail alice@example.com", "bé\n"}},
		{"binary and metadata skipped", `{"jsonrpc":"2.0","id":"a","result":{"_meta":{"k":"v"},"content":[` +
			`{"type":"image","data":"aGk=","mimeType":"image/png","annotations":{"audience":["user"]},"_meta":{"x":"y"}},` +
			`{"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"inside","_meta":{"z":"w"}}},` +
			`{"type":"resource","resource":{"uri":"file:///b.bin","blob":"AAEC"}},` +
			`{"type":"resource_link","uri":"https://x.example/r","name":"r","description":"a link"}]}}`,
			[]string{"file:///a.txt", "inside", "file:///b.bin", "https://x.example/r", "r", "a link"}},
		{"structured content read whole", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"type":"person","data":"bob@example.com","tags":["a",{"mimeType":"m"}]}}}`,
			[]string{"person", "bob@example.com", "a", "m"}},
		{"resources/read", `{"jsonrpc":"2.0","id":2,"result":{"contents":[{"uri":"file:///n.md","mimeType":"text/markdown","text":"notes"},{"uri":"file:///i.png","blob":"AAE="}]}}`,
			[]string{"file:///n.md", "notes", "file:///i.png"}},
		{"error message and data", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"failed for carol@example.com","data":{"detail":"d","n":1}}}`,
			[]string{"failed for carol@example.com", "d"}},
		{"every copy", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"one"}]},"result":{"content":[{"type":"text","text":"two"}]}}`,
			[]string{"one", "two"}},
		{"empty strings are not guarded", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":""}]}}`, []string{}},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"halfway"}}`, []string{}},
		{"a request of the server's", `{"jsonrpc":"2.0","id":9,"method":"sampling/createMessage","params":{"messages":[{"content":{"type":"text","text":"x"}}]}}`, []string{}},
		{"not JSON", `{"jsonrpc":"2.0","result":{"content":[{"text":"x"}]}`, []string{}},
		{"trailing bytes", `{"result":{"content":[{"text":"x"}]}} {}`, []string{}},
	} {
		if got := readTexts(t, &r, tc.msg); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestResultsRewrite(t *testing.T) {
	var r Results
	msg := []byte(`{"jsonrpc":"2.0","id":"q-1","result":{"content":[{"type":"text","text":"mail alice@example.com"},` +
		`{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"text","text":"keep"}],"structuredContent":{"to":"alice@example.com"}}}`)
	n, err := r.Read(msg)
	if err != nil || n != 3 {
		t.Fatalf("Read: %d strings, %v", n, err)
	}
	r.Replace(0, []byte("mail [EMAIL_1] \"quoted\"\n\u2028"))
	r.Replace(2, []byte{'x', 0xff})
	out := r.AppendRewritten([]byte("prefix:"), msg)
	body, ok := strings.CutPrefix(string(out), "prefix:")
	if !ok || !json.Valid([]byte(body)) {
		t.Fatalf("not JSON after the prefix: %s", out)
	}
	var got struct {
		ID     string `json:"id"`
		Result struct {
			Content []struct {
				Type, Text, Data string
			}
			Structured map[string]string `json:"structuredContent"`
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	c := got.Result.Content
	if got.ID != "q-1" || len(c) != 3 || c[0].Text != "mail [EMAIL_1] \"quoted\"\n\u2028" || c[1].Data != "aGk=" || c[2].Text != "keep" ||
		got.Result.Structured["to"] != "x\ufffd" {
		t.Fatalf("rewritten: %s", body)
	}

	w := r.AppendWithheld(nil, []byte("[withheld]"))
	var held struct {
		ID     string `json:"id"`
		Result struct {
			Content []struct{ Type, Text string }
			IsError bool
		}
	}
	if err := json.Unmarshal(w, &held); err != nil || held.ID != "q-1" || !held.Result.IsError ||
		len(held.Result.Content) != 1 || held.Result.Content[0].Type != "text" || held.Result.Content[0].Text != "[withheld]" {
		t.Fatalf("withheld: %s (%v)", w, err)
	}
	if _, err := r.Read([]byte(`{"result":{"content":[]}}`)); err != nil {
		t.Fatal(err)
	}
	if w := r.AppendWithheld(nil, nil); !json.Valid(w) || !strings.Contains(string(w), `"id":null`) {
		t.Fatalf("withheld without id: %s", w)
	}
}

func TestResultsOutput(t *testing.T) {
	var r Results
	for msg, want := range map[string]bool{
		`{"id":1,"result":{"content":[{"type":"text","text":"x"}]}}`:   true,
		`{"id":1,"result":{"contents":[{"uri":"u","text":"x"}]}}`:      true,
		`{"id":1,"error":{"code":1,"message":"m"}}`:                    true,
		`{"id":1,"result":{"tools":[{"name":"t","description":"d"}]}}`: false,
		`{"id":1,"result":{"serverInfo":{"name":"s"}}}`:                false,
		`{"id":1,"result":{"structuredContent":{"a":"b"}}}`:            false,
	} {
		if _, err := r.Read([]byte(msg)); err != nil || r.Output() != want {
			t.Errorf("%s: output %v, want %v (%v)", msg, r.Output(), want, err)
		}
	}
}

// A result nested as deep as a client reads is guarded, not given up on.
func TestResultsDeep(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 500) + `"alice@example.com"` + strings.Repeat(`}`, 500)
	msg := `{"id":1,"result":{"content":[],"structuredContent":` + deep + `}}`
	if !json.Valid([]byte(msg)) {
		t.Fatal("not JSON")
	}
	var r Results
	if n, err := r.Read([]byte(msg)); n != 1 || err != nil || string(r.Text(0)) != "alice@example.com" {
		t.Fatalf("%d strings, %v", n, err)
	}
	var f ToolFilter
	tools := `{"id":1,"result":{"tools":[{"name":"x","inputSchema":` + deep + `},{"name":"search"}]}}`
	out, changed := f.Filter(nil, []byte(tools), []byte("1"), f.AllowTool("docs", []string{"mcp:docs/search"}))
	if !changed || string(out) != `{"id":1,"result":{"tools":[{"name":"search"}]}}` {
		t.Fatalf("deep tools list: changed %v, %.80s", changed, out)
	}
}

func TestResultsBound(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"id":1,"result":{"structuredContent":[`)
	for i := range MaxResultStrings + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"s"`)
	}
	b.WriteString(`]}}`)
	var r Results
	if _, err := r.Read([]byte(b.String())); err != ErrTooManyStrings {
		t.Fatalf("%d strings: %v, want ErrTooManyStrings", MaxResultStrings+1, err)
	}
}

func TestAppendEventSplitsLines(t *testing.T) {
	ev := []byte("event: message\nid: 4\ndata: {\"a\":\ndata: 1}\n\n")
	msg := []byte("{\"a\":\r\n 2,\r\"b\":\n3}")
	got := string(AppendEvent(nil, ev, msg))
	want := "event: message\nid: 4\ndata: {\"a\":\ndata:  2,\ndata: \"b\":\ndata: 3}\n\n"
	if got != want {
		t.Fatalf("AppendEvent:\n%q\nwant\n%q", got, want)
	}
	ev2, rest, ok := CutEvent([]byte(got))
	if !ok || len(rest) != 0 {
		t.Fatalf("not one event: %q", got)
	}
	var v map[string]int
	if err := json.Unmarshal(EventData(nil, ev2), &v); err != nil || v["a"] != 2 || v["b"] != 3 {
		t.Fatalf("data %q: %v %v", EventData(nil, ev2), v, err)
	}
}

// FuzzResults: replacing every guarded string of a JSON message keeps it
// JSON, and reading it again finds the replacements, in order, where the
// strings were.
func FuzzResults(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"a\"b"}],"structuredContent":{"x":["y"]}}}`,
		`{"id":1,"error":{"message":"m","data":"d"}}`,
		`{"result":{"content":[{"type":"resource","resource":{"uri":"u","blob":"b"}}]},"result":"s"}`,
		`{"result":{"_meta":{"a":"b"},"content":{"text":"x"}}}`,
		`{"result":["\ud800","\u00e9\ufffd"]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var r Results
		n, err := r.Read(msg)
		if err != nil || n == 0 {
			return
		}
		if !json.Valid(msg) {
			t.Fatalf("strings read from invalid JSON %q", msg)
		}
		for i := range n {
			r.Replace(i, []byte("r"+strconv.Itoa(i)))
		}
		out := r.AppendRewritten(nil, msg)
		if !json.Valid(out) {
			t.Fatalf("rewritten %q is not JSON: %q", msg, out)
		}
		var again Results
		m, err := again.Read(out)
		if err != nil || m != n {
			t.Fatalf("rewritten %q: %d strings (%v), want %d", out, m, err, n)
		}
		for i := range m {
			if got := string(again.Text(i)); got != "r"+strconv.Itoa(i) {
				t.Fatalf("rewritten %q: string %d is %q", out, i, got)
			}
		}
		if w := r.AppendWithheld(nil, msg); !json.Valid(w) {
			t.Fatalf("withheld is not JSON: %q", w)
		}
	})
}
