package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestMCPCallLogPostgres: on the production stores (tenants and the call
// log in Postgres, counters in Redis) every MCP request of a session has
// its call_log row — model mcp:docs or mcp:docs/{tool}, upstream docs,
// its status, sizes — a refused tool call included (its refusal's
// status, though the client got HTTP 200), and tool calls cost nothing:
// budget holds and charges nothing for them.
func TestMCPCallLogPostgres(t *testing.T) {
	w := newBudgetWorld(t, 1_000_000)
	docs := startDocsServer(t)
	_, mockURL := startMock(t, mockllm.Config{})
	pol := policy(mockURL, "", "mock-1") + w.stores("") + fmt.Sprintf(`mcp:
  servers:
    - {name: docs, url: %s, headers: {X-Docs-Token: %s}, timeout: 5s}
plugins:
  - {name: preflight, path: %s}
  - {name: ratelimit, path: %s, config: {models: [{match: "mcp:docs/limited", rpm: 1}]}}
  - {name: budget, path: %s}
`, docs.url, docsToken, pluginPath(t, "preflight"), pluginPath(t, "ratelimit"), pluginPath(t, "budget"))
	_, gw := w.gateway(t, pol)
	tr := &keyTransport{key: w.key, name: "pg"}
	cs, err := connectMCP(t, gw+"/mcp/docs", tr, nil)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	ctx := context.Background()
	if got, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "secret-query"}}); err != nil || got != "search: secret-query" {
		t.Fatalf("search: %q, %v", got, err)
	}
	if _, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "limited"}); err != nil {
		t.Fatalf("limited: %v", err)
	}
	if _, err := callText(t, cs, ctx, &mcp.CallToolParams{Name: "limited"}); err == nil {
		t.Fatal("a second limited call within the minute was served")
	}
	ids := tr.ids

	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	row := func(id string) (model, upstream string, status int, reply int64, cost *int64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := conn.QueryRow(ctx, `SELECT model, coalesce(upstream, ''), status, coalesce(reply_bytes, -1), cost_micros FROM call_log WHERE request_id = $1 AND tenant_id = 'acme'`, id).
				Scan(&model, &upstream, &status, &reply, &cost)
			if err == nil {
				return
			}
			if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tr.mu.Lock()
	byWhat := map[string][]string{}
	for id, what := range ids {
		byWhat[what] = append(byWhat[what], id)
	}
	tr.mu.Unlock()
	for _, what := range []string{"initialize", "notifications/initialized", "tools/call search"} {
		if len(byWhat[what]) != 1 {
			t.Fatalf("%s: %d requests (%v)", what, len(byWhat[what]), byWhat)
		}
	}
	for what, want := range map[string]string{"initialize": "mcp:docs", "notifications/initialized": "mcp:docs", "tools/call search": "mcp:docs/search"} {
		id := byWhat[what][0]
		model, up, status, reply, cost := row(id)
		wantStatus := 200
		if what == "notifications/initialized" {
			wantStatus = 202
		}
		if model != want || up != "docs" || status != wantStatus || (cost != nil && *cost != 0) {
			t.Errorf("%s (%s): model %q, upstream %q, status %d, cost %v", what, id, model, up, status, cost)
		}
		if what != "notifications/initialized" && reply <= 0 {
			t.Errorf("%s: reply_bytes %d", what, reply)
		}
	}
	var statuses []int
	for _, id := range byWhat["tools/call limited"] {
		model, _, status, _, _ := row(id)
		if model != "mcp:docs/limited" {
			t.Errorf("%s: model %q", id, model)
		}
		statuses = append(statuses, status)
	}
	if len(statuses) != 2 || statuses[0]+statuses[1] != 200+429 {
		t.Errorf("limited calls' statuses %v, want 200 and 429", statuses)
	}
	// Nothing in the log names the arguments.
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM call_log WHERE row_to_json(call_log)::text LIKE '%secret-query%'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows naming the arguments: %d, %v", n, err)
	}
	if spent, holds := w.counter(t); (spent != "0" && spent != "") || (holds != "0" && holds != "") {
		t.Errorf("budget counter spent %q, held %q; want nothing", spent, holds)
	}
}
