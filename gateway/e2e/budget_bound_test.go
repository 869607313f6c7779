package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
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
	t.Parallel() // checks no time (see the package doc)
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

// TestBudgetShrinksAtMessageStart: a native Messages API stream is held at
// its prompt's bound (its body's bytes) until message_start reports the
// true input count; from then on it holds that count and its max_tokens,
// and nothing once it ends.
func TestBudgetShrinksAtMessageStart(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 10_000_000)
	if err := w.store.SetPrice(context.Background(), tenant.Price{Model: "claude-x", InputMicrosPerMTok: inputMicrosPerMTok,
		OutputMicrosPerMTok: outputMicrosPerMTok, EffectiveFrom: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, mockURL := startMock(t, mockllm.Config{Tokens: 20, InterToken: 40 * time.Millisecond})
	extra := fmt.Sprintf(`store:
  kind: postgres
redis: {addrs: [%q], timeout: 500ms}
call_log: {spool_dir: "${TG_TEST_SPOOL}", reconcile_interval: 0s}
plugins:
  - {name: preflight, path: %s}
  - {name: budget, path: %s}
`, w.redis.Addr(), pluginPath(t, "preflight"), pluginPath(t, "budget"))
	_, gw := startGateway(t, anthropicPolicy(mockURL, mockURL, "", extra),
		map[string]string{"TOLLGATE_DATABASE_URL": w.dsn, "TG_TEST_SPOOL": t.TempDir(), "ANTHROPIC_API_KEY": anthropicKey})

	prompt := strings.Repeat("The budget holds an upper bound of every request's cost. ", 100) // 5,700 bytes
	q, _ := json.Marshal(prompt)
	body := `{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":` + string(q) + `}]}`
	// The mock reports chars/4 input tokens; the hold shrinks to them and
	// the 100 completion tokens held.
	input := int64(len(prompt) / 4)
	shrunk := input*inputMicrosPerMTok/1_000_000 + 100*outputMicrosPerMTok/1_000_000
	bound := int64(len(body)) // the prompt bound's bytes alone, at 1 µ$ a token
	if bound < 3*input {
		t.Fatalf("the prompt's bound %d is not far above its count %d: the test shows nothing", bound, input)
	}

	req, _ := http.NewRequest("POST", gw+"/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", w.key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	rd := bufio.NewReader(resp.Body)
	var mid string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its second text delta: %v", err)
		}
		if strings.Contains(line, `"text_delta"`) && strings.Contains(line, "tok1 ") {
			_, mid = w.counter(t) // mid-stream: message_start came and went
			break
		}
	}
	io.Copy(io.Discard, rd)
	if mid != fmt.Sprint(shrunk) {
		t.Fatalf("held %s µ$ mid-stream, want %d (%d input tokens and 100 completion; the bound held %d+ before)", mid, shrunk, input, bound)
	}
	w.waitRows(t, 1)
	if _, holds := w.counter(t); holds != "0" && holds != "" {
		t.Fatalf("%s µ$ still held after the stream ended", holds)
	}
}
