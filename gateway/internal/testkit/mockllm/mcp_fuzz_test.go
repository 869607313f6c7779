package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzMCPMessage posts any body to the MCP endpoint within a session. The
// reply is never a panic: it is 202 without a body, or a JSON-RPC
// message as encoding/json reads it (an SSE stream's events each one),
// whose id is the request's when encoding/json reads one there, and which
// holds a result or an error.
func FuzzMCPMessage(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hé\"llo\n"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"sleep","arguments":{"ms":0}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fail","_meta":{"progressToken":"t"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":4,"result":{}}`,
		`{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"jsonrpc":"2.0","id":{"x":1},"method":"nope"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":-1}}}`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	s := New(Config{MCPProgress: 2})
	init := httptest.NewRecorder()
	s.ServeHTTP(init, httptest.NewRequest("POST", MCPPath, strings.NewReader(
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`)))
	session := init.Header().Get("Mcp-Session-Id")
	if session == "" {
		f.Fatalf("initialize: %d %s", init.Code, init.Body)
	}
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Arguments struct {
					MS *int64 `json:"ms"`
				} `json:"arguments"`
			} `json:"params"`
		}
		idKnown := json.Unmarshal(body, &req) == nil
		if ms := req.Params.Arguments.MS; ms != nil && *ms > 10 {
			return // too slow to serve
		}
		r := httptest.NewRequest("POST", MCPPath, bytes.NewReader(body))
		r.Header.Set("Mcp-Session-Id", session)
		r.Header.Set(HeaderMCPStream, map[bool]string{true: "true", false: "false"}[stream])
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code == http.StatusAccepted {
			if w.Body.Len() != 0 {
				t.Fatalf("202 with a body: %q", w.Body)
			}
			return
		}
		if w.Code != 200 && w.Code != 400 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
		var msgs [][]byte
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			for line := range strings.SplitSeq(w.Body.String(), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					msgs = append(msgs, []byte(data))
				}
			}
		} else {
			msgs = [][]byte{w.Body.Bytes()}
		}
		if len(msgs) == 0 {
			t.Fatalf("no message in %q", w.Body)
		}
		reply := msgs[len(msgs)-1] // progress notifications come first
		var got struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		for _, m := range msgs {
			if !json.Valid(m) {
				t.Fatalf("not JSON: %s", m)
			}
		}
		if err := json.Unmarshal(reply, &got); err != nil || got.JSONRPC != "2.0" || (got.Result == nil) == (got.Error == nil) {
			t.Fatalf("not a JSON-RPC response (%v): %s", err, reply)
		}
		if idKnown && len(req.ID) > 0 && !bytes.Equal(got.ID, req.ID) {
			t.Fatalf("reply id %s, request id %s", got.ID, req.ID)
		}
		if w.Code == 400 && got.Error == nil {
			t.Fatalf("400 without an error: %s", reply)
		}
	})
}
