package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/testkit/mockllm"
)

// byteCountingUpstream is an OpenAI upstream whose prompt counts are far
// above the gateway's chars/4 estimate: every UTF-8 byte of a message's
// content is a token, plus 4 per message (Chinese text counts three per
// character, hex and code one per byte). Each reply has completion tokens
// (fewer than the tests' max_tokens), streamed or not, with usage, after
// delay so that requests overlap.
func byteCountingUpstream(t *testing.T, completion int, delay time.Duration) string {
	return startUpstream(t, func(rw http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			rw.WriteHeader(400)
			return
		}
		prompt := 0
		for _, m := range req.Messages {
			prompt += len(m.Content) + 4
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, prompt, completion, prompt+completion)
		text := strings.Repeat("ok ", completion)
		time.Sleep(delay)
		if !req.Stream {
			rw.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(rw, `{"id":"chatcmpl-b","object":"chat.completion","created":1,"model":"mock-1","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":%s}`, text, usage)
			return
		}
		rw.Header().Set("Content-Type", "text/event-stream")
		chunk := `{"id":"chatcmpl-b","object":"chat.completion.chunk","created":1,"model":"mock-1","choices":[%s]%s}`
		fmt.Fprintf(rw, "data: "+chunk+"\n\n", fmt.Sprintf(`{"index":0,"delta":{"role":"assistant","content":%q},"finish_reason":null}`, text), "")
		fmt.Fprintf(rw, "data: "+chunk+"\n\n", `{"index":0,"delta":{},"finish_reason":"stop"}`, "")
		fmt.Fprintf(rw, "data: "+chunk+"\n\ndata: [DONE]\n\n", "", `,"usage":`+usage)
	})
}

// scopePrompts are prompts whose true token count (in bytes) is three to
// four times chars/4.
var scopePrompts = []string{
	strings.Repeat("预算是否可信", 8),
	strings.Repeat("9f86d081884c7d65", 6),
	"func main() { for i := 0; i < 10; i++ { fmt.Println(i*i, \"squares\") } }",
	strings.Repeat("ключ бюджета ", 6),
}

// scopeCaller is one kind of request of a scope test: the key it uses,
// the end user it names (as a header or in the body), and the words of
// the refusal it may get ("" if it must never be refused; names
// separated by | when either budget may be the tightest).
type scopeCaller struct {
	key, header, bodyUser, refusal string
}

// scopeLimit is a budget the test checks: the call_log rows of filter
// (SQL over call_log), per UTC day or month, must add up to at most limit,
// and unless shared (another budget of its requests may run out first)
// to a fair share of it.
type scopeLimit struct {
	name, filter, window string
	limit                int64
	shared               bool
}

