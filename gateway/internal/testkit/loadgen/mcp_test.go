package loadgen

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/valyala/fasthttp"
)

// mcpCall is what the mock saw of one POST to its MCP endpoint.
type mcpCall struct {
	session, version, method string
	id                       json.RawMessage
	text                     string
}

// startMCPMock runs the mock model server's MCP endpoint and records the
// POSTs it receives; wrap, if set, sees each request before the mock.
func startMCPMock(t *testing.T, cfg mockllm.Config, wrap func(http.ResponseWriter, *http.Request) bool) (string, func() []mcpCall) {
	t.Helper()
	m := mockllm.New(cfg)
	var mu sync.Mutex
	var calls []mcpCall
	m.SetOnRequest(func(h http.Header, body []byte) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil {
			return
		}
		mu.Lock()
		calls = append(calls, mcpCall{h.Get("Mcp-Session-Id"), h.Get("Mcp-Protocol-Version"), msg.Method, msg.ID, msg.Params.Arguments.Text})
		mu.Unlock()
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if wrap != nil && !wrap(w, r) {
			return
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + mockllm.MCPPath, func() []mcpCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]mcpCall(nil), calls...)
	}
}

// TestMCPToolCalls: each worker opens one session, then sends tools/call
// of echo on it, every id new within the session.
func TestMCPToolCalls(t *testing.T) {
	url, calls := startMCPMock(t, mockllm.Config{}, nil)
	res := run(t, Config{URL: url, MCP: true, Concurrency: 4, Requests: 200, Warmup: 3,
		Headers: []Header{{"Authorization", "Bearer k"}}})
	if res.Successes != 200 || res.Failures != 0 || res.WarmupFailures != 0 || !res.MCP || res.Latency.Samples != 200 {
		t.Fatalf("%+v", res)
	}
	seen := map[string]map[string]bool{} // session → ids
	inits := 0
	for _, c := range calls() {
		switch c.method {
		case "initialize":
			inits++
		case "notifications/initialized":
			if c.session == "" || c.version != MCPProtocolVersion {
				t.Fatalf("initialized notification without session or version: %+v", c)
			}
		case "tools/call":
			if c.session == "" || c.version != MCPProtocolVersion || c.text != "Say hello in one short sentence." {
				t.Fatalf("tools/call: %+v", c)
			}
			if seen[c.session] == nil {
				seen[c.session] = map[string]bool{}
			}
			if seen[c.session][string(c.id)] {
				t.Fatalf("id %s sent twice in session %s", c.id, c.session)
			}
			seen[c.session][string(c.id)] = true
		default:
			t.Fatalf("unexpected method %q", c.method)
		}
	}
	n := 0
	for _, ids := range seen {
		n += len(ids)
	}
	if inits != 4 || len(seen) != 4 || n != 212 {
		t.Fatalf("%d initializes, %d sessions, %d calls; want 4, 4, 212", inits, len(seen), n)
	}
}

// TestMCPStream: the stream's first event (a progress notification) and
// its result are timed apart.
func TestMCPStream(t *testing.T) {
	url, _ := startMCPMock(t, mockllm.Config{MCPStream: true, MCPProgress: 3, TTFT: 2 * time.Millisecond, InterToken: 5 * time.Millisecond}, nil)
	res := run(t, Config{URL: url, MCP: true, Stream: true, Concurrency: 2, Requests: 20, Warmup: 1})
	if res.Successes != 20 || res.TTFT == nil || res.StreamTotal == nil {
		t.Fatalf("%+v", res)
	}
	// Three progress events 5 ms apart, then the result 5 ms later.
	if res.TTFT.P50 < 2000 || res.StreamTotal.Min < 17000 || res.StreamTotal.Min-res.TTFT.Min < 15000 {
		t.Fatalf("ttft %+v, total %+v", *res.TTFT, *res.StreamTotal)
	}
}

