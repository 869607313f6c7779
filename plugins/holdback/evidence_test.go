package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

const (
	marker = "oaidalleapiprodscus.blob.core.windows.net"
	imgURL = "https://" + marker + "/private/org-x/user-y/img-1.png?st=2024-01-01T00%3A00%3A00Z&se=2024-01-01T02%3A00%3A00Z&sp=r&sig=AbC%2Bd%3D"
)

func urls(e evidence) []string {
	var out []string
	e.each(func(u []byte) bool { out = append(out, string(u)); return true })
	return out
}

func TestHoldbackURLBoundaries(t *testing.T) {
	tests := []struct{ text, want string }{
		{"see " + imgURL + " now", imgURL},
		{"see " + imgURL + ".", imgURL},
		{"![image](" + imgURL + ")", imgURL},
		{`{"url":"` + imgURL + `"}`, imgURL},
		{"url=" + imgURL + ", ok", imgURL},
		{"<" + imgURL + ">", imgURL},
		{"**" + imgURL + "**", imgURL},
		{"bare " + marker + "/x.png?", marker + "/x.png"},
		{"ftp://" + marker + "/a", "ftp://" + marker + "/a"},
		{"x=://" + marker + "/a", "x=://" + marker + "/a"}, // "://" without a scheme: the whole run
	}
	g := mustGuard(t, `{"markers":["`+marker+`"]}`)
	for _, tt := range tests {
		c := collector{ac: g.ac}
		c.text([]byte(tt.text), maxNested)
		if got := urls(c.out); len(got) != 1 || got[0] != tt.want {
			t.Errorf("%q: got %q, want %q", tt.text, got, tt.want)
		}
	}
}

func TestHoldbackCollectEvidence(t *testing.T) {
	other := "https://" + marker + "/private/other.png"
	third := "https://" + marker + "/private/third.png"
	body := func(messages ...any) []byte {
		b, err := json.Marshal(map[string]any{"model": "m", "messages": messages})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tool := func(content any) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": "c1", "content": content}
	}
	call := func(args string) map[string]any {
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": args}}}}
	}
	toolJSON, _ := json.Marshal(map[string]any{"images": []any{map[string]any{"url": imgURL}}})
	tests := []struct {
		name string
		body []byte
		want []string
	}{
		{"a tool message", body(map[string]any{"role": "user", "content": "draw"}, tool("Here: "+imgURL)), []string{imgURL}},
		{"role after content", []byte(`{"messages":[{"content":"` + imgURL + `","role":"tool"}]}`), []string{imgURL}},
		{"tool content parts", body(tool([]any{map[string]any{"type": "text", "text": imgURL}})), []string{imgURL}},
		{"a tool's JSON output", body(tool(string(toolJSON))), []string{imgURL}},
		{"JSON with escaped slashes and ampersands", body(tool(`{"url":"` + jsonEscapeAll(imgURL) + `"}`)), []string{imgURL}},
		{"tool call arguments", body(call(`{"url":"` + other + `"}`)), []string{other}},
		{"legacy function role and function_call", body(
			map[string]any{"role": "function", "name": "f", "content": imgURL},
			map[string]any{"role": "assistant", "function_call": map[string]any{"name": "f", "arguments": other}}),
			[]string{imgURL, other}},
		{"earlier turns count, repeated URLs once", body(
			map[string]any{"role": "user", "content": "draw"}, call("{}"), tool(imgURL),
			map[string]any{"role": "assistant", "content": "Here it is: " + imgURL},
			map[string]any{"role": "user", "content": "try again"}, tool(imgURL+" and "+third)),
			[]string{imgURL, third}},
		{"user and assistant text is no evidence", body(
			map[string]any{"role": "user", "content": imgURL},
			map[string]any{"role": "assistant", "content": other},
			map[string]any{"role": "system", "content": third}), nil},
		{"responses-style input items", []byte(`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"u\":\"` + other +
			`\"}"},{"type":"function_call_output","call_id":"c","output":"` + imgURL + `"},{"role":"user","content":"` + third + `"}]}`),
			[]string{other, imgURL}},
		{"no marker", body(tool("https://example.com/x.png")), nil},
	}
	g := mustGuard(t, `{"markers":["`+marker+`"]}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := g.collectEvidence(tt.body, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := urls(ev); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := g.collectEvidence([]byte(`[1]`), nil); err == nil {
		t.Error("a body that is not an object: no error")
	}
	if _, err := g.collectEvidence([]byte(`{"messages":[`), nil); err == nil {
		t.Error("a truncated body: no error")
	}
}

// jsonEscapeAll writes / as \/ and & as \u0026, as some JSON encoders do.
func jsonEscapeAll(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '/':
			b = append(b, `\/`...)
		case '&':
			b = append(b, `\u0026`...)
		default:
			b = append(b, s[i])
		}
	}
	return string(b)
}

func TestHoldbackEvidenceCaseInsensitive(t *testing.T) {
	g := mustGuard(t, `{"markers":["`+marker+`"], "case_insensitive": true}`)
	upper := "https://OAIDALLEAPIPRODSCUS.blob.core.windows.net/x.png"
	ev, err := g.collectEvidence([]byte(`{"messages":[{"role":"tool","content":"`+upper+`"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := urls(ev); len(got) != 1 || got[0] != upper {
		t.Fatalf("got %q", got)
	}
}
