package proxy

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/mcp"
)

func TestMCPPath(t *testing.T) {
	tests := []struct {
		path, name string
		leg        mcpLeg
		ok         bool
	}{
		{"/mcp/docs", "docs", mcpStreamable, true},
		{"/mcp/docs/sse", "docs", mcpSSEStream, true},
		{"/mcp/docs/message", "docs", mcpSSEMessage, true},
		{"/mcp/docs/", "", 0, false},
		{"/mcp/docs/x", "", 0, false},
		{"/mcp/docs/sse/", "", 0, false},
		{"/mcp/docs/message/x", "", 0, false},
		{"/mcp//sse", "", 0, false},
		{"/mcp/", "", 0, false},
		{"/mcp", "", 0, false},
		{"/v1/mcp/docs", "", 0, false},
	}
	for _, tc := range tests {
		name, leg, ok := mcpPath([]byte(tc.path))
		if ok != tc.ok || (ok && (string(name) != tc.name || leg != tc.leg)) {
			t.Errorf("mcpPath(%q) = %q, %d, %v", tc.path, name, leg, ok)
		}
	}
}

// A server's URL without a path is requested at "/", and its query is
// kept on every request.
func TestNewMCPServers(t *testing.T) {
	p, err := config.Parse([]byte(`
version: 1
upstreams: [{name: a, base_url: "http://a/v1"}]
routes: [{models: [m], upstream: a}]
mcp:
  servers:
    - {name: bare, url: "http://127.0.0.1:9"}
    - {name: q, url: "http://127.0.0.1:9/mcp?tenant=x"}
    - {name: old, transport: sse, url: "http://127.0.0.1:9/v1/sse?tenant=x"}
    - {name: oldbare, transport: sse, url: "http://127.0.0.1:9"}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := newMCPServers(p, nil, false, mcp.NewEndpointKey(""))
	if err != nil {
		t.Fatal(err)
	}
	defer closeMCPServers(servers)
	// An SSE server's client is its origin: every request carries its
	// whole path, the GET the configured one.
	for name, want := range map[string]struct{ path, label, model, message string }{
		"bare":    {"", "/mcp/bare", "mcp:bare", ""},
		"q":       {"?tenant=x", "/mcp/q", "mcp:q", ""},
		"old":     {"/v1/sse?tenant=x", "/mcp/old", "mcp:old", "/mcp/old/message?endpoint="},
		"oldbare": {"/", "/mcp/oldbare", "mcp:oldbare", "/mcp/oldbare/message?endpoint="},
	} {
		s := servers[name]
		if s == nil || s.path != want.path || s.label != want.label || string(s.model) != want.model || s.route.wait != config.DefaultMCPTimeout ||
			s.message != want.message || s.sse != (want.message != "") {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if c := servers["old"].route.targets[0].client; c.Name() != "old" {
		t.Errorf("client %q", c.Name())
	}
	if p.MCP.Servers[0].Parsed.Path != "" {
		t.Error("the policy's URL was changed")
	}
}
