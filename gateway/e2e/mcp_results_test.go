package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// resultServer is a real MCP server whose tools return what the gateway's
// guards act on: "echo" repeats its query beside an address of its own,
// in text, in structured content and beside an image whose base64 holds
// digits a phone detector would take; "link" returns a link to a storage
// host no tool may hand out; "progress" reports progress before its
// result, waiting for the client to have the report. It keeps the
// queries it was called with.
type resultServer struct {
	url         string
	mu          sync.Mutex
	queries     []string
	gotProgress chan struct{}
}

// resultImage is the echo tool's image: base64 that reads as digits.
const resultImage = "MTIzNDU2Nzg5MDEyMzQ1Ng=="

// startResultServer starts the server answering as replies says: "json"
// and "sse" on the Streamable HTTP transport (JSON bodies, event
// streams), "legacy" on the HTTP+SSE transport (url is its SSE endpoint).
func startResultServer(t *testing.T, replies string) *resultServer {
	t.Helper()
	rs := &resultServer{gotProgress: make(chan struct{})}
	srv := mcp.NewServer(&mcp.Implementation{Name: "results", Version: "1"}, nil)
	type query struct {
		Q string `json:"q"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *mcp.CallToolRequest, in query) (*mcp.CallToolResult, any, error) {
		rs.mu.Lock()
		rs.queries = append(rs.queries, in.Q)
		rs.mu.Unlock()
		return &mcp.CallToolResult{
			Content: []mcp.Content{
				&mcp.TextContent{Text: "found: " + in.Q + " and bob.smith@example.org"},
				&mcp.ImageContent{Data: []byte("1234567890123456"), MIMEType: "image/png"},
			},
			StructuredContent: map[string]any{"query": in.Q, "owner": "bob.smith@example.org"},
		}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "link", Description: "links"}, func(context.Context, *mcp.CallToolRequest, query) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Your file: https://files.evil.example/a/b.png (valid 1h)"}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", Description: "reports progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ query) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"}); err != nil {
			return nil, nil, err
		}
		select {
		case <-rs.gotProgress:
		case <-time.After(5 * time.Second):
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the progress report did not reach the client"}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done for bob.smith@example.org"}}}, nil, nil
	})
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: replies == "json"})
	if replies == "legacy" {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	rs.url = ts.URL + "/mcp"
	return rs
}

func (rs *resultServer) lastQuery(t *testing.T) string {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.queries) == 0 {
		t.Fatal("the server saw no call")
	}
	return rs.queries[len(rs.queries)-1]
}

// TestMCPResultsGuarded: the chunk phase runs on tool results, replies
// as JSON and as event streams: pii restores in a result the data it
// masked in the call's arguments (the server saw only placeholders) or
// redacts a result's own; holdback replaces a link no tool may hand out
// with its correction; a plugin's STOP withholds the result (the client
// gets a tool error with the plugin's text) and a failed plugin fails the
// call (a JSON-RPC error: nothing unchecked is relayed); an image's
// base64 is not read as text; progress still streams before a guarded
// result.
func TestMCPResultsGuarded(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	const holdback = `
  - name: holdback
    builtin: holdback
    on_error: fail_closed
    config: {markers: [files.evil.example], correction: "[link removed by policy]"}
`
	for _, replies := range []string{"json", "sse", "legacy"} {
		t.Run(replies, func(t *testing.T) {
			rs := startResultServer(t, replies)
			gateway := func(plugins string) *mcp.ClientSession {
				transport := "streamable_http"
				if replies == "legacy" {
					transport = "sse"
				}
				pol := policy(mockURL, "", "mock-1") + fmt.Sprintf(`
mcp:
  servers:
    - {name: results, url: %s, timeout: 5s, transport: %s}
plugins:
%s`, rs.url, transport, plugins)
				_, gw := startGateway(t, pol, nil)
				if replies == "legacy" {
					cs, err := connectMCPSSE(t, gw+"/mcp/results/sse", &keyTransport{name: "results"})
					if err != nil {
						t.Fatalf("initialize: %v", err)
					}
					return cs
				}
				cs, err := connectMCP(t, gw+"/mcp/results", &keyTransport{name: "results"}, &mcp.ClientOptions{
					ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
						select {
						case <-rs.gotProgress:
						default:
							close(rs.gotProgress)
						}
					},
				})
				if err != nil {
					t.Fatalf("initialize: %v", err)
				}
				return cs
			}
			pii := func(config string) string {
				return fmt.Sprintf("  - name: pii\n    builtin: pii\n    on_error: fail_closed\n    config: %s\n%s", config, holdback)
			}
			testPlugin := func(chunk string) string {
				return fmt.Sprintf("  - name: t\n    path: %s\n    on_error: fail_closed\n    config: {chunk: %q}\n", testPluginPath(t), chunk)
			}
			ctx := context.Background()

			t.Run("restored", func(t *testing.T) {
				cs := gateway(pii(`{mode: mask-and-restore}`))
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"q": "alice.jones@example.com"}})
				if err != nil {
					t.Fatal(err)
				}
				if q := rs.lastQuery(t); strings.Contains(q, "@") || q == "" {
					t.Fatalf("the server got %q: the argument was not masked", q)
				}
				text, img, sc := resultParts(t, res)
				if replies == "legacy" {
					// The result travels on the GET stream, whose request
					// is not the call that was masked: the placeholder
					// stays (docs/POLICY.md, the HTTP+SSE transport).
					if !strings.HasPrefix(text, "found: [EMAIL_1] and ") || strings.Contains(text, "alice") {
						t.Errorf("text %q", text)
					}
					return
				}
				if text != "found: alice.jones@example.com and bob.smith@example.org" {
					t.Errorf("text %q: the placeholder was not restored", text)
				}
				if sc["query"] != "alice.jones@example.com" || sc["owner"] != "bob.smith@example.org" {
					t.Errorf("structured content %v", sc)
				}
				if img != resultImage {
					t.Errorf("image data %q, want %q", img, resultImage)
				}
			})

			t.Run("redacted", func(t *testing.T) {
				cs := gateway(pii(`{mode: redact, reply: redact}`))
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"q": "weather in Lyon"}})
				if err != nil {
					t.Fatal(err)
				}
				text, img, sc := resultParts(t, res)
				raw, _ := json.Marshal(res)
				if strings.Contains(string(raw), "bob.smith") {
					t.Errorf("an address reached the client: %s", raw)
				}
				if !strings.HasPrefix(text, "found: weather in Lyon and [EMAIL_") || sc["query"] != "weather in Lyon" || !strings.HasPrefix(fmt.Sprint(sc["owner"]), "[EMAIL_") {
					t.Errorf("text %q, structured %v", text, sc)
				}
				if img != resultImage {
					t.Errorf("image data %q, want %q", img, resultImage)
				}

				if replies == "sse" {
					p := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"q": ""}}
					p.SetProgressToken("p-1")
					res, err := cs.CallTool(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					if text, _, _ := resultParts(t, res); !strings.HasPrefix(text, "done for [EMAIL_") {
						t.Errorf("progress: %q", text)
					}
				}
			})

			t.Run("link replaced", func(t *testing.T) {
				cs := gateway(pii(`{mode: redact}`))
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "link", Arguments: map[string]any{"q": "report"}})
				if err != nil {
					t.Fatal(err)
				}
				// holdback replaces a whole reply's text from the marker on.
				text, _, _ := resultParts(t, res)
				if !strings.Contains(text, "[link removed by policy]") || strings.Contains(text, "evil.example") {
					t.Errorf("text %q", text)
				}
			})

			t.Run("stopped", func(t *testing.T) {
				cs := gateway(testPlugin("stop:Withheld by the test's policy."))
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "link", Arguments: map[string]any{"q": "report"}})
				if err != nil {
					t.Fatalf("a withheld result is a tool error, not a protocol error: %v", err)
				}
				text, _, _ := resultParts(t, res)
				if !res.IsError || text != "Withheld by the test's policy." || len(res.Content) != 1 {
					t.Errorf("isError %v, text %q, %d items", res.IsError, text, len(res.Content))
				}
			})

			t.Run("plugin failed", func(t *testing.T) {
				cs := gateway(testPlugin("trap"))
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "link", Arguments: map[string]any{"q": "report"}})
				if err == nil {
					t.Fatal("a result no guard could check reached the client")
				}
				code, msg, data := refusal(t, err)
				if code != -32001 || data["code"] != "plugin_failed" || !strings.Contains(msg, `"t" failed`) {
					t.Errorf("code %d, message %q, data %v", code, msg, data)
				}
			})
		})
	}
}

// resultParts reads a tool result: its text items joined, its image's
// base64, its structured content.
func resultParts(t *testing.T, res *mcp.CallToolResult) (text, image string, structured map[string]any) {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			raw, _ := json.Marshal(c)
			var v struct{ Data string }
			json.Unmarshal(raw, &v)
			image = v.Data
		}
	}
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &structured)
	}
	return b.String(), image, structured
}

// TestMCPForwardHeaders: a server's forward_headers pass the client's
// headers it names (here the mock's X-Mock-MCP-Stream, which makes it
// answer as an event stream) and a server without them gets none.
func TestMCPForwardHeaders(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	root := strings.TrimSuffix(mockURL, "/v1")
	pol := policy(mockURL, "", "mock-1") + fmt.Sprintf(`
mcp:
  servers:
    - {name: fwd, url: %s/mcp, forward_headers: ["x-mock-*"]}
    - {name: plain, url: %s/mcp}
`, root, root)
	_, gw := startGateway(t, pol, nil)
	post := func(server, session, body string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", gw+"/mcp/"+server, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mockllm.HeaderMCPStream, "true")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(got)
	}
	for _, tc := range []struct{ server, want string }{{"fwd", "text/event-stream"}, {"plain", "application/json"}} {
		resp, got := post(tc.server, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		session := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != 200 || session == "" {
			t.Fatalf("%s: initialize: %d %s", tc.server, resp.StatusCode, got)
		}
		resp, got = post(tc.server, session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, tc.want) || !strings.Contains(got, `"hi"`) {
			t.Errorf("%s: %d %s %s; want %s", tc.server, resp.StatusCode, ct, got, tc.want)
		}
	}
}

// TestMCPServerPlugins: a server's plugins select the guards its calls
// run, as a route's do: pii redacts calls to and results from the server
// that runs every plugin, and leaves those of the one that runs none.
func TestMCPServerPlugins(t *testing.T) {
	_, mockURL := startMock(t, mockllm.Config{})
	rs := startResultServer(t, "json")
	pol := policy(mockURL, "", "mock-1") + fmt.Sprintf(`
mcp:
  servers:
    - {name: guarded, url: %s}
    - {name: open, url: %s, plugins: []}
plugins:
  - name: pii
    builtin: pii
    on_error: fail_closed
    config: {mode: redact, reply: redact}
`, rs.url, rs.url)
	_, gw := startGateway(t, pol, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		server  string
		guarded bool
	}{{"guarded", true}, {"open", false}} {
		cs, err := connectMCP(t, gw+"/mcp/"+tc.server, &keyTransport{name: tc.server}, nil)
		if err != nil {
			t.Fatalf("%s: initialize: %v", tc.server, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"q": "carol@example.net"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.server, err)
		}
		text, _, _ := resultParts(t, res)
		sent := rs.lastQuery(t)
		if tc.guarded == strings.Contains(sent, "@") || tc.guarded == strings.Contains(text, "bob.smith@") {
			t.Errorf("%s: the server got %q, the client %q", tc.server, sent, text)
		}
	}
}
