package proxy

import (
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

func TestMCPPath(t *testing.T) {
	tests := []struct {
		path, name string
		ok         bool
	}{
		{"/mcp/docs", "docs", true},
		{"/mcp/docs/", "", false},
		{"/mcp/docs/x", "", false},
		{"/mcp/", "", false},
		{"/mcp", "", false},
		{"/v1/mcp/docs", "", false},
	}
	for _, tc := range tests {
		name, ok := mcpPath([]byte(tc.path))
		if ok != tc.ok || (ok && string(name) != tc.name) {
			t.Errorf("mcpPath(%q) = %q, %v", tc.path, name, ok)
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
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := newMCPServers(p, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeMCPServers(servers)
	for name, want := range map[string]struct{ path, label, model string }{
		"bare": {"", "/mcp/bare", "mcp:bare"},
		"q":    {"?tenant=x", "/mcp/q", "mcp:q"},
	} {
		s := servers[name]
		if s == nil || s.path != want.path || s.label != want.label || string(s.model) != want.model || s.route.wait != config.DefaultMCPTimeout {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if p.MCP.Servers[0].Parsed.Path != "" {
		t.Error("the policy's URL was changed")
	}
}
