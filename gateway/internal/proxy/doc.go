// Package proxy is Tollgate's HTTP front: the fasthttp server and its
// routes (server.go), the policy state a request holds (state.go), and
// forwarding — parse, route, plugins, the attempts over a route's
// upstreams (attempt.go, route.go, provider.go), the reply — with the end
// of each exchange (finish.go: one teardown path), the client's disconnect
// watch and read-ahead, and what a finished request hands to be recorded
// (record.go). The passthrough endpoints (passthru.go) and MCP servers
// (mcp.go: the protocol's pieces are package mcp's) reuse that path with
// one attempt and their replies relayed.
//
// What it hands off lives in packages of its own: a streamed reply's body
// in proxy/stream; what is measured of a request (metrics, the access log
// line, traces) in proxy/observe, which sees a finished request as one
// observe.Finished value; the plugins' host services in hostsvc; what
// outlives a reload (Redis, limiter, budget counter, ledger) and the
// call-log row's charges and write in accounting; the cancel registry in
// cancels.
package proxy
