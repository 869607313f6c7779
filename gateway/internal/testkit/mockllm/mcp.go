package mockllm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// MCPPath is the path of the mock's Model Context Protocol endpoint, a
// Streamable HTTP server (one JSON-RPC 2.0 message per POST):
//
//   - initialize starts a session, its id in the Mcp-Session-Id reply
//     header, and negotiates the protocol version (the client's if it is
//     in MCPProtocolVersions, else the newest); the server offers tools.
//   - Every other message needs a live session's Mcp-Session-Id (missing:
//     400; unknown or ended: 404) and, if sent, a known
//     MCP-Protocol-Version (else 400).
//   - Notifications and the client's responses get 202 and no body.
//   - tools/list lists MCPToolEcho, MCPToolSleep and MCPToolFail;
//     tools/call calls one; ping answers {}. Another method is -32601.
//   - DELETE ends the session; GET is 405 (the server never opens a
//     stream of its own).
//
// Replies are application/json; with Config.MCPStream (or the
// X-Mock-MCP-Stream header) tools/call answers text/event-stream:
// Config.MCPProgress notifications/progress events, then the result.
const MCPPath = "/mcp"

// Tools of the MCP endpoint.
const (
	// MCPToolEcho returns its argument "text" as one text content item.
	MCPToolEcho = "echo"
	// MCPToolSleep sleeps its argument "ms" milliseconds (Config.MCPSleep
	// without it), then says so.
	MCPToolSleep = "sleep"
	// MCPToolFail answers a tool error: a result with isError true.
	MCPToolFail = "fail"
)

// MCPProtocolVersions are the protocol revisions the MCP endpoint speaks,
// newest first.
var MCPProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// JSON-RPC 2.0 error codes.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
)

// Canonical header keys of the MCP transport.
var (
	keyMCPSession  = canonical("Mcp-Session-Id")
	keyMCPProtocol = canonical("MCP-Protocol-Version")
)

// mcpToolList is the tools/list result, fixed.
var mcpToolList = []byte(`{"tools":[` +
	`{"name":"echo","description":"Returns its text argument as a text content item.",` +
	`"inputSchema":{"type":"object","properties":{"text":{"type":"string","description":"the text to return"}},"required":["text"]}},` +
	`{"name":"sleep","description":"Sleeps ms milliseconds (the server's configured time without it), then answers.",` +
	`"inputSchema":{"type":"object","properties":{"ms":{"type":"integer","minimum":0,"description":"milliseconds to sleep"}}}},` +
	`{"name":"fail","description":"Always answers a tool error (isError true).",` +
	`"inputSchema":{"type":"object","properties":{}}}]}`)

// mcpMessage is one JSON-RPC message as received: a request (ID and
// Method), a notification (Method only) or a response (ID and Result or
// Error).
type mcpMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// mcpCall is the params of tools/call.
type mcpCall struct {
	Name      string `json:"name"`
	Arguments struct {
		Text *string `json:"text"`
		MS   *int64  `json:"ms"`
	} `json:"arguments"`
	Meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	} `json:"_meta"`
}