// TestBudgetScopesAcrossReplicas: per kind of budget (a tenant's day, a
// key's day and a key's own month, an end user's day), 32 clients send
// 96 requests — streamed and not, with prompts whose true count is far
// above chars/4 — through two gateway processes on one Postgres and one
// Redis. What is served stays within each budget and is a fair share of
// it, every refusal names the budget that refused, the Redis counters of
// each scope equal the call log, and no hold is left.
func TestBudgetScopesAcrossReplicas(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	tests := []struct {
		name    string
		budgets []tenant.BudgetRule
		// callers gets the world's key and a second key with its own
		// budget of 12,000 µ$ a month.
		callers func(key, own string) []scopeCaller
		limits  []scopeLimit
	}{
		{
			name:    "tenant per day",
			budgets: []tenant.BudgetRule{{Scope: tenant.BudgetTenant, Window: tenant.WindowDay, LimitMicros: 20_000}},
			callers: func(key, own string) []scopeCaller {
				return []scopeCaller{{key: key, refusal: "the tenant's daily budget"}}
			},
			limits: []scopeLimit{{"tenant", "true", "day", 20_000, false}},
		},
		{
			name: "key per day, and a key's own per month",
			budgets: []tenant.BudgetRule{
				{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: 10_000_000},
				{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 20_000},
			},
			callers: func(key, own string) []scopeCaller {
				return []scopeCaller{{key: key, refusal: "the API key's daily budget"}, {key: own, refusal: "the API key's monthly budget"}}
			},
			limits: []scopeLimit{{"plan's key", "key_id = '%[1]s'", "day", 20_000, false}, {"own key", "key_id = '%[2]s'", "month", 12_000, false}},
		},
		{
			name: "end user per day",
			budgets: []tenant.BudgetRule{
				{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 10_000},
				{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 1_000_000},
			},
			callers: func(key, own string) []scopeCaller {
				return []scopeCaller{
					{key: key, header: "alice", refusal: "the end user's daily budget"},
					{key: key, bodyUser: "bob", refusal: "the end user's daily budget"},
					{key: key}, // no end user: only the key's budget, which is far
				}
			},
			limits: []scopeLimit{{"alice", "end_user = 'alice'", "day", 10_000, false}, {"bob", "end_user = 'bob'", "day", 10_000, false}},
		},
		{
			// Three budgets per request: whichever has least room refuses.
			name: "end user and key per day",
			budgets: []tenant.BudgetRule{
				{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: 10_000_000},
				{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 8_000},
				{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 20_000},
			},
			callers: func(key, own string) []scopeCaller {
				either := "the end user's daily budget|the API key's daily budget"
				return []scopeCaller{
					{key: key, header: "alice", refusal: either},
					{key: key, bodyUser: "bob", refusal: either},
					{key: key, refusal: "the API key's daily budget"},
				}
			},
			limits: []scopeLimit{
				{"alice", "end_user = 'alice'", "day", 8_000, true}, {"bob", "end_user = 'bob'", "day", 8_000, true},
				{"the key", "key_id = '%[1]s'", "day", 20_000, false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newBudgetWorld(t, 0)
			ctx := context.Background()
			if err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", Budgets: tt.budgets}); err != nil {
				t.Fatal(err)
			}
			own, ownKey, err := w.store.CreateKey(ctx, "acme", pg.KeyOptions{Budget: tenant.KeyBudget{LimitMicros: 12_000, Window: tenant.WindowMonth}})
			if err != nil {
				t.Fatal(err)
			}
			keyID := w.keyID(t)
			up := byteCountingUpstream(t, 50, 100*time.Millisecond)
			pol := w.policy(t, up, `{}`, "")
			_, gwA := w.process(t, pol)
			_, gwB := w.process(t, pol)
			callers := tt.callers(w.key, own)
			served, refused := w.scopeLoad(t, []string{gwA, gwB}, callers, 96, 32)
			t.Logf("served %v, refused %v", served, refused)
			w.waitRows(t, 96)
			for i, c := range callers {
				if c.refusal == "" && refused[i] > 0 {
					t.Errorf("caller %d (no budget of its own) was refused %d times", i, refused[i])
				}
				if c.refusal != "" && refused[i] == 0 {
					t.Errorf("caller %d was never refused: the test did not reach its budget", i)
				}
			}
			for _, l := range tt.limits {
				filter := strings.NewReplacer("%[1]s", keyID, "%[2]s", ownKey.ID).Replace(l.filter)
				sums := w.spentBy(t, filter, l.window)
				if len(sums) == 0 {
					t.Errorf("%s: no call_log rows", l.name)
				}
				for period, sum := range sums {
					t.Logf("%s %s: %d of %d µ$", l.name, period, sum, l.limit)
					if sum > l.limit {
						t.Errorf("%s %s: served %d µ$ against a budget of %d", l.name, period, sum, l.limit)
					}
					if !l.shared && sum < l.limit*2/5 {
						t.Errorf("%s %s: served only %d µ$ of a budget of %d", l.name, period, sum, l.limit)
					}
				}
			}
			w.checkScopeCounters(t)
		})
	}
}

// keyID is the id of the world's key.
func (w *budgetWorld) keyID(t *testing.T) string {
	t.Helper()
	keys, err := w.store.ListKeys(context.Background(), "acme")
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of acme: %v, %v", keys, err)
	}
	return keys[0].ID
}

