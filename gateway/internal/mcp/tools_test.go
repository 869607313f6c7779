package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const toolsReply = `{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"search","inputSchema":{"type":"object"}},{"name":"delete","description":"d"},{"name":"fetch"}],"nextCursor":"c"}}`

func toolNames(t *testing.T, msg []byte) []string {
	t.Helper()
	var m struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("%s: %v", msg, err)
	}
	if m.Result.NextCursor != "c" {
		t.Errorf("nextCursor lost: %s", msg)
	}
	var names []string
	for _, tl := range m.Result.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func TestFilter(t *testing.T) {
	var f ToolFilter
	allow := f.AllowTool("docs", []string{"mcp:docs", "mcp:docs/search", "mcp:docs/f*"})
	out, changed := f.Filter([]byte("x"), []byte(toolsReply), []byte("4"), allow)
	if !changed || out[0] != 'x' {
		t.Fatalf("changed %v: %s", changed, out)
	}
	if got := toolNames(t, out[1:]); !reflect.DeepEqual(got, []string{"search", "fetch"}) {
		t.Errorf("tools %v", got)
	}
	for _, tc := range []struct {
		name, msg, id string
		patterns      []string
	}{
		{"another id", toolsReply, "5", []string{"mcp:docs"}},
		{"every tool allowed", toolsReply, "4", []string{"mcp:docs/*"}},
		{"no plan list", toolsReply, "4", nil},
		{"not a tools list", `{"jsonrpc":"2.0","id":4,"result":{}}`, "4", []string{"mcp:docs"}},
		{"a notification", `{"jsonrpc":"2.0","method":"notifications/progress"}`, "4", []string{"mcp:docs"}},
		{"not json", `{`, "4", []string{"mcp:docs"}},
		{"trailing bytes", toolsReply + ` {}`, "4", []string{"mcp:docs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, changed := f.Filter(nil, []byte(tc.msg), []byte(tc.id), f.AllowTool("docs", tc.patterns))
			if changed || len(out) != 0 {
				t.Errorf("changed %v: %s", changed, out)
			}
		})
	}
}

// TestFilterKeepsBytes: the kept tools and the rest of the message are
// the server's bytes (escapes, invalid UTF-8, numbers as written); every
// copy of result and tools is filtered; a repeated name must be allowed
// in every copy; ids match by value.
func TestFilterKeepsBytes(t *testing.T) {
	var f ToolFilter
	allow := f.AllowTool("docs", []string{"mcp:docs/search", "mcp:docs/fetch"})
	for _, tc := range []struct{ name, msg, id, want string }{
		{"bytes kept",
			"{\"id\":\"a\",\"result\":{\"tools\":[ {\"name\":\"search\",\"d\":\"\xc5\\b\\u00e9\",\"n\":1.50} , {\"name\":\"delete\"}],\"\xc5\\b\":\"\"}}",
			`"a"`,
			"{\"id\":\"a\",\"result\":{\"tools\":[{\"name\":\"search\",\"d\":\"\xc5\\b\\u00e9\",\"n\":1.50}],\"\xc5\\b\":\"\"}}"},
		{"every copy", `{"id":1,"result":{"tools":[{"name":"delete"}],"tools":[{"name":"fetch"},{"name":"x"}]},"result":{"tools":[{"name":"x"}]}}`, "1",
			`{"id":1,"result":{"tools":[],"tools":[{"name":"fetch"}]},"result":{"tools":[]}}`},
		{"a repeated name", `{"id":1,"result":{"tools":[{"name":"search","name":"delete"},{"name":"fetch","name":"search"}]}}`, "1",
			`{"id":1,"result":{"tools":[{"name":"fetch","name":"search"}]}}`},
		{"an escaped id", `{"id":"\u0061","result":{"tools":[{"name":"delete"}]}}`, `"a"`, `{"id":"\u0061","result":{"tools":[]}}`},
	} {
		out, changed := f.Filter(nil, []byte(tc.msg), []byte(tc.id), allow)
		if !changed || string(out) != tc.want {
			t.Errorf("%s: changed %v\n%s\nwant\n%s", tc.name, changed, out, tc.want)
		}
	}
}

