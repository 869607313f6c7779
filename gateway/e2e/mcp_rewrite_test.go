package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// mailServer is a real MCP server with one tool, mail, whose "to"
// argument the client mirrors into an Mcp-Param-To header (x-mcp-header,
// SEP-2243) and the server checks against the body. It keeps the
// arguments and the header each call arrived with.
type mailServer struct {
	url  string
	mu   sync.Mutex
	args []map[string]any
	hdrs []string
}

func startMailServer(t *testing.T) *mailServer {
	t.Helper()
	m := &mailServer{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mail", Version: "1"}, nil)
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"to":      map[string]any{"type": "string", "x-mcp-header": "To"},
			"subject": map[string]any{"type": "string"},
			"cc":      map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		},
	}
	srv.AddTool(&mcp.Tool{Name: "mail", Description: "sends a mail", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args map[string]any
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		m.mu.Lock()
		m.args = append(m.args, args)
		m.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Name") == "mail" {
			m.mu.Lock()
			m.hdrs = append(m.hdrs, r.Header.Get("Mcp-Param-To"))
			m.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	m.url = ts.URL + "/mcp"
	return m
}

func (m *mailServer) last(t *testing.T) (map[string]any, string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.args) == 0 || len(m.hdrs) == 0 {
		t.Fatal("the server saw no call")
	}
	return m.args[len(m.args)-1], m.hdrs[len(m.hdrs)-1]
}

// decodeParamHeader reads an Mcp-Param-* value as the SDK's server does.
func decodeParamHeader(t *testing.T, v string) string {
	t.Helper()
	if s, ok := strings.CutPrefix(v, "=?base64?"); ok {
		if s, ok = strings.CutSuffix(s, "?="); ok {
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				t.Fatalf("header %q: %v", v, err)
			}
			return string(b)
		}
	}
	return v
}

// TestMCPArgumentsRedacted: pii in redact mode rewrites a tool call's
// argument strings, and the MCP server gets the rewritten call: the
// addresses are gone from the body and from the Mcp-Param-To header the
// client mirrored one of them into (the server checks the header against
// the body, so a call whose header kept the original would be refused,
// and would have carried the address the plugin removed).
func TestMCPArgumentsRedacted(t *testing.T) {
	mail := startMailServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	pol := policy(mockURL, "", "mock-1") + fmt.Sprintf(`
mcp:
  servers:
    - {name: mail, url: %s, timeout: 5s}
plugins:
  - name: pii
    builtin: pii
    on_error: fail_closed
    config: {mode: redact}
`, mail.url)
	_, gw := startGateway(t, pol, nil)
	cs, err := connectMCP(t, gw+"/mcp/mail", &keyTransport{name: "mail"}, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	ctx := context.Background()
	if _, err := cs.ListTools(ctx, nil); err != nil { // the client mirrors "to" only for a tool it has listed
		t.Fatalf("tools/list: %v", err)
	}

	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"plain", map[string]any{"to": "jane.doe@example.com", "subject": "Hello from jane.doe@example.com"}},
		// A value that needs base64 in the header (not plain ASCII).
		{"wrapped", map[string]any{"to": "Zoë <zoe.martin@example.org>", "subject": "café", "cc": []any{"ops@example.net", "no address"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "mail", Arguments: tc.args})
			if err != nil || got != "sent" {
				t.Fatalf("mail: %q, %v", got, err)
			}
			args, hdr := mail.last(t)
			raw, _ := json.Marshal(args)
			if strings.Contains(string(raw), "@example.") {
				t.Errorf("the server got an address: %s", raw)
			}
			to, _ := args["to"].(string)
			if to == "" || to == tc.args["to"] {
				t.Errorf("to not rewritten: %q", to)
			}
			if hdr == "" {
				t.Fatal("the client sent no Mcp-Param-To header: the SDK no longer mirrors x-mcp-header arguments, and this test checks nothing")
			}
			if dec := decodeParamHeader(t, hdr); dec != to || strings.Contains(dec, "@example.") {
				t.Errorf("Mcp-Param-To %q (decoded %q), body's to %q", hdr, dec, to)
			}
		})
	}

	t.Run("unchanged call keeps its header", func(t *testing.T) {
		got, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "mail", Arguments: map[string]any{"to": "the ops team", "subject": "status"}})
		if err != nil || got != "sent" {
			t.Fatalf("mail: %q, %v", got, err)
		}
		args, hdr := mail.last(t)
		if args["to"] != "the ops team" || hdr != "the ops team" {
			t.Errorf("args %v, header %q", args, hdr)
		}
	})
}
