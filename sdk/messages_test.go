//go:build !wasip1

package sdk

import (
	"fmt"
	"testing"

	"github.com/tollgate/tollgate/sdk/internal/convo"
)

func TestRequestMessages(t *testing.T) {
	h := install(t)
	body := `{"system":"Be terse.","messages":[{"role":"user","content":[{"type":"text","text":"line\none"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"search","input":{"q":"x"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"found"}]}]}`
	h.messages = string(convo.Append(nil, []byte(body)))
	want := []string{
		`0 text "system" "" "Be terse."`,
		`1 text "user" "" "line\none"`,
		`2 tool_call "assistant" "search" "{\"q\":\"x\"}"`,
		`3 tool_result "tool" "t1" "found"`,
	}
	var parts []MessagePart
	calls := 0
	OnRequest(func(r *Request) Verdict {
		before := h.calls
		parts = r.Messages(parts[:0])
		parts = r.Messages(parts[:0]) // from the callback's cache
		calls = h.calls - before
		return Continue
	})
	dispatchRequest(1)
	if calls != 1 {
		t.Fatalf("%d host calls in one callback, want 1", calls)
	}
	if len(parts) != len(want) {
		t.Fatalf("%d parts, want %d: %q", len(parts), len(want), h.messages)
	}
	for i, p := range parts {
		if got := fmt.Sprintf("%d %s %q %q %q", p.Index, p.Kind, p.Role, p.Name, p.Text); got != want[i] {
			t.Errorf("part %d = %s, want %s", i, got, want[i])
		}
	}

	// A new callback asks the host again.
	before := h.calls
	dispatchRequest(1)
	if h.calls-before != 1 {
		t.Fatalf("second callback: %d host calls", h.calls-before)
	}

	// The other phases see the request's messages too.
	var n int
	OnEnd(func(e *End) { n = len(e.Messages(nil)) })
	dispatchEnd(1, 0)
	if n != len(want) {
		t.Fatalf("end phase: %d parts", n)
	}
}

func TestRequestMessagesAllocations(t *testing.T) {
	h := install(t)
	h.messages = string(convo.Append(nil, []byte(`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`)))
	var parts []MessagePart
	OnRequest(func(r *Request) Verdict {
		parts = r.Messages(parts[:0])
		return Continue
	})
	dispatchRequest(1) // grows the buffer and parts
	if n := testing.AllocsPerRun(1000, func() { dispatchRequest(1) }); n != 0 {
		t.Fatalf("%v allocations per callback", n)
	}
	if len(parts) != 2 || string(parts[1].Text) != "b" {
		t.Fatalf("%+v", parts)
	}
}

func TestRequestMessagesBroken(t *testing.T) {
	h := install(t)
	h.messages = "0 text 4 0 9\nuserx\n"
	OnRequest(func(r *Request) Verdict {
		r.Messages(nil)
		return Continue
	})
	defer func() {
		if recover() == nil {
			t.Fatal("a malformed value did not panic")
		}
	}()
	dispatchRequest(1)
}

func TestAppendMessageParts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		ok   bool
	}{
		{"empty", "", 0, true},
		{"one", "0 text 4 0 2\nuserhi\n", 1, true},
		{"all kinds", "0 text 0 0 0\n\n1 tool_call 1 1 1\nabc\n1 tool_result 4 2 0\ntoolid\n", 3, true},
		{"text with newlines", "3 text 1 0 3\nu\n\n\n\n", 1, true},
		{"unknown kind", "0 image 0 0 0\n\n", 0, false},
		{"kind prefix", "0 tool 0 0 0\n\n", 0, false},
		{"negative index", "-1 text 0 0 0\n\n", 0, false},
		{"leading zero", "0 text 04 0 2\nuserhi\n", 0, false},
		{"short", "0 text 4 0 9\nuserhi\n", 0, false},
		{"missing newline", "0 text 4 0 2\nuserhiX", 0, false},
		{"huge", "0 text 99999999999 0 0\n\n", 0, false},
		{"garbage after", "0 text 0 0 0\n\nx", 1, false},
		{"no lengths", "0 text\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := AppendMessageParts(nil, []byte(tc.in))
			if len(got) != tc.n || ok != tc.ok {
				t.Fatalf("AppendMessageParts(%q) = %d parts, %v; want %d, %v", tc.in, len(got), ok, tc.n, tc.ok)
			}
		})
	}
}

func FuzzAppendMessageParts(f *testing.F) {
	f.Add([]byte("0 text 4 0 2\nuserhi\n1 tool_call 9 3 2\nassistantget{}\n"))
	f.Add([]byte("2 tool_result 4 1 0\ntoolx\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := AppendMessageParts(nil, b)
		if !ok {
			return
		}
		// A well-formed value renders back to itself.
		var out []byte
		for _, p := range got {
			out = fmt.Appendf(out, "%d %s %d %d %d\n%s%s%s\n", p.Index, p.Kind, len(p.Role), len(p.Name), len(p.Text), p.Role, p.Name, p.Text)
		}
		if string(out) != string(b) {
			t.Fatalf("%q parsed and rendered is %q", b, out)
		}
	})
}
