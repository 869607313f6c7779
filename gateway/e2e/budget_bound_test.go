package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// TestBudgetBoundAcrossReplicas: 32 clients through two gateway processes
// on one Postgres and one Redis send prompts whose true token count is far
// above chars/4 (Chinese, hex, code; the mock counts a token per byte, as
// no tokenizer can exceed) — streams with and without max_tokens, and
// non-streamed requests without max_tokens. What is served (the sum of
// call_log's costs, the upstream's own counts priced) stays within the
// budget, and the bound is not so loose that most of the budget goes
// unused.
func TestBudgetBoundAcrossReplicas(t *testing.T) {
	const (
		budget   = 300_000 // µ$: about 33 of these requests
		clients  = 32
		requests = 6 // per client
	)
	w := newBudgetWorld(t, budget)
	reply := strings.Repeat("预算必须是上界。", 12) // 288 bytes, 96 runes
	_, mockURL := startMock(t, mockllm.Config{TokensPerByte: true, Usage: true, Text: reply, ChunkSize: 30,
		TTFT: 20 * time.Millisecond, InterToken: 2 * time.Millisecond})
	// default_max_tokens covers the reply of a request without max_tokens:
	// the model's maximum output is unknown here (no catalog entry). The
	// prompts cost twice what the replies do, so a hold that estimated
	// them at chars/4 would not cover them with the reply's part.
	pol := w.policy(t, mockURL, `{default_max_tokens: 300, extend_tokens: 256}`, "")
	_, gwA := w.process(t, pol)
	_, gwB := w.process(t, pol)

	hex := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "0123456789abcdef"[(i*7+3)%16]
		}
		return string(b)
	}
	prompts := []string{
		strings.Repeat("请把下面的预算报告翻译成英文，并保持所有数字不变。", 80), // 6,000 bytes, 2,000 runes
		hex(6000),
		strings.Repeat("if err := s.check(r); err != nil {\n\treturn fmt.Errorf(\"check: %w\", err)\n}\n", 80),
	}
	bodies := make([]string, 0, 9)
	for _, p := range prompts {
		q, _ := json.Marshal(p)
		msgs := `"messages":[{"role":"system","content":"answer briefly"},{"role":"user","content":` + string(q) + `}]}`
		bodies = append(bodies,
			`{"model":"mock-1","stream":true,"max_tokens":300,`+msgs,
			`{"model":"mock-1","stream":true,`+msgs,
			`{"model":"mock-1",`+msgs)
	}

	// chars/4 of the prompts, as the gateway estimates them.
	var estimate int64
	for _, p := range prompts {
		estimate += int64(len([]rune(p))/4 + len("answer briefly")/4 + 8)
	}
	estimate /= int64(len(prompts))

	var ok, refused, cut atomic.Int64
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gw := gwA
			if i%2 == 1 {
				gw = gwB
			}
			for j := range requests {
				body := bodies[(i+j)%len(bodies)]
				status, _, resp := w.chat(t, gw, body)
				switch {
				case status == 200:
					ok.Add(1)
					if strings.Contains(string(resp), "monthly budget is exhausted") {
						cut.Add(1)
					}
				case status == 429:
					if e := decodeError(t, resp).Error; e.Type != "insufficient_quota" {
						t.Errorf("refusal is not insufficient_quota: %s", resp)
					}
					refused.Add(1)
					time.Sleep(30 * time.Millisecond) // let holds settle, as a client backs off
				default:
					t.Errorf("status %d: %s", status, resp)
				}
			}
		}()
	}
	wg.Wait()
	w.waitRows(t, clients*requests)
	rows, served, month := w.ledger(t)
	spent, holds := w.counter(t)
	prompt := w.promptTokens(t)
	perRequest := prompt / max(ok.Load(), 1)
	t.Logf("admitted %d (%d cut), refused %d; %d µ$ served of %d (%.0f%%); %d prompt tokens a request (chars/4: %d); spend_month %d; redis spent %s, holds %s",
		ok.Load(), cut.Load(), refused.Load(), served, budget, 100*float64(served)/budget, perRequest, estimate, month, spent, holds)
	if perRequest < 3*estimate {
		t.Fatalf("prompts of %d tokens are not far above their chars/4 estimate %d: the test shows nothing", perRequest, estimate)
	}
	if served > budget {
		t.Fatalf("served %d µ$ against a budget of %d", served, budget)
	}
	if served < budget/2 {
		t.Fatalf("served %d µ$ of a budget of %d: the holds are too loose", served, budget)
	}
	if rows != clients*requests || ok.Load()+refused.Load() != clients*requests || refused.Load() == 0 {
		t.Fatalf("rows %d, admitted %d, refused %d", rows, ok.Load(), refused.Load())
	}
	if month != served || spent != fmt.Sprint(served) {
		t.Fatalf("spend_month %d and the Redis counter %s disagree with call_log's sum %d", month, spent, served)
	}
	if holds != "0" && holds != "" {
		t.Fatalf("%s µ$ still held after every request ended", holds)
	}
}

// promptTokens is the sum of call_log's prompt_tokens of acme.
func (w *budgetWorld) promptTokens(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(prompt_tokens), 0)::bigint FROM call_log WHERE tenant_id = 'acme'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
