// Package mcp holds the Model Context Protocol pieces the gateway reads
// and writes on the Streamable HTTP transport (MCP 2025-03-26 and
// 2025-06-18): the JSON-RPC message a client POSTs, the JSON-RPC errors
// the gateway answers in its stead, and the tools/list replies it filters
// by the tenant's plan; and on the older HTTP+SSE transport (2024-11-05)
// the endpoint events it rewrites (endpoint.go). It knows nothing of HTTP servers, plugins or
// tenants: the proxy (gateway/internal/proxy, mcp.go) glues it in.
// docs/adr/0029-mcp-gateway.md.
package mcp

import (
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// Kind is what a POSTed JSON-RPC message is.
type Kind uint8

const (
	// Request has a method and an id: the server answers it.
	Request Kind = iota + 1
	// Notification has a method and no id: the server answers 202.
	Notification
	// Response answers a request of the server's (sampling,
	// elicitation, roots): an id and a result or an error.
	Response
)

// JSON-RPC 2.0 error codes the gateway answers with.
const (
	// CodeParseError: the body is not JSON.
	CodeParseError = -32700
	// CodeInvalidRequest: not one JSON-RPC 2.0 message (a batch included).
	CodeInvalidRequest = -32600
	// CodeInvalidParams: a tools/call without a tool name.
	CodeInvalidParams = -32602
	// CodeRefused: the gateway or a plugin refused the request (a plan,
	// a rate limit, a budget, a guard): JSON-RPC's first
	// implementation-defined server error. data carries the HTTP status,
	// type and code the refusal has elsewhere in the gateway.
	CodeRefused = -32000
	// CodeUnavailable: the MCP server could not be reached, failed or
	// timed out, or the gateway is shutting down (a 5xx elsewhere).
	CodeUnavailable = -32001
)

// MaxToolName bounds a tools/call's tool name, which becomes part of the
// model the plugins, the call log and plan patterns see.
const MaxToolName = 128

// Message is the part of a POSTed JSON-RPC message the gateway routes and
// meters by. Its byte slices borrow the Reader's parse and are valid until
// the Reader's next Read.
type Message struct {
	Kind Kind
	// ID is the id's JSON (a number or a string, as sent); nil for a
	// notification.
	ID []byte
	// Method is the request's or notification's method; nil for a
	// response.
	Method []byte
	// Tool is a tools/call's params.name; nil otherwise.
	Tool []byte
}

// Error is a JSON-RPC error the gateway answers a message with.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return e.Message }

var (
	members      = [][]byte{[]byte("jsonrpc"), []byte("id"), []byte("method"), []byte("params"), []byte("result"), []byte("error")}
	paramMembers = [][]byte{[]byte("name")}
)

// Reader reads POSTed messages. Its zero value is ready; it is not safe
// for concurrent use (one per exchange, reused across them).
type Reader struct {
	p  fastjson.Parser
	id []byte
}

// Read reads body as one JSON-RPC 2.0 message. The error is the one to
// answer with (its id: m.ID when m.Kind is Request, else null).
func (r *Reader) Read(body []byte) (m Message, _ *Error) {
	v, err := r.p.ParseBytes(body)
	if err != nil {
		return m, &Error{CodeParseError, "Parse error: the body is not JSON."}
	}
	switch v.Type() {
	case fastjson.TypeArray:
		return m, &Error{CodeInvalidRequest, "Invalid Request: batches are not supported; send one JSON-RPC message per POST."}
	case fastjson.TypeObject:
	default:
		return m, &Error{CodeInvalidRequest, "Invalid Request: the body must be a JSON-RPC 2.0 object."}
	}
	// A member named twice, or in another case, is refused: the server's
	// decoder may read another occurrence than fastjson's Get (Go's
	// encoding/json takes the last, and matches names in any case), so a
	// plan would be checked against one tool and the server call another.
	obj, _ := v.Object()
	if openai.CheckMembers(obj, members) != nil {
		return m, &Error{CodeInvalidRequest, "Invalid Request: a member is named twice, or in another case."}
	}
	if string(v.GetStringBytes("jsonrpc")) != "2.0" {
		return m, &Error{CodeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0".`}
	}
	id := v.Get("id")
	if id != nil {
		if t := id.Type(); t != fastjson.TypeNumber && t != fastjson.TypeString {
			return m, &Error{CodeInvalidRequest, "Invalid Request: id must be a string or a number."}
		}
		r.id = id.MarshalTo(r.id[:0])
		m.ID = r.id
	}
	method := v.Get("method")
	if method == nil {
		if id == nil || (v.Get("result") == nil && v.Get("error") == nil) {
			return m, &Error{CodeInvalidRequest, "Invalid Request: a message needs a method, or an id with a result or an error."}
		}
		m.Kind = Response
		return m, nil
	}
	name, err := method.StringBytes()
	if err != nil || len(name) == 0 || !utf8.Valid(name) {
		return m, &Error{CodeInvalidRequest, "Invalid Request: method must be a non-empty UTF-8 string."}
	}
	m.Method, m.Kind = name, Notification
	if id == nil {
		return m, nil
	}
	m.Kind = Request
	if string(name) == "tools/call" {
		params := v.Get("params")
		if params == nil {
			return m, &Error{CodeInvalidParams, "Invalid params: tools/call needs params.name, a tool name of 1 to 128 bytes without control characters."}
		}
		if p, err := params.Object(); err == nil && openai.CheckMembers(p, paramMembers) != nil {
			return m, &Error{CodeInvalidRequest, "Invalid Request: params.name is named twice, or in another case."}
		}
		tool := params.GetStringBytes("name")
		if !validTool(tool) {
			return m, &Error{CodeInvalidParams, "Invalid params: tools/call needs params.name, a tool name of 1 to 128 bytes without control characters."}
		}
		m.Tool = tool
	}
	return m, nil
}

// validTool accepts a tool name the gateway can put in a model name:
// valid UTF-8 of 1 to MaxToolName bytes without control characters.
func validTool(b []byte) bool {
	if len(b) == 0 || len(b) > MaxToolName || !utf8.Valid(b) {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
