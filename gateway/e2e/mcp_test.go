package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// docsServer is a real MCP server (the official Go SDK) with the tools
// the MCP tests call: search, delete and limited answer at once; progress
// reports progress and waits until the client has seen the first report
// before it answers; slow waits until its call is cancelled.
type docsServer struct {
	url string
	// gotProgress is closed by the client's progress handler at the
	// first report.
	gotProgress chan struct{}
	slowStarted chan struct{}
	slowEnded   chan error // the slow call's context error
	// badCreds counts requests that reached the server without its
	// credentials or with a client's key.
	badCreds atomic.Int64
}

const docsToken = "docs-secret"

func startDocsServer(t *testing.T) *docsServer { return startDocsServerOpts(t, nil) }

// startDocsServerOpts is startDocsServer with the SDK handler's options.
func startDocsServerOpts(t *testing.T, opts *mcp.StreamableHTTPOptions) *docsServer {
	t.Helper()
	d := &docsServer{gotProgress: make(chan struct{}), slowStarted: make(chan struct{}, 1), slowEnded: make(chan error, 1)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	type query struct {
		Q string `json:"q,omitempty"`
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, name := range []string{"search", "delete", "limited"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: name + " the docs"}, func(_ context.Context, _ *mcp.CallToolRequest, in query) (*mcp.CallToolResult, any, error) {
			return text(name + ": " + in.Q), nil, nil
		})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "progress", Description: "reports progress"}, func(ctx context.Context, req *mcp.CallToolRequest, _ query) (*mcp.CallToolResult, any, error) {
		tok := req.Params.GetProgressToken()
		if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 2, Message: "half"}); err != nil {
			return nil, nil, err
		}
		// The result waits for the client to have the report: a
		// gateway that held the stream back would never deliver it.
		select {
		case <-d.gotProgress:
		case <-time.After(5 * time.Second):
			return text("the progress report did not reach the client"), nil, nil
		}
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 2, Total: 2})
		return text("progress: done"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "takes its time"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ query) (*mcp.CallToolResult, any, error) {
		d.slowStarted <- struct{}{}
		select {
		case <-ctx.Done():
			d.slowEnded <- ctx.Err()
			return nil, nil, ctx.Err()
		case <-time.After(20 * time.Second):
			d.slowEnded <- nil
			return text("slow: done"), nil, nil
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Docs-Token") != docsToken || r.Header.Get("Authorization") != "" || r.Header.Get("X-Api-Key") != "" {
			d.badCreds.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	d.url = ts.URL + "/mcp"
	return d
}

// mcpPolicy fronts the docs server as "docs" for two tenants: acme (plan
// full: every tool) and globex (plan reader: not delete), with preflight,
// ratelimit (limited: 1 a minute per tenant) and budget, unpriced models
// refused.
func mcpPolicy(mockURL, docsURL string) string {
	return policy(mockURL, "", "mock-1") + fmt.Sprintf(`
mcp:
  servers:
    - name: docs
      url: %s
      headers: {X-Docs-Token: "${DOCS_TOKEN}"}
      timeout: 5s
pricing: {unpriced: refuse}
store:
  kind: memory
tenants:
  plans:
    - {id: full, allowed_models: ["mcp:docs", "mcp:docs/*"]}
    - {id: reader, allowed_models: ["mcp:docs", "mcp:docs/search", "mcp:docs/progress", "mcp:docs/slow", "mcp:docs/limited"]}
  tenants:
    - {id: acme, plan: full, keys: [{id: a1, key_sha256: %s}]}
    - {id: globex, plan: reader, keys: [{id: g1, key_sha256: %s}]}
plugins:
  - {name: preflight, builtin: preflight}
  - {name: ratelimit, builtin: ratelimit, config: {models: [{match: "mcp:docs/limited", rpm: 1}]}}
  - {name: budget, builtin: budget}
`, docsURL, sha("tg_mcp_acme"), sha("tg_mcp_globex"))
}

var mcpVars = map[string]string{"DOCS_TOKEN": docsToken}

// keyTransport sends the gateway key with every request, spreads the
// requests over the gateways in hosts in turn, and names each request
// (X-Request-Id mcp-NAME-N) with its JSON-RPC method and tool noted in ids.
type keyTransport struct {
	key   string
	name  string // the request ids' prefix: mcp-NAME-N
	hosts []string
	n     atomic.Int64
	mu    sync.Mutex
	ids   map[string]string // request id → "METHOD" or "tools/call TOOL", "GET", "DELETE"
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	n := k.n.Add(1)
	id := fmt.Sprintf("mcp-%s-%d", k.name, n)
	r.Header.Set("X-Request-Id", id)
	if k.key != "" {
		r.Header.Set("Authorization", "Bearer "+k.key)
	}
	if len(k.hosts) > 1 {
		r.URL.Host = k.hosts[int(n)%len(k.hosts)]
	}
	what := r.Method
	if r.Body != nil && r.Method == "POST" {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		json.Unmarshal(b, &m)
		what = strings.TrimSpace(m.Method + " " + m.Params.Name)
		r.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	k.mu.Lock()
	if k.ids == nil {
		k.ids = map[string]string{}
	}
	k.ids[id] = what
	k.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// idOf is the request id of the first request that was what.
func (k *keyTransport) idOf(t *testing.T, what string) string {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	var ids []string
	for id, w := range k.ids {
		if w == what {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no request was %q: %v", what, k.ids)
	}
	slices.Sort(ids)
	return ids[0]
}

func connectMCP(t *testing.T, endpoint string, tr *keyTransport, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func toolNamesOf(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func callText(t *testing.T, cs *mcp.ClientSession, ctx context.Context, params *mcp.CallToolParams) (string, error) {
	t.Helper()
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

// refusal reads the data of a JSON-RPC error the gateway answered with.
func refusal(t *testing.T, err error) (code int64, msg string, data map[string]any) {
	t.Helper()
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		t.Fatalf("not a JSON-RPC error: %v", err)
	}
	json.Unmarshal(we.Data, &data)
	return we.Code, we.Message, data
}

// TestMCPThroughGateway: the official client and server talk through the
// gateway with a tenant's key: the plan decides which tools each tenant
// lists and may call, refusals reach the client as JSON-RPC errors, a
// rate limit per tool holds, progress streams ahead of the result, the
// server gets its own credentials and never the client's key, and each
// message's call-log row names the server and the tool.
func TestMCPThroughGateway(t *testing.T) {
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	gw, logs := startLoggingGateway(t, mcpPolicy(mockURL, docs.url), mcpVars)
	endpoint := gw + "/mcp/docs"

	acmeTr := &keyTransport{key: "tg_mcp_acme", name: "acme"}
	acme, err := connectMCP(t, endpoint, acmeTr, nil)
	if err != nil {
		t.Fatalf("acme: initialize: %v", err)
	}
	globex, err := connectMCP(t, endpoint, &keyTransport{key: "tg_mcp_globex", name: "globex"}, nil)
	if err != nil {
		t.Fatalf("globex: initialize: %v", err)
	}
	ctx := context.Background()

	t.Run("tools/list is filtered by plan", func(t *testing.T) {
		if got := toolNamesOf(t, acme); !slices.Equal(got, []string{"delete", "limited", "progress", "search", "slow"}) {
			t.Errorf("acme lists %v", got)
		}
		if got := toolNamesOf(t, globex); !slices.Equal(got, []string{"limited", "progress", "search", "slow"}) {
			t.Errorf("globex lists %v", got)
		}
	})

	t.Run("tools/call allowed and refused", func(t *testing.T) {
		for _, cs := range []*mcp.ClientSession{acme, globex} {
			if got, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "gateway"}}); err != nil || got != "search: gateway" {
				t.Errorf("search: %q, %v", got, err)
			}
		}
		if got, err := callText(t, acme, ctx, &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"q": "x"}}); err != nil || got != "delete: x" {
			t.Errorf("acme delete: %q, %v", got, err)
		}
		_, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "delete", Arguments: map[string]any{"q": "x"}})
		if err == nil {
			t.Fatal("globex called delete")
		}
		code, msg, data := refusal(t, err)
		if code != -32000 || !strings.Contains(msg, "mcp:docs/delete") || data["status"] != 403.0 || data["code"] != "model_not_allowed" || data["type"] != "permission_error" {
			t.Errorf("refusal %d %q %v", code, msg, data)
		}
		if !strings.Contains(err.Error(), "mcp:docs/delete") {
			t.Errorf("the client's error does not name the reason: %v", err)
		}
	})

	t.Run("rate limit per tool", func(t *testing.T) {
		if _, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "limited"}); err != nil {
			t.Fatalf("first call: %v", err)
		}
		_, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "limited"})
		if err == nil {
			t.Fatal("a second call within the minute was served")
		}
		code, _, data := refusal(t, err)
		if code != -32000 || data["status"] != 429.0 || data["code"] != "rate_limit_exceeded" || data["retry_after"] == nil {
			t.Errorf("refusal %d %v", code, data)
		}
		// The limit is per tenant and per tool: search and acme's
		// limited are not held by it.
		if _, err := callText(t, globex, ctx, &mcp.CallToolParams{Name: "search"}); err != nil {
			t.Errorf("search after limited's refusal: %v", err)
		}
		if _, err := callText(t, acme, ctx, &mcp.CallToolParams{Name: "limited"}); err != nil {
			t.Errorf("acme's limited: %v", err)
		}
	})

	t.Run("progress streams before the result", func(t *testing.T) {
		var reports atomic.Int64
		var once sync.Once
		cs, err := connectMCP(t, endpoint, &keyTransport{key: "tg_mcp_acme", name: "progress"}, &mcp.ClientOptions{
			ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
				reports.Add(1)
				once.Do(func() { close(docs.gotProgress) })
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := &mcp.CallToolParams{Name: "progress"}
		p.SetProgressToken("p-1")
		if got, err := callText(t, cs, ctx, p); err != nil || got != "progress: done" {
			t.Fatalf("progress: %q, %v", got, err)
		}
		if reports.Load() == 0 {
			t.Error("no progress report reached the client")
		}
	})

	t.Run("call log rows", func(t *testing.T) {
		for _, tc := range []struct {
			what, model string
			tenant      string
			status      int
			transport   *keyTransport
		}{
			{"initialize", "mcp:docs", "acme", 200, acmeTr},
			{"tools/list", "mcp:docs", "acme", 200, acmeTr},
			{"tools/call search", "mcp:docs/search", "acme", 200, acmeTr},
			{"tools/call delete", "mcp:docs/delete", "acme", 200, acmeTr},
		} {
			id := tc.transport.idOf(t, tc.what)
			line := accessLine2(t, logs, id)
			for _, want := range []string{"tenant=" + tc.tenant, "endpoint=/mcp/docs", "model=" + tc.model, "upstream=docs",
				fmt.Sprintf("status=%d", tc.status), "prompt_tokens=0", "completion_tokens=0", "cost_micros=0"} {
				if !strings.Contains(line, " "+want+" ") {
					t.Errorf("%s (%s): no %s in %s", tc.what, id, want, line)
				}
			}
			if m := regexp.MustCompile(`reply_bytes=(\d+)`).FindStringSubmatch(line); m == nil || m[1] == "0" {
				t.Errorf("%s: reply bytes in %s", tc.what, line)
			}
		}
		if strings.Contains(logs.String(), `"q"`) || strings.Contains(logs.String(), "search: gateway") {
			t.Error("a tool's arguments or result reached the log")
		}
		// Tool calls are not priced: no price lookup, no warning per tool
		// under pricing.unpriced: refuse.
		if strings.Contains(logs.String(), "has no price") {
			t.Error("an MCP model was looked up as an unpriced model")
		}
	})

	if n := docs.badCreds.Load(); n != 0 {
		t.Errorf("%d requests reached the server without its credentials or with a client's key", n)
	}
}

// accessLine2 waits for request id's access log line (its call-log row).
func accessLine2(t *testing.T, logs *lockedBuffer, id string) string {
	t.Helper()
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=request request_id="+id+" ") {
				return l + " "
			}
		}
	}
	t.Fatalf("no access log line for %s", id)
	return ""
}

