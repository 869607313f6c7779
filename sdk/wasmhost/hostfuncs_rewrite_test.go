package wasmhost

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// setMessageText calls the set_message_text import as a guest in phase
// would, with text in guest memory.
func setMessageText(t *testing.T, r *Request, phase Phase, record int32, text string) int32 {
	t.Helper()
	p := &Plugin{spec: Spec{Name: "rw"}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), stats: &Stats{}}
	var h hostFunc
	for _, f := range p.hostFuncs() {
		if f.name == "set_message_text" {
			h = f
		}
	}
	if h.fn == nil {
		t.Fatal("no set_message_text import")
	}
	m := fuzzModule{mem: &fuzzMemory{buf: append([]byte("...."), text...)}}
	inst := &instance{p: p, req: r, phase: phase}
	r.configuring = phase == 0
	ctx := context.WithValue(context.Background(), instanceKey{}, inst)
	stack := []uint64{uint64(uint32(record)), 4, uint64(len(text))}
	if callHost(t, h, ctx, m, stack) {
		t.Fatal("trapped")
	}
	return int32(uint32(stack[0]))
}

// readFacts is a Refacts that re-reads the facts as the plugin harness
// does.
func readFacts(r *Request) error {
	f, ok := ReadRequestFacts(r.Body, string(r.Endpoint))
	if !ok {
		return errors.New("not a JSON object")
	}
	r.SetFacts(f)
	return nil
}

func TestSetMessageText(t *testing.T) {
	const body = `{"model":"m","system":"sys","messages":[{"role":"user","content":"my mail is someone@example.com"},` +
		`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"a":1}}]}]}`
	tests := []struct {
		name     string
		phase    Phase
		record   int32
		text     string
		maxBody  int
		want     int32
		wantBody string // "" when the body stays
	}{
		{"user text", PhaseRequest, 1, "my mail is <EMAIL_1>", 0, 0,
			`{"model":"m","system":"sys","messages":[{"role":"user","content":"my mail is <EMAIL_1>"},` +
				`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"a":1}}]}]}`},
		{"system, escaped", PhaseRequest, 0, "say \"hi\"\n", 0, 0,
			`{"model":"m","system":"say \"hi\"\n","messages":[{"role":"user","content":"my mail is someone@example.com"},` +
				`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"a":1}}]}]}`},
		{"tool_use input is raw JSON", PhaseRequest, 2, "{}", 0, codeInvalid, ""},
		{"no such record", PhaseRequest, 3, "x", 0, codeAbsent, ""},
		{"negative record", PhaseRequest, -1, "x", 0, codeAbsent, ""},
		{"invalid UTF-8", PhaseRequest, 1, "bad \xff", 0, codeInvalid, ""},
		{"over the body limit", PhaseRequest, 1, strings.Repeat("x", 200), len(body) + 50, codeInvalid, ""},
		{"within the body limit", PhaseRequest, 0, "", len(body), 0,
			`{"model":"m","system":"","messages":[{"role":"user","content":"my mail is someone@example.com"},` +
				`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"a":1}}]}]}`},
		{"response_headers", PhaseResponseHeaders, 1, "x", 0, codeNotAllowed, ""},
		{"chunk", PhaseChunk, 1, "x", 0, codeNotAllowed, ""},
		{"end", PhaseEnd, 1, "x", 0, codeNotAllowed, ""},
		{"configure", 0, 1, "x", 0, codeNotAllowed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := AcquireRequest()
			defer ReleaseRequest(r)
			r.Endpoint, r.Body, r.MaxBodyBytes, r.Refacts = []byte("messages"), []byte(body), tc.maxBody, readFacts
			if err := readFacts(r); err != nil {
				t.Fatal(err)
			}
			before := r.PromptChars
			got := setMessageText(t, r, tc.phase, tc.record, tc.text)
			if got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			want := tc.wantBody
			if want == "" {
				want = body
			}
			if string(r.Body) != want {
				t.Fatalf("body\n%s\nwant\n%s", r.Body, want)
			}
			if r.BodyRewritten() != (tc.wantBody != "") {
				t.Fatalf("BodyRewritten %v", r.BodyRewritten())
			}
			f, _ := ReadRequestFacts([]byte(want), "messages")
			if r.PromptChars != f.PromptChars || r.PromptTokens != f.PromptTokens || r.Bound != f.Bound {
				t.Fatalf("facts %d %d %+v, want those of the body: %d %d %+v", r.PromptChars, r.PromptTokens, r.Bound, f.PromptChars, f.PromptTokens, f.Bound)
			}
			if tc.wantBody == "" && r.PromptChars != before {
				t.Fatalf("prompt chars %d → %d without a rewrite", before, r.PromptChars)
			}
		})
	}
}

