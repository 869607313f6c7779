package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// MCP servers (docs/POLICY.md, "MCP servers"; docs/adr/0029-mcp-gateway.md).
// The policy's mcp.servers are reached at /mcp/{name} over the Streamable
// HTTP transport: a POST carries one JSON-RPC message, a GET opens the
// server's stream, a DELETE ends a session (servers of the older HTTP+SSE
// transport: mcp_sse.go). Each request runs the plugin pipeline as a
// passthrough request does (request, response-headers and end phases),
// with the endpoint field "mcp" and the model mcp:{server}, or
// mcp:{server}/{tool} for a tools/call: plans' allowed_models and the rate
// limiter's model patterns then govern servers and tools as they govern
// models. One attempt is made (a tool call may act on the world), and the
// reply is relayed as it arrives, event by event for a stream. The gateway
// keeps no session state: the server's Mcp-Session-Id goes back and forth
// as a header, so any replica serves any session.

// endpointMCP is an MCP server's endpoint; the proxy's own value, like
// endpointMessages.
const endpointMCP = openai.Endpoint(0xfe)

// mcpEndpointName is the plugins' endpoint field of an MCP request.
var mcpEndpointName = []byte("mcp")

// mcpForwarded are the client headers an MCP server receives beside
// Content-Type and Accept (headerFilter's alwaysForwarded): the session,
// the protocol version, a stream's resumption point, and the standard
// headers that repeat a message's method, name and parameters (MCP
// 2026-07-28; the server checks them against the body, which is what
// the gateway reads). Never the client's credentials.
var mcpForwarded = []string{"mcp-session-id", "mcp-protocol-version", "last-event-id", "mcp-method", "mcp-name", "mcp-param-*"}

// mcpServer is one policy MCP server as the proxy serves it.
type mcpServer struct {
	name  string
	label string // the endpoint in metrics and the call log: /mcp/{name}
	model []byte // mcp:{name}
	// modelLabel is model as the metrics' model label: every request to
	// the server has it, whatever its tool (a client's choice).
	modelLabel string
	// path is what the request line carries after the URL's path: its
	// query, if any. For an SSE server, whose client's base path is
	// empty (a POST goes to the path its endpoint event gave), the SSE
	// endpoint's whole path and query.
	path  string
	route *route // the server, as the one member of a route
	// sse marks a server of the older HTTP+SSE transport (mcp_sse.go):
	// url is its configured SSE endpoint, which the endpoint event's
	// URI reference is resolved against; message the URL its rewritten
	// endpoint event gives a client, up to the token.
	sse     bool
	url     *url.URL
	message string
	key     *mcp.EndpointKey // signs and checks its message URLs' tokens
}