// scopeLoad sends n requests from c concurrent clients, round robin over
// the gateways and callers, half of them streamed, and counts by caller
// the requests served and refused. A refusal must be insufficient_quota
// naming the caller's budget.
func (w *budgetWorld) scopeLoad(t *testing.T, gws []string, callers []scopeCaller, n, c int) (served, refused []int) {
	served, refused = make([]int, len(callers)), make([]int, len(callers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				k := i % len(callers)
				cl := callers[k]
				user := ""
				if cl.bodyUser != "" {
					user = fmt.Sprintf(`"user":%q,`, cl.bodyUser)
				}
				body := fmt.Sprintf(`{"model":"mock-1","max_tokens":100,"stream":%v,%s"messages":[{"role":"user","content":%q}]}`,
					i%2 == 1, user, scopePrompts[i%len(scopePrompts)])
				hdr := []string{"Authorization", "Bearer " + cl.key}
				if cl.header != "" {
					hdr = append(hdr, "X-Tollgate-End-User", cl.header)
				}
				status, _, b := post(t, gws[i%len(gws)]+"/v1/chat/completions", body, hdr...)
				mu.Lock()
				switch {
				case status == 200:
					served[k]++
				case status == 429:
					refused[k]++
					var e struct {
						Error struct{ Message, Type string } `json:"error"`
					}
					if json.Unmarshal(b, &e) != nil || e.Error.Type != "insufficient_quota" || !namesOneOf(e.Error.Message, cl.refusal) {
						t.Errorf("caller %d refused with %s, want insufficient_quota naming %q", k, b, cl.refusal)
					}
				default:
					t.Errorf("caller %d: status %d: %s", k, status, b)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return served, refused
}

// namesOneOf reports whether message contains one of the |-separated
// budget names of refusal ("" names none).
func namesOneOf(message, refusal string) bool {
	for _, name := range strings.Split(refusal, "|") {
		if name != "" && strings.Contains(message, name) {
			return true
		}
	}
	return false
}

// spentBy sums acme's call_log costs of the rows matching filter by UTC
// day or month of started_at.
func (w *budgetWorld) spentBy(t *testing.T, filter, window string) map[string]int64 {
	t.Helper()
	format := "YYYY-MM-DD"
	if window == "month" {
		format = "YYYY-MM"
	}
	return queryMap[string, int64](t, w.dsn, fmt.Sprintf(`SELECT to_char(started_at AT TIME ZONE 'UTC', '%s'), sum(cost_micros)::bigint
		FROM call_log WHERE tenant_id = 'acme' AND %s GROUP BY 1`, format, filter))
}

// checkScopeCounters compares every Redis spent counter of acme with the
// call_log rows of its scope and period, and checks that nothing is held.
func (w *budgetWorld) checkScopeCounters(t *testing.T) {
	t.Helper()
	keys, err := w.redis.Do("KEYS", "*{acme}*")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, k := range strings.Split(keys, "\n") {
		// <prefix>{acme}:<kind>:<id>:<period>:spent|holds
		_, rest, _ := strings.Cut(k, "{acme}:")
		f := strings.Split(rest, ":")
		if len(f) != 4 {
			continue
		}
		kind, id, period, what := f[0], f[1], f[2], f[3]
		switch what {
		case "holds":
			if held, _ := w.redis.Do("HGET", k, ""); held != "" && held != "0" {
				t.Errorf("%s: %s µ$ still held after every request ended", k, held)
			}
		case "spent":
			got, _ := w.redis.Do("GET", k)
			filter := "true"
			switch kind {
			case "key":
				filter = fmt.Sprintf("key_id = '%s'", id)
			case "user":
				filter = fmt.Sprintf("end_user = '%s'", id)
			}
			window := "month"
			if utf8.RuneCountInString(period) == len("2006-01-02") {
				window = "day"
			}
			want := w.spentBy(t, filter, window)[period]
			if got != fmt.Sprint(want) {
				t.Errorf("%s = %s, call_log has %d", k, got, want)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Errorf("no budget counters of acme in Redis: %q", keys)
	}
}

// TestBudgetScopesWarmNoPostgres: with budgets of every scope (the
// tenant's month and day, the key's day, the end user's day), a warm
// request sends no Postgres statement before its first byte and one Redis
// command for the budget (the reserve, whatever the number of scopes); a
// new end user's first request seeds its scope from the ledger.
func TestBudgetScopesWarmNoPostgres(t *testing.T) {
	t.Parallel() // checks no time (see the package doc)
	w := newBudgetWorld(t, 10_000_000)
	ctx := context.Background()
	if err := w.store.UpdatePlan(ctx, tenant.Plan{ID: "metered", MonthlyBudgetMicros: 10_000_000, Budgets: []tenant.BudgetRule{
		{Scope: tenant.BudgetTenant, Window: tenant.WindowDay, LimitMicros: 5_000_000},
		{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 1_000_000},
		{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 500_000},
	}}); err != nil {
		t.Fatal(err)
	}
	// The first byte goes out with the first token; the end phase (Redis
	// again) comes 200 ms later.
	_, mockURL := startMock(t, mockllm.Config{Tokens: 3, TTFT: 100 * time.Millisecond, InterToken: 200 * time.Millisecond, Usage: true})
	var tenantPG, ledgerPG countingTracer
	srv, gw := w.gateway(t, w.policy(t, mockURL, `{}`, ""), proxy.WithPGTracer(&tenantPG), proxy.WithLedgerPGTracer(&ledgerPG))

	stream := `{"model":"mock-1","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hello there"}]}`
	// firstByte sends one request for user and returns the Postgres
	// statements and Redis scripts before its first byte.
	firstByte := func(user string, rows int64) (pgStatements int64, redisScripts int, polled bool) {
		t.Helper()
		if _, err := w.redis.Do("CONFIG", "RESETSTAT"); err != nil {
			t.Fatal(err)
		}
		pgBefore := tenantPG.n.Load() + ledgerPG.n.Load()
		polls := srv.CancelStats().Polls
		req, _ := http.NewRequest("POST", gw+"/v1/chat/completions", strings.NewReader(stream))
		req.Header.Set("Authorization", "Bearer "+w.key)
		req.Header.Set("X-Tollgate-End-User", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		pgStatements = tenantPG.n.Load() + ledgerPG.n.Load() - pgBefore
		polledN := srv.CancelStats().Polls - polls
		redisScripts = scriptCalls(t, w.redis) - int(polledN)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.waitRows(t, rows)
		time.Sleep(50 * time.Millisecond) // the writer's commit has returned
		return pgStatements, redisScripts, polledN != 0
	}
	firstByte("alice", 1) // cold: the key, every scope seeded
	// A cancel poll counted while its script ran before the counters
	// were reset would skew the count: measure again (a warm request
	// each time) until none ran during the measurement.
	nrows := int64(2)
	pgWarm, redisWarm, polled := firstByte("alice", nrows)
	for try := 0; polled && try < 5; try++ {
		nrows++
		pgWarm, redisWarm, polled = firstByte("alice", nrows)
	}
	pgNewUser, _, _ := firstByte("bob", nrows+1) // a new end user: its scope is seeded
	t.Logf("HOTPATH-SCOPES pg_before_first_byte=%d redis_before_first_byte=%d new_user_pg=%d", pgWarm, redisWarm, pgNewUser)
	if pgWarm != 0 {
		t.Errorf("a warm request sent %d Postgres statements before its first byte, want 0", pgWarm)
	}
	if redisWarm != 1 {
		t.Errorf("a warm request sent %d Redis scripts before its first byte, want 1 (the reserve)", redisWarm)
	}
	if pgNewUser != 1 {
		t.Errorf("a new end user's first request sent %d Postgres statements before its first byte, want 1 (its seed)", pgNewUser)
	}
	var endUsers []string
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT end_user FROM call_log ORDER BY started_at`)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("alice,", int(nrows)) + "bob"
	if endUsers, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil || strings.Join(endUsers, ",") != want {
		t.Errorf("call_log end users %q (%v), want %s", endUsers, err, want)
	}
}