func TestMCPFailures(t *testing.T) {
	tests := []struct {
		name   string
		cfg    mockllm.Config
		stream bool
		body   string
		want   string
	}{
		{"JSON where a stream was asked", mockllm.Config{}, true, "", errNotStream.Error()},
		{"tool error", mockllm.Config{}, false,
			`{"jsonrpc":"2.0","id":{{id}},"method":"tools/call","params":{"name":"fail"}}`, errToolError.Error()},
		{"tool error streamed", mockllm.Config{MCPStream: true}, true,
			`{"jsonrpc":"2.0","id":{{id}},"method":"tools/call","params":{"name":"fail"}}`, errToolError.Error()},
		{"JSON-RPC error", mockllm.Config{}, false,
			`{"jsonrpc":"2.0","id":{{id}},"method":"tools/call","params":{"name":"nope"}}`, `MCP JSON-RPC error: {"code":-32602,"message":"Unknown tool: nope"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, _ := startMCPMock(t, tt.cfg, nil)
			cfg := Config{URL: url, MCP: true, Stream: tt.stream, Requests: 5}
			if tt.body != "" {
				cfg.Body = []byte(tt.body)
			}
			res := run(t, cfg)
			if res.Failures != 5 || len(res.Errors) != 1 || res.Errors[0].Message != tt.want {
				t.Fatalf("failures %d, errors %+v; want 5 × %q", res.Failures, res.Errors, tt.want)
			}
		})
	}
}

// TestMCPSessionLost: a 404 (the server forgot the session) fails that
// request, and the next opens a new session.
func TestMCPSessionLost(t *testing.T) {
	var calls atomic.Int64
	url, seen := startMCPMock(t, mockllm.Config{}, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Mcp-Session-Id") != "" && calls.Add(1) == 20 {
			http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"session not found"}}`, http.StatusNotFound)
			return false
		}
		return true
	})
	res := run(t, Config{URL: url, MCP: true, Requests: 50, Warmup: 0})
	inits := 0
	for _, c := range seen() {
		if c.method == "initialize" {
			inits++
		}
	}
	if res.Failures != 1 || res.Successes != 49 || inits != 2 || !strings.HasPrefix(res.Errors[0].Message, "HTTP 404") {
		t.Fatalf("%d initializes, result %+v", inits, res)
	}
}

func TestMCPTemplate(t *testing.T) {
	body := mcpBody(Config{MCP: true, Stream: true, Unique: true})
	w := &worker{req: fasthttp.AcquireRequest(), mcp: &mcpSession{nextID: 7}}
	defer fasthttp.ReleaseRequest(w.req)
	w.tmpl = template(body, true, true)
	w.renumber()
	first := string(w.req.Body())
	w.renumber()
	var msg struct {
		ID     int `json:"id"`
		Params struct {
			Arguments struct{ Text string } `json:"arguments"`
			Meta      struct {
				ProgressToken int `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal(w.req.Body(), &msg); err != nil {
		t.Fatalf("%s: %v", w.req.Body(), err)
	}
	if msg.ID != 8 || msg.Params.Meta.ProgressToken != 8 || !strings.HasPrefix(msg.Params.Arguments.Text, "Say hello in one short sentence. "+uniqueRun+"-") ||
		strings.Contains(first, "{{") || first == string(w.req.Body()) {
		t.Fatalf("first %s, second %s", first, w.req.Body())
	}
	if template([]byte(`{"a":1}`), true, true) != nil {
		t.Fatal("a body without marks needs no template")
	}
}

// TestMCPSteadyStateAllocations: a warm tools/call allocates no more than
// a chat request.
func TestMCPSteadyStateAllocations(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reply := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}`)
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		switch body := ctx.PostBody(); {
		case bytes.Contains(body, []byte(`"initialize"`)):
			ctx.Response.Header.Set("Mcp-Session-Id", "s1")
			ctx.SetBodyString(`{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-06-18"}}`)
		case bytes.Contains(body, []byte(`"notifications/`)):
			ctx.SetStatusCode(fasthttp.StatusAccepted)
		default:
			ctx.SetBody(reply)
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown() //nolint:errcheck
	cfg, err := normalise(Config{URL: "http://" + ln.Addr().String() + "/mcp", Requests: 1, MCP: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := defaultBody(cfg)
	w := newWorker(cfg, client, body)
	defer w.release()
	if _, err := w.once(); err != nil { // opens the session
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(300, func() {
		if _, err := w.once(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("%.0f allocations per tools/call, want ≤ 1", allocs)
	}
}
