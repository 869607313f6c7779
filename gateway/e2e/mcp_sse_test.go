package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// sseDocsServer is a real MCP server of the older HTTP+SSE transport (the
// official Go SDK's SSEHandler) with the tools search and delete.
type sseDocsServer struct {
	url      string // its SSE endpoint
	badCreds atomic.Int64
	posts    atomic.Int64 // message POSTs it got
}

func startSSEDocsServer(t *testing.T) *sseDocsServer {
	t.Helper()
	d := &sseDocsServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	type query struct {
		Q string `json:"q,omitempty"`
	}
	for _, name := range []string{"search", "delete"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: name + " the docs"}, func(_ context.Context, _ *mcp.CallToolRequest, in query) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ": " + in.Q}}}, nil, nil
		})
	}
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Docs-Token") != docsToken || r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			d.badCreds.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == "POST" {
			d.posts.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	d.url = ts.URL + "/sse"
	return d
}

// mcpSSEPolicy is mcpPolicy with the docs server on the HTTP+SSE
// transport at sseURL.
func mcpSSEPolicy(mockURL, sseURL string) string {
	return strings.Replace(mcpPolicy(mockURL, sseURL), "      url: "+sseURL, "      transport: sse\n      url: "+sseURL, 1)
}

func connectMCPSSE(t *testing.T, endpoint string, tr *keyTransport) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	// The SDK's stream lives under Connect's context: not a timeout's.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	timer := time.AfterFunc(10*time.Second, cancel)
	cs, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}}, nil)
	timer.Stop()
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// TestMCPSSEThroughGateway: the official client and server of the HTTP+SSE
// transport talk through the gateway: the client POSTs to the gateway's
// message URL, which carries the server's; tools lists on the stream are
// filtered by plan; an allowed call's result and a refused call's
// JSON-RPC error reach the client on its stream; the call log has each
// POST's row and the GET's at the stream's end; the server never sees a
// client's key.
func TestMCPSSEThroughGateway(t *testing.T) {
	docs := startSSEDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	gw, logs := startLoggingGateway(t, mcpSSEPolicy(mockURL, docs.url), mcpVars)
	endpoint := gw + "/mcp/docs/sse"

	acmeTr := &keyTransport{key: "tg_mcp_acme", name: "acme"}
	acme, err := connectMCPSSE(t, endpoint, acmeTr)
	if err != nil {
		t.Fatalf("acme: initialize: %v", err)
	}
	globexTr := &keyTransport{key: "tg_mcp_globex", name: "globex"}
	globex, err := connectMCPSSE(t, endpoint, globexTr)
	if err != nil {
		t.Fatalf("globex: initialize: %v", err)
	}
	ctx := context.Background()

	t.Run("the endpoint event points at the gateway", func(t *testing.T) {
		ev := firstEvent(t, endpoint, "tg_mcp_acme")
		data, ok := strings.CutPrefix(ev, "event: endpoint\ndata: /mcp/docs/message?endpoint=")
		if !ok {
			t.Fatalf("first event %q", ev)
		}
		// The token is the server's target and its signature.
		target, err := base64.RawURLEncoding.DecodeString(strings.Split(strings.TrimSpace(data), ".")[0])
		if err != nil || !strings.HasPrefix(string(target), "/sse?sessionid=") {
			t.Errorf("token %q: %q, %v", data, target, err)
		}
	})

	t.Run("tools/list is filtered by plan", func(t *testing.T) {
		if got := toolNamesOf(t, acme); !slices.Equal(got, []string{"delete", "search"}) {
			t.Errorf("acme lists %v", got)
		}
		if got := toolNamesOf(t, globex); !slices.Equal(got, []string{"search"}) {
			t.Errorf("globex lists %v", got)
		}
	})

	t.Run("tools/call allowed and refused", func(t *testing.T) {
		if got, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "gateway"}}); err != nil || got != "search: gateway" {
			t.Errorf("search: %q, %v", got, err)
		}
		if got, err := callText(t, acme, ctx, &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"q": "x"}}); err != nil || got != "delete: x" {
			t.Errorf("acme delete: %q, %v", got, err)
		}
		posts := docs.posts.Load()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := callText(t, globex, cctx, &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"q": "x"}})
		if err == nil {
			t.Fatal("globex called delete")
		}
		code, msg, data := refusal(t, err)
		if code != -32000 || !strings.Contains(msg, "mcp:docs/delete") || data["status"] != 403.0 || data["code"] != "model_not_allowed" {
			t.Errorf("refusal %d %q %v", code, msg, data)
		}
		if n := docs.posts.Load() - posts; n != 0 {
			t.Errorf("the refused call reached the server (%d POSTs)", n)
		}
		// The session goes on after a refusal.
		if got, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "again"}}); err != nil || got != "search: again" {
			t.Errorf("search after the refusal: %q, %v", got, err)
		}
	})

	t.Run("call log rows", func(t *testing.T) {
		for _, tc := range []struct {
			what, model string
			status      int
			transport   *keyTransport
		}{
			{"initialize", "mcp:docs", 202, acmeTr},
			{"tools/call search", "mcp:docs/search", 202, globexTr},
			{"tools/call delete", "mcp:docs/delete", 403, globexTr},
		} {
			line := accessLine2(t, logs, tc.transport.idOf(t, tc.what))
			for _, want := range []string{"tenant=" + tc.transport.name, "endpoint=/mcp/docs", "model=" + tc.model, "upstream=docs", fmt.Sprintf("status=%d", tc.status)} {
				if !strings.Contains(line, " "+want+" ") {
					t.Errorf("%s: no %s in %s", tc.what, want, line)
				}
			}
		}
		getID := acmeTr.idOf(t, "GET")
		acme.Close()
		line := accessLine2(t, logs, getID)
		for _, want := range []string{"tenant=acme", "endpoint=/mcp/docs", "model=mcp:docs", "upstream=docs", "status=200"} {
			if !strings.Contains(line, " "+want+" ") {
				t.Errorf("GET: no %s in %s", want, line)
			}
		}
		if strings.Contains(logs.String(), "search: gateway") {
			t.Error("a tool's result reached the log")
		}
	})

	t.Run("paths, methods and tokens", func(t *testing.T) {
		auth := []string{"Authorization", "Bearer tg_mcp_acme", "Content-Type", "application/json"}
		ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
		for _, tc := range []struct {
			name, path string
			status     int
			want       string
		}{
			{"the Streamable HTTP path", "/mcp/docs", 404, "GET /mcp/docs/sse"},
			{"no token", "/mcp/docs/message", 400, `"code":"invalid_mcp_endpoint"`},
			{"a token that is no path", "/mcp/docs/message?endpoint=" + base64.RawURLEncoding.EncodeToString([]byte("x")), 400, `"code":"invalid_mcp_endpoint"`},
			{"not base64url", "/mcp/docs/message?endpoint=L3Nz+ZQ", 400, `"code":"invalid_mcp_endpoint"`},
		} {
			status, _, body := post(t, gw+tc.path, ping, auth...)
			if status != tc.status || !strings.Contains(string(body), tc.want) {
				t.Errorf("%s: %d %s", tc.name, status, body)
			}
		}
		status, h, _ := post(t, endpoint, ping, auth...)
		if status != 405 || h.Get("Allow") != "GET" {
			t.Errorf("POST to the stream: %d, Allow %q", status, h.Get("Allow"))
		}
	})

	t.Run("a cancel of the GET ends the session", func(t *testing.T) {
		id := globexTr.idOf(t, "GET")
		if st, body := cancelCall(t, gw, "tg_mcp_globex", id); st != 200 {
			t.Fatalf("cancel %s: %d %s", id, st, body)
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := callText(t, globex, cctx, &mcp.CallToolParams{Name: "search"}); err == nil || cctx.Err() != nil {
			t.Errorf("a call after the cancel: %v (context: %v)", err, cctx.Err())
		}
		if line := accessLine2(t, logs, id); !strings.Contains(line, " tenant=globex ") || !strings.Contains(line, " model=mcp:docs ") {
			t.Errorf("the GET's row: %s", line)
		}
	})

	if n := docs.badCreds.Load(); n != 0 {
		t.Errorf("%d requests reached the server without its credentials or with a client's key", n)
	}
}

