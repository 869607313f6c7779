package mockllm

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectSDK connects the official MCP Go SDK's client to the mock's MCP
// endpoint. The SDK is the reference for what a correct server answers
// (version negotiation, sessions, SSE framing); it is imported by tests
// only, so no binary carries it.
func connectSDK(t *testing.T, url string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "mockllm-test", Version: "1"}, opts)
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, so)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	return cs
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content has %d items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func TestMCPWithSDKClient(t *testing.T) {
	for _, version := range []string{"", "2025-06-18", "2024-11-05"} {
		t.Run("version="+version, func(t *testing.T) {
			m, ts, _ := start(t, Config{MCPSleep: 20 * time.Millisecond})
			cs := connectSDK(t, ts.URL+MCPPath, nil, version)
			ctx := context.Background()

			init := cs.InitializeResult()
			want := version
			if want == "" {
				// The SDK asks for a newer revision (after a server/discover
				// the mock does not know); the mock offers its newest.
				want = MCPProtocolVersions[0]
			}
			if init.ProtocolVersion != want || init.Capabilities.Tools == nil || init.ServerInfo.Name != "mockllm" {
				t.Fatalf("initialize result = version %q, tools %v, server %+v", init.ProtocolVersion, init.Capabilities.Tools, init.ServerInfo)
			}
			if cs.ID() == "" {
				t.Fatal("no session id")
			}

			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != "echo,sleep,fail" {
				t.Fatalf("tools = %v", names)
			}
			schema, _ := json.Marshal(tools.Tools[0].InputSchema)
			if !strings.Contains(string(schema), `"required":["text"]`) {
				t.Fatalf("echo's schema = %s", schema)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "héllo \"mcp\"\n"}})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, res); got != "héllo \"mcp\"\n" || res.IsError {
				t.Fatalf("echo = %q, isError %v", got, res.IsError)
			}

			t0 := time.Now()
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 30}})
			if err != nil {
				t.Fatal(err)
			}
			if got, el := textOf(t, res), time.Since(t0); got != "slept 30ms" || el < 30*time.Millisecond {
				t.Fatalf("sleep 30 = %q after %v", got, el)
			}
			t0 = time.Now()
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep"})
			if err != nil {
				t.Fatal(err)
			}
			if got, el := textOf(t, res), time.Since(t0); got != "slept 20ms" || el < 20*time.Millisecond {
				t.Fatalf("sleep (configured 20ms) = %q after %v", got, el)
			}

			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail"})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || textOf(t, res) == "" {
				t.Fatalf("fail: isError %v, content %v", res.IsError, res.Content)
			}

			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"}); err == nil || !strings.Contains(err.Error(), "Unknown tool") {
				t.Fatalf("unknown tool: err = %v", err)
			}
			if err := cs.Ping(ctx, nil); err != nil {
				t.Fatalf("ping: %v", err)
			}

			id := cs.ID()
			if err := cs.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			if _, ok := m.mcpSessions.Load(id); ok {
				t.Fatal("the session outlived the client's DELETE")
			}
		})
	}
}

func TestMCPStreamWithSDKClient(t *testing.T) {
	_, ts, _ := start(t, Config{MCPStream: true, MCPProgress: 3, TTFT: time.Millisecond, InterToken: time.Millisecond})
	var (
		mu       sync.Mutex
		progress []float64
		tokens   []any
	)
	cs := connectSDK(t, ts.URL+MCPPath, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, req.Params.Progress)
			tokens = append(tokens, req.Params.ProgressToken)
			if req.Params.Total != 3 {
				t.Errorf("progress total = %v, want 3", req.Params.Total)
			}
		},
	}, "2025-06-18")
	defer cs.Close()

	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "streamed"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, res); got != "streamed" {
		t.Fatalf("echo = %q", got)
	}
	// The notifications precede the result in the stream, but the SDK may
	// hand them to the handler after CallTool returns.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(progress)
		mu.Unlock()
		if n >= 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(progress) // handled in any order
	if !slices.Equal(progress, []float64{1, 2, 3}) || tokens[0] != "tok-1" || tokens[2] != "tok-1" {
		t.Fatalf("progress = %v, tokens %v", progress, tokens)
	}
}

// rpc posts one JSON-RPC message to the mock's MCP endpoint.
func rpc(t *testing.T, c *http.Client, url, session, body string, extra map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	hdr := map[string]string{"Accept": "application/json, text/event-stream"}
	if session != "" {
		hdr["Mcp-Session-Id"] = session
	}
	for k, v := range extra {
		hdr[k] = v
	}
	resp, b, err := do(t, c, http.MethodPost, url, body, hdr)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if len(b) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("reply %s: %v", b, err)
		}
	}
	return resp, out
}