// newMCPServers builds the policy's MCP servers, each with its own
// connection pool (closed with the state) and its plugin selection
// compiled for pipe. With tracing the client's trace context is not
// forwarded (the gateway sends its own).
func newMCPServers(p *config.Policy, pipe *wasmhost.Pipeline, tracing bool, processKey *mcp.EndpointKey) (map[string]*mcpServer, error) {
	if len(p.MCP.Servers) == 0 {
		return nil, nil
	}
	key := processKey
	if p.MCP.EndpointKey != "" {
		key = mcp.NewEndpointKey(p.MCP.EndpointKey)
	}
	out := make(map[string]*mcpServer, len(p.MCP.Servers))
	for i := range p.MCP.Servers {
		ms := &p.MCP.Servers[i]
		addr := *ms.Parsed
		sse := ms.Transport == config.MCPSSE
		switch {
		case sse:
			addr.Path, addr.RawPath, addr.RawQuery = "", "", "" // the origin: each request carries its whole path
		case addr.Path == "":
			addr.Path = "/" // http://host:port is the request line's "/"
		}
		u := &config.Upstream{
			Name: ms.Name, Provider: "mcp", URL: &addr, Headers: ms.Headers,
			// No idle or total bound: a tool's progress stream and a
			// GET's server stream last as long as both ends keep them.
			Timeouts:       config.Timeouts{Connect: config.DefaultConnectTimeout, FirstByte: ms.Timeout},
			MaxConnections: config.DefaultUpstreamConns,
		}
		c := upstream.New(u)
		f := newHeaderFilter(append(append([]string(nil), mcpForwarded...), ms.ForwardHeaders...))
		if tracing {
			f.withhold("traceparent", "tracestate")
		}
		rt := &route{targets: []target{{client: c, filter: f, name: []byte(ms.Name)}}, wait: ms.Timeout}
		if ms.PluginNames != nil && pipe != nil {
			chain, err := pipe.Chain(ms.PluginNames)
			if err != nil {
				closeMCPServers(out)
				c.Close()
				return nil, fmt.Errorf("mcp.servers[%d].plugins: %w", i, err)
			}
			rt.chain = chain
		}
		rt.set = balance.NewSet([]*balance.Upstream{balance.NewUpstream(ms.Name, balance.Config{})}, []int{1})
		s := &mcpServer{name: ms.Name, label: "/mcp/" + ms.Name, model: mcp.AppendModel(nil, ms.Name, nil), route: rt}
		s.modelLabel = string(s.model)
		if q := ms.Parsed.RawQuery; q != "" {
			s.path = "?" + q
		}
		if sse {
			s.sse, s.url, s.message, s.key = true, ms.Parsed, s.label+"/message?"+mcpEndpointParam+"=", key
			if p := ms.Parsed.EscapedPath(); p != "" {
				s.path = p + s.path
			} else {
				s.path = "/" + s.path
			}
		}
		out[ms.Name] = s
	}
	return out, nil
}

// notifyCancelled tells the server at path (the POST's: mcpState.path)
// that the client's request rpcID, in session (nil: none) at protocol
// version proto, was cancelled through
// the gateway's cancel API: MCP's notifications/cancelled, since a closed
// connection is not a cancel to an MCP server (the spec has servers keep
// working on a request whose stream broke, for the client to resume). It
// is sent on its own goroutine, with the server's configured headers, at
// most once per cancelled request; its reply is discarded.
func (ms *mcpServer) notifyCancelled(log *slog.Logger, path string, session, proto, rpcID []byte) {
	body := append([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`), rpcID...)
	body = append(body, `,"reason":"cancelled through the gateway"}}`...)
	h := []byte("Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Method: notifications/cancelled\r\n")
	if len(session) > 0 {
		h = append(append(append(h, "Mcp-Session-Id: "...), session...), "\r\n"...)
	}
	if len(proto) > 0 {
		h = append(append(append(h, "Mcp-Protocol-Version: "...), proto...), "\r\n"...)
	}
	c := ms.route.targets[0].client
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ex, err := c.Do(ctx, &upstream.Request{Method: "POST", Path: path, Header: h, Body: body})
		if err != nil {
			log.Warn("mcp: the server was not told of a cancel", "server", ms.name, "err", err)
			return
		}
		ex.ReadAll(nil, 64<<10)
		ex.Release()
	}()
}

// closeMCPServers closes the servers' connection pools.
func closeMCPServers(servers map[string]*mcpServer) {
	for _, s := range servers {
		s.route.targets[0].client.Close()
	}
}

// mcpPath matches /mcp/{name}, /mcp/{name}/sse and /mcp/{name}/message:
// the name (not yet checked against the policy) and which of the
// server's transports' requests the path names.
func mcpPath(p []byte) ([]byte, mcpLeg, bool) {
	name, ok := bytes.CutPrefix(p, []byte("/mcp/"))
	if !ok {
		return nil, 0, false
	}
	leg := mcpStreamable
	if i := bytes.IndexByte(name, '/'); i >= 0 {
		switch string(name[i:]) {
		case "/sse":
			leg = mcpSSEStream
		case "/message":
			leg = mcpSSEMessage
		default:
			return nil, 0, false
		}
		name = name[:i]
	}
	return name, leg, len(name) > 0
}

func unknownMCPServer(name []byte) *openai.Error {
	return &openai.Error{Status: fasthttp.StatusNotFound, Type: "invalid_request_error", Code: "unknown_mcp_server",
		Message: fmt.Sprintf("No MCP server %q is served by this gateway.", truncateID(name))}
}
