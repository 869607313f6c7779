package plugintest_test

import (
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
)

// TestRequestFacts checks that a plugin sees what the body says, as the
// gateway would show it, unless the Request overrides it.
func TestRequestFacts(t *testing.T) {
	p := plugintest.Load(t, plugintest.Build(t, "testdata/factsplugin"), "")
	chat := `{"model":"gpt-4o","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	tests := []struct {
		name string
		req  plugintest.Request
		want string
	}{
		{"from the body", plugintest.Request{Body: chat},
			"model=gpt-4o endpoint=chat/completions stream=true max_tokens=50 messages=1 prompt_chars=11 prompt_tokens=6 body_bytes=101"},
		{"explicit fields override", plugintest.Request{Body: chat, Model: "m2", MaxTokens: 7, Messages: 3, PromptChars: 5, PromptTokens: 9},
			"model=m2 endpoint=chat/completions stream=true max_tokens=7 messages=3 prompt_chars=5 prompt_tokens=9 body_bytes=101"},
		{"explicit zero values", plugintest.Request{Body: chat, Explicit: plugintest.FieldStream | plugintest.FieldMaxTokens | plugintest.FieldMessages},
			"model=gpt-4o endpoint=chat/completions stream=false max_tokens=0 messages=0 prompt_chars=11 prompt_tokens=6 body_bytes=101"},
		{"negative max tokens is absent", plugintest.Request{Body: chat, MaxTokens: -1},
			"model=gpt-4o endpoint=chat/completions stream=true max_tokens=-1 messages=1 prompt_chars=11 prompt_tokens=6 body_bytes=101"},
		{"no body", plugintest.Request{},
			"model=test-model endpoint=chat/completions stream=false max_tokens=-1 messages=0 prompt_chars=0 prompt_tokens=0 body_bytes=0"},
		{"embeddings", plugintest.Request{Endpoint: "embeddings", Body: `{"model":"e","input":["abcd","ef"]}`},
			"model=e endpoint=embeddings stream=false max_tokens=-1 messages=2 prompt_chars=6 prompt_tokens=1 body_bytes=35"},
		{"messages API", plugintest.Request{Endpoint: "messages", Body: `{"model":"claude","max_tokens":9,"system":"sys","messages":[{"role":"user","content":"hi"}]}`},
			"model=claude endpoint=messages stream=false max_tokens=9 messages=1 prompt_chars=5 prompt_tokens=5 body_bytes=92"},
		{"MCP tool call", plugintest.Request{Endpoint: "mcp", Model: "mcp:files/read_file",
			Body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}`},
			"model=mcp:files/read_file endpoint=mcp stream=false max_tokens=-1 messages=0 prompt_chars=0 prompt_tokens=1 body_bytes=101 tool=files/read_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := p.Request(tt.req)
			if res.Err != nil || res.Rejected {
				t.Fatalf("request: %+v", res)
			}
			if got := res.ClientHeaders["X-Facts"]; got != tt.want {
				t.Errorf("plugin saw\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}
