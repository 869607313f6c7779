package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// kindsPrice prices mock-2 with a rate of its own for each kind the test's
// replies report, every one apart from the base rates, so a kind priced
// as another changes the cost.
var kindsPrice = tenant.Price{Model: "mock-2", InputMicrosPerMTok: inputMicrosPerMTok, OutputMicrosPerMTok: outputMicrosPerMTok,
	CachedInputMicrosPerMTok: 100_000, CacheWriteMicrosPerMTok: 1_250_000, ReasoningMicrosPerMTok: 20_000_000}

// TestBudgetSettlesTokenKinds: a reply whose usage has cached reads, cache
// writes and reasoning tokens is settled at each kind's rate, streamed or
// not, from an OpenAI upstream and an Anthropic one (whose input_tokens
// leave the cache's reads and writes out), through the chat surface and
// the native Messages one; the call log records the kinds, and the ledger
// and the budget counter agree with it.
func TestBudgetSettlesTokenKinds(t *testing.T) {
	w := newBudgetWorld(t, 100_000_000)
	for _, model := range []string{"mock-2", "claude-kinds"} {
		p := kindsPrice
		p.Model, p.EffectiveFrom = model, time.Now().Add(-time.Hour)
		if err := w.store.SetPrice(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	_, mockURL := startMock(t, mockllm.Config{Tokens: 20})
	// The mock takes any key; the admin token is a variable the test's
	// gateway can read.
	pol := strings.Replace(w.policy(t, mockURL, `{}`, ""), "routes:\n", fmt.Sprintf(`  - name: claude
    provider: anthropic
    base_url: %s/v1
    api_key_env: TOLLGATE_ADMIN_TOKEN
    forward_headers: ["x-mock-*"]
routes:
  - models: ["claude-kinds"]
    upstream: claude
`, mockURL), 1)
	_, gw := w.gateway(t, pol)
	const cached, written, reasoning = 1000, 200, 500
	kinds := mockllm.UsageKinds{CachedInput: cached, CacheWrite: written, Reasoning: reasoning}.String()
	const msg = `"max_tokens":1000,"messages":[{"role":"user","content":"hello there"}]}`
	requests := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"mock-2",` + msg},
		{"/v1/chat/completions", `{"model":"mock-2","stream":true,` + msg},
		{"/v1/chat/completions", `{"model":"claude-kinds",` + msg},
		{"/v1/chat/completions", `{"model":"claude-kinds","stream":true,` + msg},
		{"/v1/messages", `{"model":"claude-kinds",` + msg},
		{"/v1/messages", `{"model":"claude-kinds","stream":true,` + msg},
	}
	for _, r := range requests {
		status, _, body := post(t, gw+r.path, r.body, "Authorization", "Bearer "+w.key, mockllm.HeaderUsageKinds, kinds)
		if status != 200 {
			t.Fatalf("%s %s: %d %s", r.path, r.body, status, body)
		}
	}
	w.waitRows(t, int64(len(requests)))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT model, prompt_tokens, completion_tokens, cached_input_tokens, cache_write_tokens,
       reasoning_tokens, audio_input_tokens, cost_micros FROM call_log WHERE tenant_id = 'acme'`)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	n := 0
	for rows.Next() {
		var model string
		var prompt, completion, gotCached, gotWritten, gotReasoning, cost int64
		var audio *int64
		if err := rows.Scan(&model, &prompt, &completion, &gotCached, &gotWritten, &gotReasoning, &audio, &cost); err != nil {
			t.Fatal(err)
		}
		n++
		total += cost
		// Anthropic counts thinking in output_tokens and reports it no
		// further: it is priced as output, as Anthropic bills it.
		wantReasoning := int64(reasoning)
		if model == "claude-kinds" {
			wantReasoning = 0
		}
		if gotCached != cached || gotWritten != written || gotReasoning != wantReasoning || audio == nil || *audio != 0 {
			t.Errorf("%s: kinds %d/%d/%d audio %v; want %d/%d/%d and 0", model, gotCached, gotWritten, gotReasoning, audio,
				cached, written, wantReasoning)
		}
		// The mock's 20 tokens of text, plus the reasoning.
		if completion != 20+reasoning || prompt <= cached+written {
			t.Errorf("%s: prompt %d, completion %d tokens", model, prompt, completion)
		}
		u := tenant.TokenUsage{Prompt: prompt, Completion: completion, CachedInput: cached, CacheWrite: written, Reasoning: wantReasoning}
		base := (prompt*inputMicrosPerMTok + completion*outputMicrosPerMTok + 999_999) / 1_000_000
		// Every kind at its rate: the rest of the prompt at 1 µ$, reads at
		// 0.1, writes at 1.25; the other output at 10 µ$, reasoning at 20.
		want := ((prompt-cached-written)*1_000_000 + cached*100_000 + written*1_250_000 +
			(completion-wantReasoning)*10_000_000 + wantReasoning*20_000_000 + 999_999) / 1_000_000
		if cost != want || cost != kindsPrice.Cost(u) || cost == base {
			t.Errorf("%s: settled %d µ$; want %d (at the base rates it would be %d)", model, cost, want, base)
		}
	}
	if err := rows.Err(); err != nil || n != len(requests) {
		t.Fatalf("%d rows (%v)", n, err)
	}
	_, sum, month := w.ledger(t)
	spent, holds := w.counter(t)
	if sum != total || month != total || spent != fmt.Sprint(total) || (holds != "0" && holds != "") {
		t.Errorf("call_log %d, spend_month %d, Redis spent %s (holds %s); want all %d", sum, month, spent, holds, total)
	}
}

// TestUnpricedModelPolicy: a model without a price is refused under
// pricing.unpriced: refuse (whatever the tenant's budget), and under free
// served at no cost and counted by the policy's model name.
func TestUnpricedModelPolicy(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 100_000_000)
	_, mockURL := startMock(t, mockllm.Config{Tokens: 5})
	const unpriced = `{"model":"mock-unpriced","messages":[{"role":"user","content":"hello"}]}`
	for _, tc := range []struct {
		policy string
		status int
		code   string
	}{
		{"refuse", 400, "model_not_priced"},
		{"free", 200, ""},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			srv, gw := w.gateway(t, w.policy(t, mockURL, `{}`, "")+"pricing: {unpriced: "+tc.policy+"}\n")
			status, _, body := w.chat(t, gw, unpriced)
			if status != tc.status || (tc.code != "" && !strings.Contains(string(body), `"code":"`+tc.code+`"`)) {
				t.Fatalf("%d %s; want %d %s", status, body, tc.status, tc.code)
			}
			// A priced model is served either way.
			if status, _, body := w.chat(t, gw, chatMax100); status != 200 {
				t.Fatalf("priced model: %d %s", status, body)
			}
			m := httptest.NewServer(srv.MetricsHandler())
			defer m.Close()
			want := "0"
			if tc.status == 200 {
				want = "1"
			}
			deadline := time.Now().Add(5 * time.Second)
			for scrape(t, m.URL, `tollgate_budget_unpriced_requests_total{model="mock-*"}`) != want && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := scrape(t, m.URL, `tollgate_budget_unpriced_requests_total{model="mock-*"}`); got != want && !(want == "0" && got == "") {
				t.Errorf("unpriced requests %q, want %s", got, want)
			}
		})
	}
}