// Rewrites chain: each sees the body the one before left, the
// conversation is rendered again, and the buffers alternate without one
// rewrite overwriting the body it reads.
func TestSetMessageTextChain(t *testing.T) {
	r := AcquireRequest()
	defer ReleaseRequest(r)
	client := []byte(`{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}`)
	r.Endpoint, r.Body, r.Refacts = []byte("chat/completions"), client, readFacts
	want := map[int]string{0: "a", 1: "b", 2: "c"}
	for i, step := range []struct {
		record int32
		text   string
	}{{0, "first, longer"}, {2, "C"}, {1, ""}, {0, "1"}, {2, strings.Repeat("long ", 100)}} {
		if got := setMessageText(t, r, PhaseRequest, step.record, step.text); got != 0 {
			t.Fatalf("step %d: status %d", i, got)
		}
		want[int(step.record)] = step.text
		if !json.Valid(r.Body) {
			t.Fatalf("step %d: invalid JSON %s", i, r.Body)
		}
		var parts []string
		for _, line := range strings.Split(strings.TrimSuffix(string(r.conversation()), "\n"), "\n") {
			if !strings.HasPrefix(line, "0 ") && !strings.HasPrefix(line, "1 ") {
				parts = append(parts, strings.TrimPrefix(line, "user"))
			}
		}
		for rec, text := range want {
			if parts[rec] != text {
				t.Fatalf("step %d: record %d reads %q, want %q (%q)", i, rec, parts[rec], text, r.conversation())
			}
		}
		if f, _ := ReadRequestFacts(r.Body, "chat/completions"); r.PromptChars != f.PromptChars {
			t.Fatalf("step %d: prompt chars %d, want %d", i, r.PromptChars, f.PromptChars)
		}
	}
	if string(client) != `{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"},{"type":"text","text":"c"}]}]}` {
		t.Fatalf("the client's body changed: %s", client)
	}
}

// A Refacts error refuses the rewrite: the body and its facts stay.
func TestSetMessageTextRefactsRefuses(t *testing.T) {
	r := AcquireRequest()
	defer ReleaseRequest(r)
	body := `{"messages":[{"role":"user","content":"hello"}]}`
	r.Endpoint, r.Body = []byte("chat/completions"), []byte(body)
	calls := 0
	r.Refacts = func(r *Request) error {
		calls++
		if strings.Contains(string(r.Body), "forbidden") {
			return errors.New("refused")
		}
		return readFacts(r)
	}
	_ = readFacts(r)
	if got := setMessageText(t, r, PhaseRequest, 0, "forbidden"); got != codeInvalid {
		t.Fatalf("status %d", got)
	}
	if string(r.Body) != body || r.PromptChars != 5 || calls != 2 || r.BodyRewritten() {
		t.Fatalf("body %s, prompt chars %d, %d Refacts calls, rewritten %v", r.Body, r.PromptChars, calls, r.BodyRewritten())
	}
	if !strings.Contains(string(r.conversation()), "hello") {
		t.Fatalf("conversation %q", r.conversation())
	}
}

// TestSetMessageTextMCP: on the MCP endpoint the conversation is a tool
// call's arguments, each string rewritable; the same body on a chat
// endpoint has no records.
func TestSetMessageTextMCP(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"query":"alice@example.com","filters":{"tags":["a"]}}}}`
	r := AcquireRequest()
	defer ReleaseRequest(r)
	r.Endpoint, r.Body = []byte("chat/completions"), []byte(body)
	if got := r.conversation(); len(got) != 0 {
		t.Fatalf("chat endpoint: %q", got)
	}
	r.Endpoint, r.messagesDone = []byte("mcp"), false
	if got := setMessageText(t, r, PhaseRequest, 0, "{}"); got != codeInvalid {
		t.Fatalf("the tool_call record (raw JSON): status %d", got)
	}
	if got := setMessageText(t, r, PhaseRequest, 1, "[EMAIL_1]"); got != 0 {
		t.Fatalf("status %d", got)
	}
	if want := strings.Replace(body, "alice@example.com", "[EMAIL_1]", 1); string(r.Body) != want {
		t.Fatalf("body %s\nwant %s", r.Body, want)
	}
	want := "0 tool_call 9 6 46\nassistantsearch{\"query\":\"[EMAIL_1]\",\"filters\":{\"tags\":[\"a\"]}}\n" +
		"0 text 9 6 9\nassistant/query[EMAIL_1]\n0 text 9 15 1\nassistant/filters/tags/0a\n"
	if got := string(r.conversation()); got != want {
		t.Fatalf("conversation %q\nwant %q", got, want)
	}
}
