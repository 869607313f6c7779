package config

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"
)

// MCP configures the Model Context Protocol servers the gateway fronts
// (docs/POLICY.md, "MCP servers"; docs/adr/0029-mcp-gateway.md): each is
// reached at /mcp/{name} over the Streamable HTTP transport (or at
// /mcp/{name}/sse over the older HTTP+SSE one), with the tenant's gateway
// key, under its plan, rate limits, plugins and call log.
type MCP struct {
	Servers []MCPServer `yaml:"servers"`
	// EndpointKey signs the message URLs the gateway gives clients of
	// servers with transport sse (from the environment as ${VAR}, at
	// least 32 bytes): replicas that share it accept each other's. Without
	// it each process signs with a random key of its own, and a session's
	// POSTs must reach the replica that relays its stream.
	EndpointKey string `yaml:"endpoint_key"`
}

// MinMCPEndpointKey is the shortest mcp.endpoint_key accepted.
const MinMCPEndpointKey = 32

// MCPServer is one MCP server behind the gateway.
type MCPServer struct {
	// Name is the server's path segment (/mcp/NAME) and its name in plan
	// patterns (mcp:NAME, mcp:NAME/TOOL): lower-case letters, digits,
	// '_' and '-', starting with a letter or digit.
	Name string `yaml:"name"`
	// Transport is how the server speaks MCP: "streamable_http" (the
	// default; MCP 2025-03-26 and later) or "sse", the older HTTP+SSE
	// transport (MCP 2024-11-05), reached at /mcp/NAME/sse.
	Transport string `yaml:"transport"`
	// URL is the server's endpoint (http or https): its Streamable HTTP
	// endpoint, or with transport sse its SSE endpoint (the GET stream).
	URL string `yaml:"url"`
	// Headers are sent to the server with every request: its own
	// credentials, from the environment as ${VAR}. The client's
	// Authorization and X-Api-Key (its gateway key) never are.
	Headers map[string]string `yaml:"headers"`
	// ForwardHeaders lists client request headers passed on to the
	// server beside the MCP ones, as case-insensitive names or glob
	// patterns ("x-tenant-*"), as an upstream's forward_headers: the
	// client's credentials never pass, and none may match a header of
	// Headers (a client would send the server's credential).
	ForwardHeaders []string `yaml:"forward_headers"`
	// Plugins are the plugins the server's requests run, as a route's
	// (routes[].plugins): the name of an entry of chains, or a list of
	// plugin names (default: every plugin), in the policy's order.
	Plugins *PluginSelection `yaml:"plugins"`
	// Timeout bounds how long a POST waits for the server's first byte
	// (default 60s). Nothing bounds a reply once it started: a tool's
	// event stream and a GET's server stream last as long as both ends
	// keep them.
	Timeout time.Duration `yaml:"timeout"`

	// Parsed is URL parsed.
	Parsed *url.URL `yaml:"-"`
	// PluginNames is Plugins resolved by validation: nil for every
	// plugin, else the names of the server's plugins (empty for none).
	PluginNames []string `yaml:"-"`
}

// DefaultMCPTimeout is an MCP server's first-byte timeout.
const DefaultMCPTimeout = 60 * time.Second

// The MCP servers' transports.
const (
	MCPStreamableHTTP = "streamable_http"
	MCPSSE            = "sse"
)

var mcpServerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

func (p *Policy) applyMCPDefaults() {
	for i := range p.MCP.Servers {
		setDefault(&p.MCP.Servers[i].Timeout, DefaultMCPTimeout)
		setDefault(&p.MCP.Servers[i].Transport, MCPStreamableHTTP)
	}
}

func (p *Policy) validateMCP(ps *Problems) {
	if k := p.MCP.EndpointKey; k != "" && len(k) < MinMCPEndpointKey {
		ps.add("mcp.endpoint_key", "must be at least %d bytes, got %d: a random secret, such as the output of `openssl rand -base64 32`", MinMCPEndpointKey, len(k))
	}
	names := map[string]int{}
	for i := range p.MCP.Servers {
		s := &p.MCP.Servers[i]
		at := fmt.Sprintf("mcp.servers[%d]", i)
		switch j, dup := names[s.Name]; {
		case !mcpServerName.MatchString(s.Name):
			ps.add(at+".name", "must be lower-case letters, digits, '_' and '-', starting with a letter or digit, got %q", s.Name)
		case dup:
			ps.add(at+".name", "%q is already used by mcp.servers[%d]", s.Name, j)
		default:
			names[s.Name] = i
		}
		if s.Transport != MCPStreamableHTTP && s.Transport != MCPSSE {
			ps.add(at+".transport", "must be %q or %q, got %q", MCPStreamableHTTP, MCPSSE, s.Transport)
		}
		switch u, err := url.Parse(s.URL); {
		case s.URL == "":
			ps.add(at+".url", "is required")
		case err != nil:
			ps.add(at+".url", "not a URL: %v", err)
		case u.Scheme != "http" && u.Scheme != "https":
			ps.add(at+".url", "scheme must be http or https, got %q", u.Scheme)
		case u.Host == "":
			ps.add(at+".url", "has no host")
		case u.Fragment != "" || u.User != nil:
			ps.add(at+".url", "must not carry a fragment or user info")
		default:
			s.Parsed = u
		}
		if s.Timeout < 0 {
			ps.add(at+".timeout", "must not be negative")
		}
		for j, h := range s.ForwardHeaders {
			if _, err := path.Match(h, ""); err != nil || h == "" {
				ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, j), "invalid header name or pattern %q", h)
				continue
			}
			for k := range s.Headers {
				if ok, _ := path.Match(strings.ToLower(h), strings.ToLower(k)); ok {
					ps.add(fmt.Sprintf("%s.forward_headers[%d]", at, j), "%q matches %s, which the gateway sets from headers: a client would send its own value", h, k)
				}
			}
		}
		for k, v := range s.Headers {
			switch {
			case !validHeaderName(k):
				ps.add(at+".headers", "invalid header name %q", k)
			case mcpReservedHeader(k):
				ps.add(at+".headers."+k, "is set by the gateway from the client's request")
			}
			if strings.ContainsAny(v, "\r\n\x00") {
				ps.add(at+".headers."+k, "value must not contain CR, LF or NUL")
			}
		}
	}
}

// mcpReservedHeader reports the headers the gateway writes itself on a
// request to an MCP server: configured ones would be sent twice.
func mcpReservedHeader(k string) bool {
	switch k = strings.ToLower(k); k {
	case "host", "content-length", "content-type", "accept", "mcp-session-id", "mcp-protocol-version", "last-event-id",
		"mcp-method", "mcp-name", "x-request-id", "transfer-encoding", "connection":
		return true
	}
	return strings.HasPrefix(k, "mcp-param-")
}
