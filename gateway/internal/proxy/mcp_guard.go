package proxy

import (
	"fmt"

	"github.com/tollgate/tollgate/gateway/internal/mcp"
	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/proxy/stream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The chunk phase on MCP replies (sdk/ABI.md, "MCP tool results"): the
// reply to a tools/call or a resources/read — a JSON body, or the
// response event of an event stream, held until whole — has each of its
// strings (mcp.Results) checked as a whole reply's text is: one on_chunk
// call per string, flags TEXT|WHOLE, in document order. A REPLACE
// rewrites that string in place; a STOP withholds the reply: the client
// gets a tool result with isError true whose text is what the plugin
// emitted (a tool error the model reads); a plugin that fails under
// fail_closed turns it into a JSON-RPC error (plugin_failed). Other
// messages (progress and other notifications, the server's own requests)
// pass as they are.

// mcpGuarded reports whether the request's reply runs the chunk phase
// with a chunk plugin left: a tools/call's or a resources/read's, or an
// HTTP+SSE stream, which carries the replies to every request its client
// POSTs (its tool outputs are guarded: mcp.Results.Output).
func (x *exchange) mcpGuarded() bool {
	m := &x.mcp
	if m.sse.leg != mcpSSEStream && (!m.isRequest() || (m.method != mcpToolsCall && m.method != mcpResourcesRead)) {
		return false
	}
	return x.st.pipeline.Wants(x.wr, wasmhost.PhaseChunk)
}

// The methods whose replies are guarded.
const (
	mcpToolsCall = iota + 1
	mcpResourcesRead
)

// mcpMethod is what the guard needs of a request's method.
func mcpMethod(name []byte) uint8 {
	switch string(name) {
	case "tools/call":
		return mcpToolsCall
	case "resources/read":
		return mcpResourcesRead
	}
	return 0
}

// mcpGuard runs the chunk phase on msg, one message of the server's
// reply, and appends what the client is sent in its place to dst;
// changed false (dst as it was) when msg goes as it is.
func (x *exchange) mcpGuard(dst, msg []byte, status int) (_ []byte, changed bool) {
	m, wr := &x.mcp, x.wr
	n, err := m.res.Read(msg)
	if n == 0 || (m.sse.leg == mcpSSEStream && !m.res.Output()) {
		return dst, false
	}
	if err != nil {
		// More strings than the guards check: not relayed unchecked.
		x.s.log.Error("mcp: a reply withheld: "+err.Error(), "server", m.srv.name, "strings", n)
		return x.mcpGuardFailed(dst, &openai.Error{Status: 502, Type: "server_error", Code: "mcp_reply_too_large",
			Message: fmt.Sprintf("The MCP server %q sent a reply with more than %d strings, more than the gateway's guards check.", m.srv.name, mcp.MaxResultStrings)}), true
	}
	wr.ClientHeader = nil
	wr.Status = status
	pipe := x.st.pipeline
	replaced := false
	for i := range n {
		res, err := pipe.Chunk(wr, m.res.Text(i), wasmhost.ChunkText|wasmhost.ChunkWhole)
		switch {
		case err != nil:
			x.s.log.Error("plugin failed on an MCP reply; reply withheld (fail_closed)", "err", err)
			return x.mcpGuardFailed(dst, stream.PluginFailed(err, " while checking the MCP server's reply.")), true
		case res.Verdict == wasmhost.Stop:
			m.stopped = true
			text := res.Text
			if len(text) == 0 {
				text = fmt.Appendf(m.scratch[:0], "The tool's result was withheld by the gateway's policy %q.", res.Plugin)
			}
			return m.res.AppendWithheld(dst, text), true
		case res.Verdict == wasmhost.Replace:
			m.res.Replace(i, res.Text)
			replaced = true
		}
	}
	if !replaced {
		return dst, false
	}
	return m.res.AppendRewritten(dst, msg), true
}

// mcpGuardFailed appends the JSON-RPC error a reply the guards could not
// check is replaced with, for the reply's id.
func (x *exchange) mcpGuardFailed(dst []byte, e *openai.Error) []byte {
	return appendRefusal(dst, x.mcp.res.ID(), e, 0)
}

// mcpGuardEvent is mcpGuard for one event of a server's stream: ev's
// data, when it is a message to guard, is replaced by what the guard
// leaves of it.
func (x *exchange) mcpGuardEvent(dst, ev []byte) (_ []byte, changed bool) {
	m := &x.mcp
	if m.data = mcp.EventData(m.data[:0], ev); len(m.data) == 0 {
		return dst, false
	}
	start := len(dst)
	dst, changed = x.mcpGuard(dst, m.data, 200)
	if !changed {
		return dst, false
	}
	m.msg = append(m.msg[:0], dst[start:]...) // dst is rebuilt around it
	return mcp.AppendEvent(dst[:start], ev, m.msg), true
}

// mcpEndFlags are flags with what the guard did to the reply.
func (m *mcpState) mcpEndFlags(flags uint32) uint32 {
	if m.stopped {
		flags |= wasmhost.EndStopped
	}
	return flags
}