func errorCode(reply map[string]any) float64 {
	e, _ := reply["error"].(map[string]any)
	code, _ := e["code"].(float64)
	return code
}

func TestMCPProtocolErrors(t *testing.T) {
	_, ts, c := start(t, Config{})
	url := ts.URL + MCPPath
	resp, reply := rpc(t, c, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2099-01-01","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, nil)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	if v := reply["result"].(map[string]any)["protocolVersion"]; v != MCPProtocolVersions[0] {
		t.Fatalf("an unknown version negotiated to %v, want the newest", v)
	}

	tests := []struct {
		name    string
		method  string
		session string
		body    string
		header  map[string]string
		status  int
		code    float64 // JSON-RPC error code, 0 for none
	}{
		{"initialized notification", "POST", session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 202, 0},
		{"client response", "POST", session, `{"jsonrpc":"2.0","id":7,"result":{}}`, nil, 202, 0},
		{"ping", "POST", session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, nil, 200, 0},
		{"unknown method", "POST", session, `{"jsonrpc":"2.0","id":3,"method":"resources/list"}`, nil, 200, rpcMethodNotFound},
		{"unknown session", "POST", "feedface", `{"jsonrpc":"2.0","id":4,"method":"ping"}`, nil, 404, rpcInvalidRequest},
		{"no session", "POST", "", `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`, nil, 400, rpcInvalidRequest},
		{"unknown protocol version", "POST", session, `{"jsonrpc":"2.0","id":6,"method":"ping"}`, map[string]string{"MCP-Protocol-Version": "1999-01-01"}, 400, rpcInvalidRequest},
		{"not JSON", "POST", session, `{"jsonrpc":`, nil, 400, rpcParseError},
		{"not JSON-RPC 2.0", "POST", session, `{"jsonrpc":"1.0","id":8,"method":"ping"}`, nil, 400, rpcInvalidRequest},
		{"echo without text", "POST", session, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{}}}`, nil, 200, rpcInvalidParams},
		{"server stream", "GET", session, "", nil, 405, rpcInvalidRequest},
		{"end session", "DELETE", session, "", nil, 204, 0},
		{"ended session", "POST", session, `{"jsonrpc":"2.0","id":10,"method":"ping"}`, nil, 404, rpcInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Mcp-Session-Id": tt.session}
			for k, v := range tt.header {
				hdr[k] = v
			}
			resp, b, err := do(t, c, tt.method, url, tt.body, hdr)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, tt.status, b)
			}
			var reply map[string]any
			if len(b) > 0 {
				if err := json.Unmarshal(b, &reply); err != nil {
					t.Fatalf("reply %q: %v", b, err)
				}
			}
			if got := errorCode(reply); got != tt.code {
				t.Fatalf("error code %v, want %v (%s)", got, tt.code, b)
			}
			if tt.code == 0 && tt.status == 200 && reply["result"] == nil {
				t.Fatalf("no result: %s", b)
			}
			if tt.status == 202 && len(b) != 0 {
				t.Fatalf("202 with a body: %q", b)
			}
		})
	}
}

func TestMCPStreamHeaders(t *testing.T) {
	_, ts, c := start(t, Config{})
	url := ts.URL + MCPPath
	resp, _ := rpc(t, c, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, nil)
	session := resp.Header.Get("Mcp-Session-Id")
	call := `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	resp, b, err := do(t, c, http.MethodPost, url, call, map[string]string{
		"Mcp-Session-Id": session, HeaderMCPStream: "true", HeaderMCPProgress: "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"c1\",\"progress\":1,\"total\":2}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"c1\",\"progress\":2,\"total\":2}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"c1\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"x\"}],\"isError\":false}}\n\n"
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || string(b) != want {
		t.Fatalf("content type %q, body:\n%s", ct, b)
	}
	// Without the headers the same call answers JSON.
	resp, reply := rpc(t, c, url, session, call, nil)
	if resp.Header.Get("Content-Type") != "application/json" || reply["id"] != "c1" {
		t.Fatalf("JSON answer: %v %v", resp.Header, reply)
	}
	resp, _ = rpc(t, c, url, session, call, map[string]string{HeaderMCPProgress: "-1"})
	if resp.StatusCode != 400 {
		t.Fatalf("a negative %s: status %d", HeaderMCPProgress, resp.StatusCode)
	}
}
