package wasmhost

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// rewritePipeline loads testdata/rewriteplugin once per config.
func rewritePipeline(t *testing.T, configs ...string) *Pipeline {
	t.Helper()
	mod := builtModule(t, "testdata/rewriteplugin")
	specs := make([]Spec, len(configs))
	for i, c := range configs {
		specs[i] = Spec{Name: fmt.Sprintf("rw%d", i), Module: mod, Config: []byte(c), Deadline: time.Second}
	}
	pl, err := NewPipeline(context.Background(), testHost(t), specs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return pl
}

// clientHeader is the last value a plugin set for the client's header.
func clientHeader(r *Request, name string) string {
	v := ""
	for _, h := range r.SetClientHeaders {
		if string(h.Name) == name {
			v = string(h.Value)
		}
	}
	return v
}

// A plugin's rewrite is what it reads back and what the plugins after it
// read: texts, body and prompt facts.
func TestRewriteThroughPipeline(t *testing.T) {
	pl := rewritePipeline(t,
		`{"report":"X-Before"}`,
		`{"replace":{"alice@example.com":"<EMAIL_1>"},"set":[{"record":1,"text":"{}"},{"record":9,"text":"x"}],"report":"X-Writer"}`,
		`{"report":"X-After"}`)
	body := `{"model":"m","max_tokens":5,"system":"Mail alice@example.com if needed.","messages":[` +
		`{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{"to":"alice@example.com"}}]},` +
		`{"role":"user","content":"Write to alice@example.com, please."}]}`
	r := request(body)
	defer ReleaseRequest(r)
	r.Endpoint, r.Refacts = []byte("messages"), readFacts
	if err := readFacts(r); err != nil {
		t.Fatal(err)
	}
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(body, `Mail alice@example.com`, `Mail <EMAIL_1>`)
	want = strings.ReplaceAll(want, `Write to alice@example.com`, `Write to <EMAIL_1>`)
	if string(r.Body) != want || !r.BodyRewritten() {
		t.Fatalf("body\n%s\nwant\n%s", r.Body, want)
	}
	f, _ := ReadRequestFacts([]byte(want), "messages")
	before, _ := ReadRequestFacts([]byte(body), "messages")
	texts := `texts=Mail <EMAIL_1> if needed.|{"to":"alice@example.com"}|Write to <EMAIL_1>, please.`
	bound := func(f RequestFacts) int64 {
		n, ok := PromptTokensBound(f.Bound, f.Messages, ModelFacts{})
		if !ok {
			return -1
		}
		return n
	}
	after := fmt.Sprintf("chars=%d tokens=%d bytes=%d bound=%d %s", f.PromptChars, f.PromptTokens, len(want), bound(f), texts)
	for name, w := range map[string]string{
		"X-Before": fmt.Sprintf("status= chars=%d tokens=%d bytes=%d bound=%d texts=Mail alice@example.com if needed.|{\"to\":\"alice@example.com\"}|Write to alice@example.com, please.",
			before.PromptChars, before.PromptTokens, len(body), bound(before)),
		// The tool_use input holds the address too: not rewritable.
		"X-Writer": "status=ok,invalid,ok,invalid,absent " + after,
		"X-After":  "status= " + after,
	} {
		if got := clientHeader(r, name); got != w {
			t.Errorf("%s:\n got %s\nwant %s", name, got, w)
		}
	}
	if f.PromptChars >= before.PromptChars || bound(f) >= bound(before) {
		t.Fatalf("the rewrite did not shorten the prompt: %d → %d", before.PromptChars, f.PromptChars)
	}
}

// set_message_text is refused outside the request phase, and the body
// stays.
func TestRewriteOutsideRequest(t *testing.T) {
	pl := rewritePipeline(t, `{"phase":"response_headers","set":[{"record":0,"text":"x"}],"report":"X-R"}`)
	body := `{"messages":[{"role":"user","content":"hi"}]}`
	r := request(body)
	defer ReleaseRequest(r)
	r.Refacts = readFacts
	if err := pl.Request(r); err != nil {
		t.Fatal(err)
	}
	if err := pl.ResponseHeaders(r, 200); err != nil {
		t.Fatal(err)
	}
	if got := clientHeader(r, "X-R"); !strings.HasPrefix(got, "status=not_allowed ") || string(r.Body) != body {
		t.Fatalf("report %q, body %s", got, r.Body)
	}
}
