package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// Request rewriting (sdk/ABI.md, "Request rewriting"): a plugin replaces a
// text of the request with set_message_text; the plugins after it and the
// upstream get the new body, whatever the endpoint and the upstream's API.

// rewritePlugins is a plugins section of the rewriting test plugin, one
// instance per config, in order.
func rewritePlugins(t *testing.T, configs ...string) string {
	t.Helper()
	p, err := wasmbuild.Cached(repoRoot(t) + "/sdk/wasmhost/testdata/rewriteplugin")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("plugins:\n")
	for i, c := range configs {
		fmt.Fprintf(&b, "  - name: rw%d\n    path: %s\n    on_error: fail_closed\n    config: %s\n", i, p, c)
	}
	return b.String()
}

const (
	card     = "4111 1111 1111 1111"
	redacted = "[card]"
)

func TestRewriteReachesUpstream(t *testing.T) {
	openaiMock, openaiURL := startMock(t, mockllm.Config{Tokens: 3, Usage: true})
	anthMock, anthURL := startAnthropicMock(t, mockllm.Config{})
	seenOpenAI, seenAnth := recordRequests(openaiMock), recordRequests(anthMock)
	plugins := rewritePlugins(t,
		fmt.Sprintf(`{"replace":{%q:%q},"report":"X-Rewrite"}`, card, redacted),
		`{"report":"X-After"}`)
	pol := strings.Replace(anthropicPolicy(anthURL, openaiURL, "", plugins), `models: ["mock-1"]`, `models: ["mock-1", "mock-*"]`, 1)
	_, gw := startGateway(t, pol, anthropicVars)

	pay := "pay with " + card + ", please"
	tests := []struct {
		name, path, body string
		anthropic        bool   // the request goes to the Anthropic upstream
		wantStatus       string // the writer's outcomes
	}{
		{"chat to OpenAI", "/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"` + pay + `"}]}`, false, "ok"},
		{"chat stream to OpenAI", "/v1/chat/completions", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"` + pay + `"}]}]}`, false, "ok"},
		{"completions", "/v1/completions", `{"model":"mock-1","prompt":["` + pay + `","and ` + card + `"]}`, false, "ok,ok"},
		{"embeddings", "/v1/embeddings", `{"model":"mock-1","input":"` + pay + `"}`, false, "ok"},
		{"responses to OpenAI", "/v1/responses", `{"model":"mock-1","instructions":"card ` + card + `","input":"` + pay + `"}`, false, "ok,ok"},
		{"chat to Anthropic", "/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"` + pay + `"}]}`, true, "ok"},
		{"messages to Anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":9,"system":[{"type":"text","text":"card ` + card + `"}],"messages":[{"role":"user","content":"` + pay + `"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"charge","input":{"card":"` + card + `"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"charged ` + card + `"}]}]}`, true, "ok,ok,invalid,ok"},
		{"messages stream to Anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"` + pay + `"}]}`, true, "ok"},
		{"responses to Anthropic", "/v1/responses", `{"model":"claude-x","input":[{"role":"user","content":[{"type":"input_text","text":"` + pay + `"}]}]}`, true, "ok"},
		{"images (passthrough)", "/v1/images/generations", `{"model":"mock-1","prompt":"` + pay + `"}`, false, "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, hdr, body := post(t, gw+tc.path, tc.body)
			seen := seenOpenAI
			if tc.anthropic {
				seen = seenAnth
			}
			var up seenRequest
			select {
			case up = <-seen:
			case <-time.After(5 * time.Second):
				t.Fatalf("nothing reached the upstream: %d %s", status, body)
			}
			// A tool_use's input is JSON, not a text: it cannot be
			// rewritten (the writer is told so) and goes as it was.
			kept := strings.Count(tc.body, `"input":{"card":"`+card)
			if strings.Count(string(up.body), card) != kept || !strings.Contains(string(up.body), redacted) {
				t.Errorf("the upstream got %s", up.body)
			}
			if tc.path != "/v1/images/generations" && status != 200 {
				t.Errorf("status %d: %s", status, body)
			}
			writer, after := hdr.Get("X-Rewrite"), hdr.Get("X-After")
			if !strings.HasPrefix(writer, "status="+tc.wantStatus+" ") {
				t.Errorf("writer reported %q, want status %s", writer, tc.wantStatus)
			}
			// The next plugin reads what the writer left: the same
			// facts and texts.
			_, writerFacts, _ := strings.Cut(writer, " ")
			_, afterFacts, _ := strings.Cut(after, " ")
			if writerFacts != afterFacts || strings.Count(afterFacts, redacted) == 0 {
				t.Errorf("the next plugin read %q, the writer %q", afterFacts, writerFacts)
			}
		})
	}
}

// TestRewriteBudgetHold: a budget after the rewriting plugin holds for the
// prompt that is sent. A prompt of 40,000 bytes bounds at about 40,000
// tokens (40,000 µ$ at 1 $/Mtok) against a budget of 20,000 µ$: refused
// as it is, admitted once a plugin before the budget cut it down.
func TestRewriteBudgetHold(t *testing.T) {
	const budget = 20_000
	w := newBudgetWorld(t, budget)
	mock, mockURL := startMock(t, mockllm.Config{Tokens: 5, Usage: true})
	seen := recordRequests(mock)
	long := strings.Repeat("x", 40_000)
	body := `{"model":"mock-1","max_tokens":10,"messages":[{"role":"user","content":"` + long + `"}]}`

	base := w.policy(t, mockURL, `{}`, "")
	budgetPlugins := base[strings.Index(base, "plugins:\n")+len("plugins:\n"):]
	rw := strings.TrimPrefix(rewritePlugins(t, `{"set":[{"record":0,"text":"short"}],"report":"X-Rewrite"}`), "plugins:\n")
	for _, tc := range []struct {
		name    string
		plugins string
		want    int
	}{
		{"no rewrite", budgetPlugins, 429},
		{"rewrite after the budget", budgetPlugins + rw, 429},
		{"rewrite before the budget", rw + budgetPlugins, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, gw := w.gateway(t, base[:strings.Index(base, "plugins:\n")]+"plugins:\n"+tc.plugins)
			status, _, resp := w.chat(t, gw, body)
			if status != tc.want {
				t.Fatalf("status %d, want %d: %s", status, tc.want, resp)
			}
			if status != 200 {
				if e := decodeError(t, resp).Error; e.Type != "insufficient_quota" {
					t.Fatalf("refusal %s", resp)
				}
				return
			}
			up := <-seen
			if !strings.Contains(string(up.body), `"content":"short"`) || len(up.body) > 200 {
				t.Fatalf("the upstream got %d bytes: %.200s", len(up.body), up.body)
			}
		})
	}
	// The call log has the three requests, the admitted one at the
	// upstream's count of the prompt it got (not the client's 10,000
	// tokens), and its cost is what the budget counted.
	w.waitRows(t, 3)
	_, served, month := w.ledger(t)
	if prompt := w.promptTokens(t); prompt <= 0 || prompt > 100 {
		t.Fatalf("call log: %d prompt tokens", prompt)
	}
	if served <= 0 || served > budget || month != served {
		t.Fatalf("call log: %d µ$ served, spend_month %d", served, month)
	}
	// Every hold was released: nothing is left held in Redis once the
	// requests ended.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, holds := w.counter(t)
		if holds == "0" || holds == "" {
			if spent, _ := w.counter(t); spent != fmt.Sprint(served) {
				t.Fatalf("the budget counter spent %s, the call log %d", spent, served)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s µ$ still held", holds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
