package loadgen

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

// MCPIDMark is the placeholder Config.MCP replaces in each body with the
// request's JSON-RPC id: the MCP transport wants every request of a
// session to carry a new id.
const MCPIDMark = "{{id}}"

// MCPProtocolVersion is the protocol revision an MCP run asks for in
// initialize; later requests send the one the server answered.
const MCPProtocolVersion = "2025-06-18"

// mcpAccept is the Accept header of every MCP request.
const mcpAccept = "application/json, text/event-stream"

// mcpError is an answer that arrived but is not a successful tool call: a
// JSON-RPC error, a tool error, a reply without a result, or a JSON reply
// where Stream asked for a stream. Like an HTTP error status it is a fast,
// legitimate answer: no backoff.
type mcpError struct{ msg string }

func (e *mcpError) Error() string { return e.msg }

var (
	errToolError = &mcpError{"MCP tool call answered isError: true"}
	errNoResult  = &mcpError{"MCP reply carried no result"}
	errNotStream = &mcpError{"MCP reply was not an SSE stream (Content-Type is not text/event-stream)"}
)

var (
	keyResult      = []byte(`"result":`)
	keyError       = []byte(`"error":`)
	keyMethod      = []byte(`"method":`)
	keyIsErrorTrue = []byte(`"isError":true`)
	keyVersion     = []byte(`"protocolVersion":"`)
	eventStream    = []byte("text/event-stream")
)

// mcpBody is the generated tools/call of "echo"; a streamed run also asks
// for progress notifications, under the request's id as token.
func mcpBody(cfg Config) []byte {
	text := "Say hello in one short sentence."
	if cfg.Unique {
		text += " " + UniqueMark
	}
	b := `{"jsonrpc":"2.0","id":` + MCPIDMark + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}`
	if cfg.Stream {
		b += `,"_meta":{"progressToken":` + MCPIDMark + `}`
	}
	return []byte(b + "}}")
}

// mcpSession is a worker's MCP session: the two requests that open it,
// reused whenever it has to be opened again.
type mcpSession struct {
	init, initialized *fasthttp.Request
	open              bool
	nextID            int64
}

func newMCPSession(cfg Config) *mcpSession {
	request := func(body string) *fasthttp.Request {
		r := fasthttp.AcquireRequest()
		r.SetRequestURI(cfg.URL)
		r.Header.SetMethod(fasthttp.MethodPost)
		r.Header.SetContentType("application/json")
		r.Header.Set(fasthttp.HeaderAccept, mcpAccept)
		for _, h := range cfg.Headers {
			r.Header.Set(h.Name, h.Value)
		}
		r.SetBodyString(body)
		return r
	}
	return &mcpSession{
		init: request(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + MCPProtocolVersion +
			`","capabilities":{},"clientInfo":{"name":"tollgate-loadgen","version":"1"}}}`),
		initialized: request(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
	}
}

func (m *mcpSession) release() {
	fasthttp.ReleaseRequest(m.init)
	fasthttp.ReleaseRequest(m.initialized)
}

// openMCP opens the worker's session: initialize, then the session id and
// the negotiated version set on the requests that follow, then
// notifications/initialized.
func (w *worker) openMCP() error {
	m := w.mcp
	if err := w.client.Do(m.init, w.resp); err != nil {
		return fmt.Errorf("MCP initialize: %w", err)
	}
	body := w.resp.Body() // reads a streamed body to its end
	if code := w.resp.StatusCode(); code < 200 || code > 299 {
		return &statusError{code: code, body: "MCP initialize: " + snippet(body)}
	}
	if !bytes.Contains(body, keyResult) {
		return &mcpError{"MCP initialize answered no result: " + snippet(body)}
	}
	version := []byte(MCPProtocolVersion)
	if i := bytes.Index(body, keyVersion); i >= 0 {
		v := body[i+len(keyVersion):]
		if j := bytes.IndexByte(v, '"'); j > 0 {
			version = v[:j]
		}
	}
	sid := w.resp.Header.Peek("Mcp-Session-Id")
	for _, r := range []*fasthttp.Request{m.initialized, w.req} {
		// A server without sessions sends no id; then neither does the
		// client.
		if len(sid) > 0 {
			r.Header.SetBytesV("Mcp-Session-Id", sid)
		} else {
			r.Header.Del("Mcp-Session-Id")
		}
		r.Header.SetBytesV("MCP-Protocol-Version", version)
	}
	if err := w.client.Do(m.initialized, w.resp); err != nil {
		return fmt.Errorf("MCP notifications/initialized: %w", err)
	}
	body = w.resp.Body()
	if code := w.resp.StatusCode(); code < 200 || code > 299 {
		return &statusError{code: code, body: "MCP notifications/initialized: " + snippet(body)}
	}
	m.open, m.nextID = true, 1
	return nil
}

