package plugintest_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const rewritePlugin = "../wasmhost/testdata/rewriteplugin"

// RequestResult.Body is the body as the plugin left it, and the plugin's
// later reads see the new body's facts.
func TestRequestRewrite(t *testing.T) {
	p := plugintest.Load(t, plugintest.Build(t, rewritePlugin), `{"replace":{"4111 1111 1111 1111":"<CARD>"},"report":"X-R"}`)
	tests := []struct {
		name, endpoint, body, want string
		status                     string
	}{
		{"chat", "chat/completions", `{"model":"m","messages":[{"role":"user","content":"card 4111 1111 1111 1111 ok"}]}`,
			`{"model":"m","messages":[{"role":"user","content":"card <CARD> ok"}]}`, "ok"},
		{"responses", "responses", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"4111 1111 1111 1111"}]}]}`,
			`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"<CARD>"}]}]}`, "ok"},
		// An MCP tool call: the arguments' raw JSON (the tool_call record)
		// cannot be rewritten, the string inside it can.
		{"mcp", "mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"card":"4111 1111 1111 1111","n":[1]}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"card":"<CARD>","n":[1]}}}`, "invalid,ok"},
		{"mcp_as_chat", "chat/completions", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"card":"4111 1111 1111 1111"}}}`, "", ""},
		{"untouched", "chat/completions", `{"model":"m","messages":[{"role":"user","content":"nothing here"}]}`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := p.Request(plugintest.Request{Endpoint: tc.endpoint, Body: tc.body, PromptChars: 1000})
			if res.Err != nil || res.Rejected {
				t.Fatalf("%+v", res)
			}
			want := tc.want
			if want == "" {
				want = tc.body
			}
			if res.Body != want || res.Rewritten != (tc.want != "") {
				t.Fatalf("body %s (rewritten %v), want %s", res.Body, res.Rewritten, want)
			}
			f, _ := wasmhost.ReadRequestFacts([]byte(want), tc.endpoint)
			chars := f.PromptChars
			if tc.want == "" {
				chars = 1000 // the test's override stands while the body does
			}
			report := res.ClientHeaders["X-R"]
			if !strings.HasPrefix(report, "status="+tc.status+" ") || !strings.Contains(report, " chars="+itoa(chars)+" ") ||
				!strings.Contains(report, " bytes="+itoa(int64(len(want)))+" ") {
				t.Fatalf("report %q (want chars %d, bytes %d)", report, chars, len(want))
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
