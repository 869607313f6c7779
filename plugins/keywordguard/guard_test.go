package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
)

func TestConfig(t *testing.T) {
	g, err := parseConfig([]byte(`{"deny": ["(?i)ignore (all )?previous instructions", "secret"],
		"message": "no", "status": 422, "header": {"name": "X-Keyword-Guard", "value": "checked"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.rules) != 2 || g.message != "no" || g.status != 422 || g.headerName != "X-Keyword-Guard" || g.headerValue != "checked" {
		t.Fatalf("%+v", g)
	}
	g, err = parseConfig([]byte(`{"deny":["x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.status != 400 || g.message != defaultMessage || g.headerName != "" {
		t.Fatalf("defaults: %+v", g)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{`{}`, `"deny" must list at least one regular expression`},
		{`{"deny": []}`, `"deny" must list at least one`},
		{`{"deny": "x"}`, `"deny" must be a list`},
		{`{"deny": ["ok", "(?i)bad("]}`, `deny[1] "(?i)bad(" is not a valid regular expression: error parsing regexp: missing closing )`},
		{`{"deny": ["ok", 3]}`, `deny[1] must be a string`},
		{`{"deny": [""]}`, `deny[0] is empty`},
		{`{"deny": ["x"], "status": 500}`, `"status" is 500; it must be an HTTP client error status, 400 to 499`},
		{`{"deny": ["x"], "status": 399}`, `"status" is 399`},
		{`{"deny": ["x"], "status": 400.5}`, `"status" is 400.5`},
		{`{"deny": ["x"], "status": "400"}`, `"status" must be a number`},
		{`{"deny": ["x"], "message": ""}`, `"message" must be 1 to 4096 bytes long`},
		{`{"deny": ["x"], "header": {"name": "X-A"}}`, `header.value is required`},
		{`{"deny": ["x"], "header": {"value": "v"}}`, `header.name is required`},
		{`{"deny": ["x"], "header": {"name": "X A", "value": "v"}}`, `header.name "X A" is not a valid header name`},
		{`{"deny": ["x"], "header": {"name": "Content-Length", "value": "1"}}`, `is a header the gateway manages`},
		{`{"deny": ["x"], "header": {"name": "X-A", "value": "a\r\nb"}}`, `must not contain CR, LF or NUL`},
		{`{"deny": ["x"], "header": {"name": "X-A", "value": "v", "x": 1}}`, `header: unknown key "x"`},
		{`{"deny": ["x"], "denny": ["y"]}`, `unknown key "denny" (keys: deny, message, status, header)`},
		{`[]`, `the config must be a JSON object`},
		{`{"deny": ["x"]} x`, `unexpected data after the value`},
	} {
		_, err := parseConfig([]byte(c.config))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.config, err, c.want)
		}
	}
}

func mustGuard(t testing.TB, deny ...string) *guard {
	t.Helper()
	cfg, _ := json.Marshal(map[string]any{"deny": deny})
	g, err := parseConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// parts returns one user text part per text, message i for texts[i].
func parts(texts ...string) []sdk.MessagePart {
	var ps []sdk.MessagePart
	for i, t := range texts {
		ps = append(ps, sdk.MessagePart{Index: i, Kind: sdk.PartText, Role: []byte("user"), Text: []byte(t)})
	}
	return ps
}

// check on its own: the first text in order that a rule matches, the first
// such rule; tool calls are not checked. (TestCheck in plugin_test.go
// runs request bodies through the built plugin.)
func TestCheckParts(t *testing.T) {
	g := mustGuard(t, `(?i)ignore previous instructions`, `(?i)\bsecret\b`)
	call := sdk.MessagePart{Index: 0, Kind: sdk.PartToolCall, Role: []byte("assistant"), Name: []byte("secret"), Text: []byte(`{"q":"secret"}`)}
	result := sdk.MessagePart{Index: 1, Kind: sdk.PartToolResult, Role: []byte("tool"), Name: []byte("c1"), Text: []byte("the secret")}
	tests := []struct {
		name          string
		parts         []sdk.MessagePart
		rule, message int
	}{
		{"none", nil, -1, -1},
		{"clean", parts("hello", "world"), -1, -1},
		{"second rule", parts("hello", "a SECRET"), 1, 1},
		{"first text first", parts("the secret", "ignore previous instructions"), 1, 0},
		{"first rule of a text", parts("secret: ignore previous instructions"), 0, 0},
		{"tool call skipped", []sdk.MessagePart{call}, -1, -1},
		{"tool result checked", []sdk.MessagePart{call, result}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rule, message := g.check(tt.parts)
			if rule != tt.rule || message != tt.message {
				t.Fatalf("got rule %d in message %d, want %d in %d", rule, message, tt.rule, tt.message)
			}
		})
	}
}

// A chat request of about 2 KB, as clients send them.
var benchBody = []byte(`{"model":"gpt-4o-mini","stream":true,"temperature":0.7,"max_tokens":512,` +
	`"messages":[{"role":"system","content":"You are a helpful assistant. Answer concisely and cite sources when you can."},` +
	`{"role":"user","content":"` + strings.Repeat("Summarize the quarterly report for the board. ", 20) + `"},` +
	`{"role":"assistant","content":"Here is a summary: revenue grew, costs fell, and the outlook is stable."},` +
	`{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("Now list the risks, with \\\"quotes\\\" kept. ", 10) + `"}]}]}`)

var benchDeny = []string{`(?i)ignore (all )?previous instructions`, `(?i)\bjailbreak\b`, `(?i)system prompt`,
	`\b\d{3}-\d{2}-\d{4}\b`, `(?i)\bpassword\b`}

// benchParts are benchBody's texts, as request_messages gives them.
var benchParts = parts("You are a helpful assistant. Answer concisely and cite sources when you can.",
	strings.Repeat("Summarize the quarterly report for the board. ", 20),
	"Here is a summary: revenue grew, costs fell, and the outlook is stable.",
	strings.Repeat("Now list the risks, with \"quotes\" kept. ", 10))

// BenchmarkCheck is the patterns over the texts of a 2 KB chat request
// (BenchmarkPluginRequest adds the host and the reading of the messages).
func BenchmarkCheck(b *testing.B) {
	g := mustGuard(b, benchDeny...)
	n := 0
	for _, p := range benchParts {
		n += len(p.Text)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		if rule, _ := g.check(benchParts); rule != -1 {
			b.Fatal(rule)
		}
	}
}