// onceMCP sends one tools/call, opening the session first if it is not
// open (untimed), and times it.
func (w *worker) onceMCP() (sample, error) {
	if !w.mcp.open {
		if err := w.openMCP(); err != nil {
			return sample{}, err
		}
	}
	w.renumber()
	if w.stream {
		return w.onceMCPStream()
	}
	start := time.Now()
	err := w.client.Do(w.req, w.resp)
	latency := time.Since(start)
	if err != nil {
		return sample{}, err
	}
	body := w.resp.Body()
	if err := w.mcpStatus(w.resp.StatusCode(), body); err != nil {
		return sample{}, err
	}
	// The body is the JSON reply, or an SSE stream whose last event is.
	if err := checkReply(body); err != nil {
		return sample{}, err
	}
	return sample{latency: latency}, nil
}

// onceMCPStream sends one tools/call that must be answered as SSE, and
// timestamps the stream's first event and the call's result.
func (w *worker) onceMCPStream() (sample, error) {
	start := time.Now()
	if err := w.client.Do(w.req, w.resp); err != nil {
		return sample{}, err
	}
	defer w.resp.CloseBodyStream() //nolint:errcheck
	body := w.resp.BodyStream()
	if code := w.resp.StatusCode(); code < 200 || code > 299 {
		var msg []byte
		if body != nil {
			msg, _ = io.ReadAll(io.LimitReader(body, 64<<10))
		}
		return sample{}, w.mcpStatus(code, msg)
	}
	if !bytes.HasPrefix(w.resp.Header.ContentType(), eventStream) {
		if body != nil {
			// Read to the end so the connection can be reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<20))
		}
		return sample{}, errNotStream
	}
	if body == nil {
		return sample{}, errNoResult
	}
	w.lines.Reset(body)
	var (
		s                        sample
		gotEvent, gotReply, cont bool
		replyErr                 error
	)
	for {
		line, err := w.lines.ReadSlice('\n')
		if len(line) > 0 && !cont && bytes.HasPrefix(line, sseData) {
			if !gotEvent {
				s.ttft, gotEvent = time.Since(start), true
			}
			// The reply is the data line without a method: the others
			// are the server's notifications and requests.
			if !gotReply && !bytes.Contains(line, keyMethod) {
				gotReply, replyErr = true, checkReply(line)
				s.total = time.Since(start)
			}
		}
		// A line longer than the buffer arrives in pieces; only its
		// first piece is looked at.
		cont = err == bufio.ErrBufferFull
		if err == nil || cont {
			continue
		}
		if err == io.EOF {
			break
		}
		w.lines.Reset(nil)
		return sample{}, fmt.Errorf("reading stream: %w", err)
	}
	s.latency = time.Since(start)
	w.lines.Reset(nil)
	switch {
	case !gotReply:
		return sample{}, errNoResult
	case replyErr != nil:
		return sample{}, replyErr
	}
	return s, nil
}

// mcpStatus turns a non-2xx status into an error; after a 404 (the server
// forgot the session) the next request opens a new one.
func (w *worker) mcpStatus(code int, body []byte) error {
	if code >= 200 && code <= 299 {
		return nil
	}
	if code == fasthttp.StatusNotFound {
		w.mcp.open = false
	}
	return &statusError{code: code, body: snippet(body)}
}

// checkReply checks the JSON-RPC reply to a tools/call: a result, and
// not a tool error.
func checkReply(msg []byte) error {
	switch {
	case bytes.Contains(msg, keyIsErrorTrue):
		return errToolError
	case bytes.Contains(msg, keyResult):
		return nil
	}
	if i := bytes.Index(msg, keyError); i >= 0 {
		// The error object alone: the envelope's id would make every
		// failure a message of its own.
		e := bytes.TrimSuffix(bytes.TrimSpace(msg[i+len(keyError):]), []byte("}"))
		return &mcpError{"MCP JSON-RPC error: " + snippet(e)}
	}
	return errNoResult
}
