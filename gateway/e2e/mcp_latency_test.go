package e2e

import (
	"context"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestMCPCallLatency measures what the gateway adds to a tool call: the
// official client calling a tool that answers at once, straight to the
// server and through the gateway (preflight, ratelimit and budget, the
// tools/call's model checked against the plan), one caller and 32 at a
// time, each caller with its own session. It is a measurement, not a
// check: run it with TOLLGATE_MCP_LATENCY=1 (docs/BENCHMARKS.md, "MCP tool
// calls").
func TestMCPCallLatency(t *testing.T) {
	if os.Getenv("TOLLGATE_MCP_LATENCY") == "" {
		t.Skip("a measurement: set TOLLGATE_MCP_LATENCY=1")
	}
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	_, gw := startGateway(t, mcpPolicy(mockURL, docs.url), mcpVars)
	const perCaller = 400
	for _, callers := range []int{1, 32} {
		for _, via := range []struct{ name, endpoint, key string }{
			{"direct", docs.url, ""},
			{"gateway", gw + "/mcp/docs", "tg_mcp_acme"},
		} {
			sessions := make([]*mcp.ClientSession, callers)
			for i := range sessions {
				tr := &directTransport{key: via.key}
				if via.key == "" {
					tr.token = docsToken
				}
				c := mcp.NewClient(&mcp.Implementation{Name: "latency", Version: "1"}, nil)
				cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: via.endpoint,
					HTTPClient: &http.Client{Transport: tr}, DisableStandaloneSSE: true}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				sessions[i] = cs
			}
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			start := time.Now()
			for _, cs := range sessions {
				wg.Go(func() {
					mine := make([]time.Duration, 0, perCaller)
					for range perCaller {
						t0 := time.Now()
						if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "x"}}); err != nil {
							t.Error(err)
							return
						}
						mine = append(mine, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			took := time.Since(start)
			slices.Sort(lat)
			if len(lat) == 0 {
				t.Fatal("no calls")
			}
			t.Logf("MCP-LATENCY callers=%d via=%s calls=%d p50=%v p99=%v calls/s=%.0f", callers, via.name, len(lat),
				lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), float64(len(lat))/took.Seconds())
		}
	}
}

// directTransport adds the gateway key (key) or the server's own token
// (token) to every request; its connections are kept for 32 callers
// (http.DefaultTransport keeps 2 per host, and the rest would reconnect).
type directTransport struct{ key, token string }

var latencyTransport = &http.Transport{MaxIdleConnsPerHost: 64}

func (d *directTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if d.key != "" {
		r.Header.Set("Authorization", "Bearer "+d.key)
	}
	if d.token != "" {
		r.Header.Set("X-Docs-Token", d.token)
	}
	return latencyTransport.RoundTrip(r)
}