// TestMCPRefusals: without a key or with a wrong one the client gets an
// HTTP 401 with WWW-Authenticate; an unknown server is a 404, another
// method a 405; a batch, a body that is not JSON and a message that is
// not JSON-RPC are JSON-RPC errors.
func TestMCPRefusals(t *testing.T) {
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, mcpPolicy(mockURL, docs.url), mcpVars)
	endpoint := gw + "/mcp/docs"
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	accept := []string{"Accept", "application/json, text/event-stream"}

	for _, key := range []string{"", "tg_wrong"} {
		if _, err := connectMCP(t, endpoint, &keyTransport{key: key}, nil); err == nil {
			t.Errorf("key %q: connected", key)
		}
		hdr := accept
		if key != "" {
			hdr = append(hdr, "Authorization", "Bearer "+key)
		}
		status, h, body := post(t, endpoint, initBody, hdr...)
		if status != 401 || h.Get("WWW-Authenticate") != "Bearer" || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
			t.Errorf("key %q: %d %v %s", key, status, h, body)
		}
	}
	auth := append(accept, "Authorization", "Bearer tg_mcp_acme")
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"unknown server", "/mcp/nope", initBody, 404, `"code":"unknown_mcp_server"`},
		{"batch", "/mcp/docs", "[" + initBody + "]", 400, `"code":-32600,"message":"Invalid Request: batches are not supported`},
		{"not JSON", "/mcp/docs", "{", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700`},
		{"no method", "/mcp/docs", `{"jsonrpc":"2.0","id":5}`, 400, `"code":-32600`},
		{"method twice", "/mcp/docs", `{"jsonrpc":"2.0","id":5,"method":"ping","method":"tools/call"}`, 400, `"code":-32600`},
	} {
		status, _, body := post(t, gw+tc.path, tc.body, auth...)
		if status != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
	}
	// The server's own statuses come back as it sent them: a GET or a
	// DELETE without a session, a request in a session it does not know
	// (expired: 404, the client's cue to initialize again).
	for _, tc := range []struct {
		name, method, body string
		hdr                []string
	}{
		{"GET without a session", "GET", "", []string{"Accept", "text/event-stream"}},
		{"DELETE of an unknown session", "DELETE", "", []string{"Mcp-Session-Id", "nope"}},
		{"a request in an unknown session", "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			[]string{"Mcp-Session-Id", "nope", "Mcp-Protocol-Version", "2025-06-18", "Accept", "application/json, text/event-stream", "Content-Type", "application/json"}},
	} {
		do := func(url string, hdr ...string) (int, string) {
			req, _ := http.NewRequest(tc.method, url, strings.NewReader(tc.body))
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			return resp.StatusCode, resp.Header.Get("Allow")
		}
		direct, allowDirect := do(docs.url, append(tc.hdr, "X-Docs-Token", docsToken)...)
		via, allowVia := do(endpoint, append(tc.hdr, "Authorization", "Bearer tg_mcp_acme")...)
		t.Logf("%s: %d", tc.name, via)
		if direct < 400 || via != direct || allowVia != allowDirect {
			t.Errorf("%s: %d (Allow %q) through the gateway, %d (Allow %q) from the server", tc.name, via, allowVia, direct, allowDirect)
		}
	}
	req, _ := http.NewRequest("PUT", endpoint, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST, GET, DELETE" {
		t.Errorf("PUT: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	if docs.badCreds.Load() != 0 {
		t.Errorf("%d requests reached the server without its credentials", docs.badCreds.Load())
	}
}

// TestMCPJSONReplies: a server that answers with application/json rather
// than event streams gets the same treatment: its tools/list reply is
// filtered by plan, its results reach the client.
func TestMCPJSONReplies(t *testing.T) {
	docs := startDocsServerOpts(t, &mcp.StreamableHTTPOptions{JSONResponse: true})
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, mcpPolicy(mockURL, docs.url), mcpVars)
	tr := &keyTransport{key: "tg_mcp_globex", name: "json"}
	cs, err := connectMCP(t, gw+"/mcp/docs", tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNamesOf(t, cs); !slices.Equal(got, []string{"limited", "progress", "search", "slow"}) {
		t.Errorf("globex lists %v", got)
	}
	if got, err := callText(t, cs, context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "json"}}); err != nil || got != "search: json" {
		t.Errorf("search: %q, %v", got, err)
	}
	if _, err := callText(t, cs, context.Background(), &mcp.CallToolParams{Name: "delete"}); err == nil {
		t.Error("globex called delete")
	}
}

// TestMCPSessionAcrossReplicas: the gateway keeps no session state, so a
// client whose requests alternate between two replicas keeps its session.
func TestMCPSessionAcrossReplicas(t *testing.T) {
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	pol := mcpPolicy(mockURL, docs.url)
	_, gwA := startGateway(t, pol, mcpVars)
	_, gwB := startGateway(t, pol, mcpVars)
	host := func(u string) string { p, _ := url.Parse(u); return p.Host }
	tr := &keyTransport{key: "tg_mcp_acme", hosts: []string{host(gwA), host(gwB)}}
	cs, err := connectMCP(t, gwA+"/mcp/docs", tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if got, err := callText(t, cs, context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": fmt.Sprint(i)}}); err != nil || got != fmt.Sprintf("search: %d", i) {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
	}
	if n := tr.n.Load(); n < 6 {
		t.Errorf("%d requests: not spread over both replicas", n)
	}
}

// TestMCPCancelSlowCall: the gateway's cancel API stops a tool call in
// flight: the server's handler sees its context end, the client's call
// fails with the cancel.
func TestMCPCancelSlowCall(t *testing.T) {
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, mcpPolicy(mockURL, docs.url), mcpVars)
	tr := &keyTransport{key: "tg_mcp_acme", name: "acme"}
	cs, err := connectMCP(t, gw+"/mcp/docs", tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := callText(t, cs, context.Background(), &mcp.CallToolParams{Name: "slow"})
		errc <- err
	}()
	select {
	case <-docs.slowStarted:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow call did not start")
	}
	id := tr.idOf(t, "tools/call slow")
	if st, body := cancelCall(t, gw, "tg_mcp_acme", id); st != 200 {
		t.Fatalf("cancel %s: %d %s", id, st, body)
	}
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "cancelled") {
			t.Errorf("the call ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not end")
	}
	select {
	case err := <-docs.slowEnded:
		if err == nil {
			t.Error("the server's handler ran to its end")
		}
	case <-time.After(5 * time.Second):
		t.Error("the server's handler was not stopped")
	}
}

// TestMCPStreamEndsOnShutdown: a client's GET stream, open for as long as
// both ends keep it, does not hold a shutdown past its drain time.
func TestMCPStreamEndsOnShutdown(t *testing.T) {
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	p, err := config.Parse([]byte(mcpPolicy(mockURL, docs.url)), func(k string) (string, bool) { v, ok := mcpVars[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(p, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelError})))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	tr := &keyTransport{key: "tg_mcp_acme", name: "shutdown"}
	if _, err := connectMCP(t, "http://"+ln.Addr().String()+"/mcp/docs", tr, nil); err != nil {
		t.Fatal(err)
	}
	// The client opens its GET stream after initialize; wait for it to
	// be with the server.
	for end := time.Now().Add(5 * time.Second); srv.InFlight() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no GET stream in flight")
		}
	}
	start := time.Now()
	srv.Shutdown(0, 300*time.Millisecond)
	<-done
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("shutdown took %v with a GET stream open (drain 300ms)", took)
	}
	if n := srv.InFlight(); n != 0 {
		t.Errorf("%d requests still in flight", n)
	}
}
