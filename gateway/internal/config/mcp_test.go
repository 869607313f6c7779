package config

import (
	"strings"
	"testing"
)

func TestMCPServers(t *testing.T) {
	const base = `
version: 1
upstreams: [{name: a, base_url: "http://a/v1"}]
routes: [{models: [m], upstream: a}]
`
	env := func(k string) (string, bool) {
		if k == "DOCS_TOKEN" {
			return "secret", true
		}
		return "", false
	}
	tests := []struct {
		name, yaml string
		problem    string // "" for none
		transport  string // the servers', when there is no problem
	}{
		{"none", base, "", ""},
		{"one", base + "mcp: {servers: [{name: docs, url: 'http://127.0.0.1:9000/mcp?x=1', headers: {Authorization: 'Bearer ${DOCS_TOKEN}'}}]}\n", "", "streamable_http"},
		{"sse", base + "mcp: {servers: [{name: docs, transport: sse, url: 'http://127.0.0.1:9000/sse?x=1', headers: {Authorization: 'Bearer ${DOCS_TOKEN}'}}]}\n", "", "sse"},
		{"bad transport", base + "mcp: {servers: [{name: d, transport: websocket, url: 'http://h/mcp'}]}\n", `mcp.servers[0].transport: must be "streamable_http" or "sse", got "websocket"`, ""},
		{"bad name", base + "mcp: {servers: [{name: Docs, url: 'http://h/mcp'}]}\n", `mcp.servers[0].name: must be lower-case letters`, ""},
		{"name with a slash", base + "mcp: {servers: [{name: 'a/b', url: 'http://h/mcp'}]}\n", `mcp.servers[0].name`, ""},
		{"duplicate", base + "mcp: {servers: [{name: d, url: 'http://h/mcp'}, {name: d, url: 'http://i/mcp'}]}\n", `mcp.servers[1].name: "d" is already used by mcp.servers[0]`, ""},
		{"no url", base + "mcp: {servers: [{name: d}]}\n", "mcp.servers[0].url: is required", ""},
		{"bad scheme", base + "mcp: {servers: [{name: d, url: 'ws://h/mcp'}]}\n", `mcp.servers[0].url: scheme must be http or https`, ""},
		{"no host", base + "mcp: {servers: [{name: d, url: 'http:///mcp'}]}\n", "mcp.servers[0].url: has no host", ""},
		{"user info", base + "mcp: {servers: [{name: d, url: 'http://u:p@h/mcp'}]}\n", "mcp.servers[0].url: must not carry a fragment or user info", ""},
		{"negative timeout", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', timeout: -1s}]}\n", "mcp.servers[0].timeout: must not be negative", ""},
		{"gateway's header", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', headers: {Mcp-Session-Id: x}}]}\n", "mcp.servers[0].headers.Mcp-Session-Id: is set by the gateway", ""},
		{"a message's header", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', headers: {Mcp-Param-Q: x}}]}\n", "mcp.servers[0].headers.Mcp-Param-Q: is set by the gateway", ""},
		{"bad header name", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', headers: {'a b': x}}]}\n", `mcp.servers[0].headers: invalid header name "a b"`, ""},
		{"forwarded headers", base + "mcp: {servers: [{name: d, url: 'http://h/mcp?x=1', headers: {Authorization: 'Bearer ${DOCS_TOKEN}'}, forward_headers: [x-trace-id, 'x-mock-*']}]}\n", "", "streamable_http"},
		{"bad forwarded pattern", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', forward_headers: ['x-[']}]}\n", `mcp.servers[0].forward_headers[0]: invalid header name or pattern "x-["`, ""},
		{"forwarding a configured header", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', headers: {X-Server-Token: t}, forward_headers: ['X-*']}]}\n",
			`mcp.servers[0].forward_headers[0]: "X-*" matches X-Server-Token`, ""},
		{"plugins of no chain", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', plugins: strict}]}\n", `mcp.servers[0].plugins: names no chain: "strict"`, ""},
		{"plugins not in the policy", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', plugins: [nope]}]}\n", `mcp.servers[0].plugins`, ""},
		{"short endpoint key", base + "mcp: {endpoint_key: short, servers: [{name: d, transport: sse, url: 'http://h/sse'}]}\n", "mcp.endpoint_key: must be at least 32 bytes, got 5", ""},
		{"endpoint key", base + "mcp: {endpoint_key: '0123456789abcdef0123456789abcdef', servers: [{name: d, transport: sse, url: 'http://h/sse?x=1', headers: {Authorization: 'Bearer ${DOCS_TOKEN}'}}]}\n", "", "sse"},
		{"unknown field", base + "mcp: {servers: [{name: d, url: 'http://h/mcp', tools: [x]}]}\n", "mcp.servers[0].tools", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.yaml), env)
			if tt.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tt.problem) {
					t.Fatalf("error %v, want %q", err, tt.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.MCP.Servers {
				if s.Parsed == nil || s.Timeout != DefaultMCPTimeout || s.Transport != tt.transport {
					t.Errorf("%+v: not parsed or defaulted", s)
				}
				if s.Headers["Authorization"] != "Bearer secret" || s.Parsed.RawQuery != "x=1" {
					t.Errorf("headers %v, query %q", s.Headers, s.Parsed.RawQuery)
				}
			}
		})
	}
}