// firstEvent opens the stream at endpoint with key and returns its first
// event (LF line ends, as the gateway and the Go SDK write them).
func firstEvent(t *testing.T, endpoint, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", endpoint, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ev, _ := readEvent(bufio.NewReader(resp.Body))
	return ev
}

// readEvent reads one event, up to its blank line (not included); an
// error when the stream ends first.
func readEvent(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return b.String() + line, err
		}
		if line == "\n" {
			return b.String(), nil
		}
		b.WriteString(line)
	}
}

// TestMCPSSEForeignEndpoint: a server whose endpoint event points at
// another origin cannot send the gateway (nor the client) there: the
// stream ends before the event, with a warning, and nothing reaches the
// other origin.
func TestMCPSSEForeignEndpoint(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, ": hello\n\nevent: endpoint\ndata: %s/messages?sessionId=1\n\n", other.URL)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(bad.Close)
	_, mockURL := startMock(t, mockllm.Config{})
	gw, logs := startLoggingGateway(t, mcpSSEPolicy(mockURL, bad.URL+"/sse"), mcpVars)
	endpoint := gw + "/mcp/docs/sse"

	if _, err := connectMCPSSE(t, endpoint, &keyTransport{key: "tg_mcp_acme", name: "acme"}); err == nil {
		t.Error("the client connected")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", endpoint, nil)
	req.Header.Set("Authorization", "Bearer tg_mcp_acme")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if ev, err := readEvent(r); ev != ": hello\n" || err != nil {
		t.Errorf("first event %q, %v", ev, err)
	}
	if ev, err := readEvent(r); err == nil || strings.Contains(ev, "endpoint") {
		t.Errorf("after the comment: %q, %v", ev, err)
	}
	if !strings.Contains(logs.String(), "its endpoint is refused") || !strings.Contains(logs.String(), strings.TrimPrefix(other.URL, "http://")) {
		t.Errorf("no warning naming the other origin in the log:\n%s", logs.String())
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d requests reached the other origin", n)
	}
}