// serveMCP serves MCPPath.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, body []byte, p *params) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		sid := r.Header.Get(keyMCPSession)
		if sid == "" {
			s.writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "Mcp-Session-Id header required")
			return
		}
		if _, ok := s.mcpSessions.LoadAndDelete(sid); !ok {
			s.writeRPCError(w, http.StatusNotFound, nil, rpcInvalidRequest, "session not found")
			return
		}
		s.writeEmpty(w, http.StatusNoContent)
		return
	default:
		w.Header()["Allow"] = []string{"POST, DELETE"}
		s.writeRPCError(w, http.StatusMethodNotAllowed, nil, rpcInvalidRequest, "method not allowed: this server opens no stream of its own")
		return
	}
	var msg mcpMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		if !json.Valid(body) {
			s.writeRPCError(w, http.StatusBadRequest, nil, rpcParseError, "Parse error: the body is not JSON")
			return
		}
		// JSON, but not a message (a batch, a method that is no
		// string...): the id is answered if it can be read.
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &idOnly)
		s.writeRPCError(w, http.StatusBadRequest, idOnly.ID, rpcInvalidRequest, "Invalid Request: the body is not one JSON-RPC message")
		return
	}
	if msg.JSONRPC != "2.0" || msg.Method == "" && (len(msg.ID) == 0 || msg.Result == nil && msg.Error == nil) {
		s.writeRPCError(w, http.StatusBadRequest, msg.ID, rpcInvalidRequest, `Invalid Request: want jsonrpc "2.0" and a method, or a response`)
		return
	}
	if msg.Method == "initialize" {
		s.mcpInitialize(w, &msg)
		return
	}
	sid := r.Header.Get(keyMCPSession)
	if sid == "" {
		s.writeRPCError(w, http.StatusBadRequest, msg.ID, rpcInvalidRequest, "Mcp-Session-Id header required (send initialize first)")
		return
	}
	if _, ok := s.mcpSessions.Load(sid); !ok {
		s.writeRPCError(w, http.StatusNotFound, msg.ID, rpcInvalidRequest, "session not found")
		return
	}
	if v := r.Header.Get(keyMCPProtocol); v != "" && !slices.Contains(MCPProtocolVersions, v) {
		s.writeRPCError(w, http.StatusBadRequest, msg.ID, rpcInvalidRequest, "unsupported MCP-Protocol-Version "+strconv.Quote(v))
		return
	}
	if len(msg.ID) == 0 || msg.Method == "" { // a notification, or the client's response
		s.writeEmpty(w, http.StatusAccepted)
		return
	}
	switch msg.Method {
	case "ping":
		s.writeRPCResult(w, msg.ID, []byte("{}"))
	case "tools/list":
		s.writeRPCResult(w, msg.ID, mcpToolList)
	case "tools/call":
		s.mcpCallTool(w, r, &msg, p)
	default:
		s.writeRPCError(w, http.StatusOK, msg.ID, rpcMethodNotFound, "Method not found: "+msg.Method)
	}
}

// mcpInitialize starts a session.
func (s *Server) mcpInitialize(w http.ResponseWriter, msg *mcpMessage) {
	if len(msg.ID) == 0 {
		s.writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "initialize must be a request (it has no id)")
		return
	}
	var params struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(msg.Params, &params); err != nil || params.ProtocolVersion == "" {
		s.writeRPCError(w, http.StatusOK, msg.ID, rpcInvalidParams, "initialize needs params.protocolVersion")
		return
	}
	version := params.ProtocolVersion
	if !slices.Contains(MCPProtocolVersions, version) {
		version = MCPProtocolVersions[0]
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand's contract)
	sid := hex.EncodeToString(raw[:])
	s.mcpSessions.Store(sid, version)
	w.Header()[keyMCPSession] = []string{sid}
	b := append([]byte(nil), `{"protocolVersion":`...)
	b = appendString(b, version)
	b = append(b, `,"capabilities":{"tools":{"listChanged":false}},"serverInfo":{"name":"mockllm","version":"1.0.0"}}`...)
	s.writeRPCResult(w, msg.ID, b)
}

