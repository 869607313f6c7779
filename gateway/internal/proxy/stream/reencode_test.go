package stream

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendWithText(t *testing.T) {
	tests := []struct {
		name, data, text string
		finish           []byte
		synth            bool
		check            func(t *testing.T, m map[string]any)
	}{
		{"chat delta, control characters stay valid JSON", `{"id":"c","created":1730000000123,"choices":[{"index":0,"delta":{"content":"a\u0001b"},"finish_reason":null}]}`,
			"x\x01y\"\n</script>", nil, false, func(t *testing.T, m map[string]any) {
				if got := delta(m)["content"]; got != "x\x01y\"\n</script>" {
					t.Errorf("content %q", got)
				}
				if n := m["created"].(json.Number); n.String() != "1730000000123" {
					t.Errorf("number changed: %s", n)
				}
			}},
		{"legacy completion text", `{"choices":[{"index":0,"text":"old","finish_reason":null}]}`, "new", []byte("stop"), false,
			func(t *testing.T, m map[string]any) {
				c0 := m["choices"].([]any)[0].(map[string]any)
				if c0["text"] != "new" || c0["finish_reason"] != "stop" {
					t.Errorf("choice %v", c0)
				}
			}},
		{"whole reply message", `{"choices":[{"index":0,"message":{"role":"assistant","content":"old"},"finish_reason":"stop"}],"usage":{"total_tokens":3}}`,
			"[removed]", []byte("content_filter"), false, func(t *testing.T, m map[string]any) {
				c0 := m["choices"].([]any)[0].(map[string]any)
				if c0["message"].(map[string]any)["content"] != "[removed]" || c0["finish_reason"] != "content_filter" || m["usage"] == nil {
					t.Errorf("reply %v", m)
				}
			}},
		{"synthesized from the role chunk", `{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"total_tokens":1}}`,
			"tail", nil, true, func(t *testing.T, m map[string]any) {
				d := delta(m)
				if _, ok := d["role"]; ok || d["content"] != "tail" || m["usage"] != nil {
					t.Errorf("event %v", m)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := AppendWithText([]byte("prefix:"), []byte(tt.data), []byte(tt.text), tt.finish, tt.synth)
			if err != nil {
				t.Fatal(err)
			}
			if string(out[:7]) != "prefix:" {
				t.Fatalf("dst not appended to: %q", out)
			}
			dec := json.NewDecoder(bytesReader(out[7:]))
			dec.UseNumber()
			var m map[string]any
			if err := dec.Decode(&m); err != nil {
				t.Fatalf("invalid JSON %q: %v", out[7:], err)
			}
			tt.check(t, m)
		})
	}
	if _, err := AppendWithText(nil, []byte(`{"choices":[]}`), []byte("x"), nil, false); err == nil {
		t.Error("no choices: want an error")
	}
}

func delta(m map[string]any) map[string]any {
	return m["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
}

func FuzzAppendWithText(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"a"}}]}`), []byte("b\x00\u2028"))
	f.Add([]byte(`{"choices":[{"text":"a"}],"n":1e400}`), []byte(""))
	f.Fuzz(func(t *testing.T, data, text []byte) {
		out, err := AppendWithText(nil, data, text, nil, false)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON from %q: %q", data, out)
		}
	})
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func TestAppendReplyToolCalls(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"no tool calls", `{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`, ""},
		{"two calls", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[` +
			`{"id":"a","type":"function","function":{"name":"draw","arguments":"{\"url\":\"https:\\/\\/h\\/x\"}"}},` +
			`{"id":"b","type":"function","function":{"name":"f","arguments":"a\nb"}}]}}]}`,
			"0 4 24\ndraw{\"url\":\"https:\\/\\/h\\/x\"}\n1 1 3\nfa\nb\n"},
		{"not JSON", `{"tool_calls"`, ""},
		{"no choices", `{"tool_calls":[],"choices":[]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(AppendReplyToolCalls(nil, []byte(tt.body))); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