// TestMCPSSEAcrossReplicas: a POST carries its server path in its URL,
// so any replica forwards it: the client's POSTs alternate between two
// gateways while its stream stays on one. A refusal reaches the client's
// stream from the replica relaying it; another replica answers it as an
// HTTP error.
func TestMCPSSEAcrossReplicas(t *testing.T) {
	docs := startSSEDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	// Replicas accept each other's message URLs with a shared key.
	unshared := mcpSSEPolicy(mockURL, docs.url)
	pol := strings.Replace(unshared, "\nmcp:\n", "\nmcp:\n  endpoint_key: the replicas' shared key of 32 bytes or more\n", 1)
	if pol == unshared {
		t.Fatal("no mcp section to add the key to")
	}
	_, gwA := startGateway(t, pol, mcpVars)
	_, gwB := startGateway(t, pol, mcpVars)
	host := func(u string) string { p, _ := url.Parse(u); return p.Host }
	tr := &keyTransport{key: "tg_mcp_acme", name: "acme", hosts: []string{host(gwA), host(gwB)}}
	cs, err := connectMCPSSE(t, gwA+"/mcp/docs/sse", tr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if got, err := callText(t, cs, context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": fmt.Sprint(i)}}); err != nil || got != fmt.Sprintf("search: %d", i) {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
	}
	// Request 1 was the GET (to gwB); the POSTs took turns.
	if n := tr.n.Load(); n < 7 || docs.posts.Load() < 6 {
		t.Errorf("%d requests, %d POSTs: not spread over both replicas", n, docs.posts.Load())
	}

	// globex's stream on gwB; its refused call POSTed to each replica.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", gwB+"/mcp/docs/sse", nil)
	req.Header.Set("Authorization", "Bearer tg_mcp_globex")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	ev, err := readEvent(r)
	message, ok := strings.CutPrefix(ev, "event: endpoint\ndata: ")
	if err != nil || !ok {
		t.Fatalf("first event %q, %v", ev, err)
	}
	message = strings.TrimSpace(message)
	auth := []string{"Authorization", "Bearer tg_mcp_globex", "Content-Type", "application/json"}
	call := `{"jsonrpc":"2.0","id":"d1","method":"tools/call","params":{"name":"delete","arguments":{}}}`
	posts := docs.posts.Load()
	status, _, body := post(t, gwA+message, call, auth...)
	if status != 403 || !strings.Contains(string(body), `"code":"model_not_allowed"`) {
		t.Errorf("refused on the other replica: %d %s", status, body)
	}
	status, _, body = post(t, gwB+message, call, auth...)
	if status != 202 || len(body) != 0 {
		t.Errorf("refused on the stream's replica: %d %s", status, body)
	}
	ev, err = readEvent(r)
	if err != nil || !strings.HasPrefix(ev, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"d1\",\"error\":{\"code\":-32000,") ||
		!strings.Contains(ev, `"code":"model_not_allowed"`) {
		t.Errorf("on the stream: %q, %v", ev, err)
	}
	if n := docs.posts.Load() - posts; n != 0 {
		t.Errorf("%d refused POSTs reached the server", n)
	}

	// A message URL is signed for its target and server: another path
	// under its signature, and the URL on a replica without the shared
	// key, are refused before anything is sent.
	search := `{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`
	tok := message[strings.Index(message, "endpoint=")+len("endpoint="):]
	forged := base64.RawURLEncoding.EncodeToString([]byte("/admin")) + tok[strings.LastIndexByte(tok, '.'):]
	_, gwC := startGateway(t, unshared, mcpVars)
	for _, u := range []string{gwB + strings.Replace(message, tok, forged, 1), gwC + message} {
		status, _, body = post(t, u, search, auth...)
		if status != 400 || !strings.Contains(string(body), `"code":"invalid_mcp_endpoint"`) {
			t.Errorf("POST %s: %d %s", u, status, body)
		}
	}
	if n := docs.posts.Load() - posts; n != 0 {
		t.Errorf("%d refused POSTs reached the server", n)
	}
}