// mcpCallTool serves tools/call: after TTFT, as JSON; or as SSE, the
// first progress notification after TTFT, the others and the result
// InterToken apart.
func (s *Server) mcpCallTool(w http.ResponseWriter, r *http.Request, msg *mcpMessage, p *params) {
	var call mcpCall
	if err := json.Unmarshal(msg.Params, &call); err != nil {
		s.writeRPCError(w, http.StatusOK, msg.ID, rpcInvalidParams, "tools/call params: "+err.Error())
		return
	}
	bp := bufPool.Get().(*[]byte)
	defer func() { bufPool.Put(bp) }()
	res := append((*bp)[:0], `{"content":[{"type":"text","text":`...)
	isError := false
	switch call.Name {
	case MCPToolEcho:
		if call.Arguments.Text == nil {
			s.writeRPCError(w, http.StatusOK, msg.ID, rpcInvalidParams, `echo needs a string argument "text"`)
			return
		}
		res = appendString(res, *call.Arguments.Text)
	case MCPToolSleep:
		d := s.cfg.MCPSleep
		if ms := call.Arguments.MS; ms != nil {
			if *ms < 0 {
				s.writeRPCError(w, http.StatusOK, msg.ID, rpcInvalidParams, `sleep's "ms" must be >= 0`)
				return
			}
			d = time.Duration(*ms) * time.Millisecond
		}
		if !p.wait.wait(d) {
			s.noticeClose(r)
			return
		}
		res = append(res, `"slept `...)
		res = append(res, d.String()...)
		res = append(res, '"')
	case MCPToolFail:
		res = append(res, `"mock: the tool failed, as asked"`...)
		isError = true
	default:
		s.writeRPCError(w, http.StatusOK, msg.ID, rpcInvalidParams, "Unknown tool: "+call.Name)
		return
	}
	res = append(res, `}],"isError":`...)
	res = strconv.AppendBool(res, isError)
	res = append(res, '}')
	*bp = res
	if !p.mcpStream {
		if !p.wait.wait(p.ttft) {
			s.noticeClose(r)
			return
		}
		s.writeRPCResult(w, msg.ID, res)
		return
	}
	token := call.Meta.ProgressToken
	if len(token) == 0 {
		// The client asked for no progress: the notifications name the
		// request by its id instead.
		token = msg.ID
	}
	s.mcpStream(w, r, p, msg.ID, token, res)
}

// mcpStream writes a tools/call answer as SSE: p.mcpProgress progress
// notifications, then the response carrying result.
func (s *Server) mcpStream(w http.ResponseWriter, r *http.Request, p *params, id, token, result []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	ev := bufPool.Get().(*[]byte)
	defer func() { bufPool.Put(ev) }()
	delay := p.ttft
	for i := 1; i <= p.mcpProgress; i++ {
		if !p.wait.wait(delay) {
			s.noticeClose(r)
			return
		}
		delay = p.interToken
		b := append((*ev)[:0], "event: message\ndata: "...)
		b = append(b, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":`...)
		b = append(b, token...)
		b = append(b, `,"progress":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"total":`...)
		b = strconv.AppendInt(b, int64(p.mcpProgress), 10)
		b = append(b, "}}\n\n"...)
		*ev = b
		if _, err := w.Write(b); err != nil {
			s.noticeClose(r)
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if !p.wait.wait(delay) {
		s.noticeClose(r)
		return
	}
	b := append((*ev)[:0], "event: message\ndata: "...)
	b = appendRPCResult(b, id, result)
	b = append(b, "\n\n"...)
	*ev = b
	if _, err := w.Write(b); err != nil {
		s.noticeClose(r)
		return
	}
	if flusher != nil {
		flusher.Flush()
	}
	s.completed.Add(1)
}

// appendRPCResult appends the JSON-RPC response carrying result to b.
func appendRPCResult(b, id, result []byte) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// writeRPCResult writes a JSON-RPC response carrying result.
func (s *Server) writeRPCResult(w http.ResponseWriter, id, result []byte) {
	bp := bufPool.Get().(*[]byte)
	b := appendRPCResult((*bp)[:0], id, result)
	s.writeJSON(w, http.StatusOK, b)
	*bp = b
	bufPool.Put(bp)
}

// writeRPCError writes a JSON-RPC error response; a nil id (a message
// whose id could not be read) is written as null.
func (s *Server) writeRPCError(w http.ResponseWriter, status int, id []byte, code int, msg string) {
	b := append([]byte(nil), `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, id...)
	}
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, "}}"...)
	s.writeJSON(w, status, b)
}

// writeEmpty writes a reply without a body and counts it as completed.
func (s *Server) writeEmpty(w http.ResponseWriter, status int) {
	w.WriteHeader(status)
	s.completed.Add(1)
}