func TestFilterEvent(t *testing.T) {
	var f ToolFilter
	allow := f.AllowTool("docs", []string{"mcp:docs/search"})
	// Two data lines, joined with a newline (whitespace to JSON).
	at := strings.Index(toolsReply, `,"result"`)
	ev := "event: message\r\nid: 9_1\r\ndata: " + toolsReply[:at] + "\r\ndata: " + toolsReply[at:] + "\r\n\r\n"
	out, changed := f.FilterEvent(nil, []byte(ev), []byte("4"), allow)
	if !changed {
		t.Fatalf("unchanged")
	}
	got, rest, ok := CutEvent(out)
	if !ok || len(rest) != 0 {
		t.Fatalf("not one event: %q", out)
	}
	var lines []string
	for r := got; len(r) > 0; {
		var l []byte
		l, r = cutLine(r)
		lines = append(lines, string(l))
	}
	// The message's line break (JSON whitespace, kept) starts a second
	// data line.
	if len(lines) != 5 || lines[0] != "event: message" || lines[1] != "id: 9_1" || lines[4] != "" {
		t.Fatalf("lines %q", lines)
	}
	if names := toolNames(t, EventData(nil, got)); !reflect.DeepEqual(names, []string{"search"}) {
		t.Errorf("tools %v", names)
	}
	if _, changed := f.FilterEvent(nil, []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n"), []byte("4"), allow); changed {
		t.Errorf("a notification changed")
	}
}

// On the HTTP+SSE transport's stream any response listing tools is
// filtered, whatever its id; nothing else is.
func TestFilterStreamEvent(t *testing.T) {
	var f ToolFilter
	allow := f.AllowTool("docs", []string{"mcp:docs/search"})
	for _, id := range []string{"4", `"x"`, "0"} {
		reply := strings.Replace(toolsReply, `"id":4`, `"id":`+id, 1)
		out, changed := f.FilterStreamEvent([]byte("x"), []byte("event: message\ndata: "+reply+"\n\n"), allow)
		if !changed || !strings.HasPrefix(string(out), "xevent: message\ndata: ") || !strings.HasSuffix(string(out), "\n\n") {
			t.Fatalf("id %s: changed %v: %q", id, changed, out)
		}
		data := strings.TrimSuffix(strings.TrimPrefix(string(out), "xevent: message\ndata: "), "\n\n")
		if names := toolNames(t, []byte(data)); !reflect.DeepEqual(names, []string{"search"}) {
			t.Errorf("id %s: tools %v", id, names)
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"tools"}]}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"tools":{"name":"delete"}}}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`,
	} {
		if out, changed := f.FilterStreamEvent(nil, []byte("data: "+msg+"\n\n"), allow); changed || len(out) != 0 {
			t.Errorf("%s changed: %q", msg, out)
		}
	}
}

func TestCutEvent(t *testing.T) {
	tests := []struct {
		in, ev, rest string
		ok           bool
	}{
		{"data: a\n\ndata: b\n\n", "data: a\n\n", "data: b\n\n", true},
		{"data: a\r\n\r\nx", "data: a\r\n\r\n", "x", true},
		{"data: a\n", "", "data: a\n", false},
		{"data: a", "", "data: a", false},
		{": ping\n\n", ": ping\n\n", "", true},
	}
	for _, tc := range tests {
		ev, rest, ok := CutEvent([]byte(tc.in))
		if ok != tc.ok || string(ev) != tc.ev || string(rest) != tc.rest {
			t.Errorf("CutEvent(%q) = %q, %q, %v", tc.in, ev, rest, ok)
		}
	}
}
