package hostsvc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// batchStores makes twin Sets of one kind of store with distinct state:
// one served through admitReserve, one through Call after Call.
type batchStores struct {
	name string
	// exactReset: the stores' clocks agree, so the reset headers must too.
	exactReset bool
	new        func(t *testing.T, twin string) (*Set, *redisx.Client)
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newBatchStores(t *testing.T) []batchStores {
	srv := redistest.Start(t)
	fixed := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	clock := func() time.Time { return fixed }
	ids := func(twin string) func([]byte) []byte {
		n := 0
		return func(dst []byte) []byte { n++; return strconv.AppendInt(append(dst, "hold-"...), int64(n), 10) }
	}
	return []batchStores{
		{"memory", true, func(t *testing.T, twin string) (*Set, *redisx.Client) {
			return NewSet(Config{Log: quietLog(), Prices: fuzzPrices{}, Now: clock, NewID: ids(twin),
				Limiter: limiter.NewMemory(clock), Budget: budget.NewMemory(nil, clock)}), nil
		}},
		{"redis", false, func(t *testing.T, twin string) (*Set, *redisx.Client) {
			c := redisxtest.Connect(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: time.Second, Logger: quietLog()})
			prefix := t.Name() + ":" + twin + ":"
			set := NewSet(Config{Log: quietLog(), Prices: fuzzPrices{}, Now: clock, NewID: ids(twin),
				Limiter: limiter.NewRedis(c, limiter.RedisOptions{Prefix: prefix + "rl:"}),
				Budget:  budget.NewRedis(c, nil, budget.RedisOptions{Prefix: prefix + "budget:"})})
			if !set.meter.OneTrip() {
				t.Fatal("the Redis stores on one client must make one trip")
			}
			return set, c
		}},
	}
}

// served is what a request got from the two services and left in the
// session.
type served struct {
	admit, reserve string
	headers        string
	meter          string
	cost           int64
}

func (s served) String() string {
	return fmt.Sprintf("admit %s | reserve %s | headers %s | meter %s | cost %d", s.admit, s.reserve, s.headers, s.meter, s.cost)
}

func resultText(res wasmhost.CallResult) string {
	if res.Status != 0 {
		return "status " + strconv.Itoa(res.Status)
	}
	return string(res.Body)
}

// TestAdmitReserveAsTwoCalls serves requests chosen to refuse at every
// stage through admitReserve and through two Calls, on twin stores, and
// wants the same answers, headers, meter and settled cost; a hold after a
// refused admission is skipped, never answered.
func TestAdmitReserveAsTwoCalls(t *testing.T) {
	t.Parallel()
	acme := &wasmhost.Tenant{ID: "acme", PlanRPM: 3, PlanTPM: 5_000, KeyRPM: -1, KeyTPM: -1, BudgetMicros: 3_000}
	tests := []struct {
		name         string
		tenant       *wasmhost.Tenant
		model        string
		admit        string
		reserve      string
		wantAdmit    []string // by request, the answer's first word
		wantReserve  []string
		usage        *[2]int64 // prompt and completion tokens settled; nil: none
		wantCommands int64     // Redis commands of a warm batch
	}{
		{"rate limit refuses the fourth", acme, "mock-1", "fail_closed 1 100\ntenant", "10 50 60000",
			[]string{"allowed", "allowed", "allowed", "limited"}, []string{"ok", "ok", "ok", "skipped"}, &[2]int64{10, 20}, 1},
		{"budget refuses the third", acme, "mock-1", "fail_closed 1 100\ntenant", "10 100 60000",
			[]string{"allowed", "allowed", "allowed"}, []string{"ok", "ok", "insufficient"}, nil, 1},
		{"tokens above the TPM", acme, "mock-1", "fail_closed 1 6000\ntenant", "10 50 60000",
			[]string{"limited"}, []string{"skipped"}, &[2]int64{}, 1},
		{"no limit applies", acme, "mock-1", "fail_closed 1 100\nkey", "10 50 60000",
			[]string{"unlimited", "unlimited"}, []string{"ok", "ok"}, &[2]int64{10, 20}, 1},
		{"no tenant", nil, "mock-1", "fail_closed 1 100\nanon 1 1000", "10 50 60000",
			[]string{"allowed", "limited"}, []string{"notenant", "skipped"}, &[2]int64{10, 20}, 1},
		{"no price", acme, "other", "fail_closed 1 100\ntenant", "10 50 60000",
			[]string{"allowed", "allowed"}, []string{"noprice", "noprice"}, &[2]int64{10, 20}, 1},
		{"bad admission", acme, "mock-1", "fail_sideways 1 100\ntenant", "10 50 60000",
			[]string{"status -2"}, []string{"skipped"}, &[2]int64{}, 0},
		{"bad hold", acme, "mock-1", "fail_closed 1 100\ntenant", "10 x 60000",
			[]string{"allowed"}, []string{"status -2"}, &[2]int64{}, 1},
	}
	for _, st := range newBatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					batchSet, client := st.new(t, "batch")
					callSet, _ := st.new(t, "calls")
					// Warm: scripts loaded, budget seeded, on another tenant.
					warm := &wasmhost.Tenant{ID: "warm", PlanRPM: 100, BudgetMicros: 1_000_000}
					serveBatch(batchSet, warm, tt.model, "fail_closed 1 1\ntenant", "1 1 60000", nil)
					for i := range tt.wantAdmit {
						var commands int64
						if client != nil {
							commands = client.Commands()
						}
						got := serveBatch(batchSet, tt.tenant, tt.model, tt.admit, tt.reserve, tt.usage)
						batchSet.WaitEnds() // the settle, made after the reply, is answered
						if client != nil && i > 0 {
							if n := client.Commands() - commands; n != tt.wantCommands+settleCommands(got, tt.usage) {
								t.Errorf("request %d: %d Redis commands, want %d and the settle's", i, n, tt.wantCommands)
							}
						}
						want := serveCalls(callSet, tt.tenant, tt.model, tt.admit, tt.reserve, tt.usage)
						if !st.exactReset {
							got, want = dropResets(got), dropResets(want)
						}
						if got != want {
							t.Fatalf("request %d:\nbatch %s\ncalls %s", i, got, want)
						}
						if w := strings.Fields(got.admit); len(w) == 0 || w[0] != tt.wantAdmit[i] && got.admit != tt.wantAdmit[i] {
							t.Errorf("request %d: admit %q, want %s", i, got.admit, tt.wantAdmit[i])
						}
						if w := strings.Fields(got.reserve); len(w) == 0 || w[0] != tt.wantReserve[i] && got.reserve != tt.wantReserve[i] {
							t.Errorf("request %d: reserve %q, want %s", i, got.reserve, tt.wantReserve[i])
						}
					}
				})
			}
		})
	}
}

// settleCommands is how many commands the settle of a request that got s
// sends: one when it charged tokens or holds budget.
func settleCommands(s served, usage *[2]int64) int64 {
	if usage != nil && (strings.HasPrefix(s.reserve, "ok") || s.admit == "allowed") {
		return 1
	}
	return 0
}

// dropResets blanks what moves with the Redis server's clock between the
// twins' calls: the reset headers, the tokens that came back meanwhile,
// Retry-After and a refusal's retry time.
func dropResets(s served) served {
	var b strings.Builder
	for _, f := range strings.Split(s.headers, ",") {
		if strings.HasPrefix(f, "x-ratelimit-reset-") || strings.HasPrefix(f, "retry-after=") ||
			strings.HasPrefix(f, "x-ratelimit-remaining-tokens=") {
			f, _, _ = strings.Cut(f, "=")
		}
		b.WriteString(f + ",")
	}
	s.headers = b.String()
	if strings.HasPrefix(s.admit, "limited ") {
		s.admit = s.admit[:strings.LastIndexByte(s.admit, ' ')]
	}
	return s
}

func newRequest(tenant *wasmhost.Tenant, model string) *wasmhost.Request {
	r := wasmhost.AcquireRequest()
	r.Model, r.RequestID = []byte(model), []byte("client-id")
	if tenant != nil {
		t := *tenant
		r.Tenant = &t
	}
	return r
}

// serveBatch serves one request's admission and hold together, then
// settles usage (nil: not).
func serveBatch(set *Set, tenant *wasmhost.Tenant, model, admit, reserve string, usage *[2]int64) served {
	var c Session
	c.Bind(set)
	defer c.Reset()
	r := newRequest(tenant, model)
	defer wasmhost.ReleaseRequest(r)
	a, b := c.admitReserve(r, []byte(admit), []byte(reserve))
	s := served{admit: resultText(a), reserve: resultText(b)}
	if b.Status == wasmhost.StatusSkipped {
		s.reserve = "skipped"
	}
	return finish(&c, r, s, usage)
}

// serveCalls serves them as two calls, the hold only if the admission let
// the request go on.
func serveCalls(set *Set, tenant *wasmhost.Tenant, model, admit, reserve string, usage *[2]int64) served {
	var c Session
	c.Bind(set)
	defer c.Reset()
	r := newRequest(tenant, model)
	defer wasmhost.ReleaseRequest(r)
	out, err := c.Call(r, admitService, []byte(admit))
	s := served{admit: resultText(textResult(out, err)), reserve: "skipped"}
	if !refused(out, err) {
		out, err = c.Call(r, reserveService, []byte(reserve))
		s.reserve = resultText(textResult(out, err))
	}
	return finish(&c, r, s, usage)
}

func finish(c *Session, r *wasmhost.Request, s served, usage *[2]int64) served {
	var h strings.Builder
	for _, x := range r.SetClientHeaders {
		fmt.Fprintf(&h, "%s=%s,", strings.ToLower(string(x.Name)), x.Value)
	}
	s.headers = h.String()
	m := &c.meter
	s.meter = fmt.Sprintf("limits=%v tokens=%d charged=%v held=%v heldMicros=%d heldCompletion=%d scopes=%d",
		m.limits, m.tokens, m.charged, m.held, m.heldMicros, m.heldCompletion, len(m.scopes))
	if usage != nil {
		c.Settle(r, usage[0], usage[1])
		s.cost = r.CostMicros
	}
	return s
}

// TestPair: a batch's first admission and first hold, of the Set's own
// services, are served together, in either order.
func TestPair(t *testing.T) {
	own := fuzzServices()
	replaced := fuzzServices()
	replaced.Register(reserveService, ServiceFunc(func(*Session, *wasmhost.Request, []byte) ([]byte, error) { return nil, nil }))
	calls := func(services ...string) []*wasmhost.Call {
		var out []*wasmhost.Call
		for _, s := range services {
			out = append(out, &wasmhost.Call{Service: s})
		}
		return out
	}
	tests := []struct {
		name        string
		set         *Set
		calls       []*wasmhost.Call
		admit, hold int
		want        bool
	}{
		{"admit then reserve", own, calls(admitService, reserveService), 0, 1, true},
		{"reserve then admit", own, calls(reserveService, admitService), 1, 0, true},
		{"calls between", own, calls("http", admitService, "tenant.resolve", reserveService), 1, 3, true},
		{"the first of each", own, calls(reserveService, admitService, admitService, reserveService), 1, 0, true},
		{"no hold", own, calls(admitService, "http"), 0, 0, false},
		{"no admission", own, calls(reserveService), 0, 0, false},
		{"reserve replaced", replaced, calls(admitService, reserveService), 0, 0, false},
		{"unbound", nil, calls(admitService, reserveService), 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Session
			if tt.set != nil {
				c.Bind(tt.set)
			}
			admit, hold, ok := c.pair(tt.calls)
			if ok != tt.want || ok && (admit != tt.admit || hold != tt.hold) {
				t.Errorf("pair = %d, %d, %v; want %d, %d, %v", admit, hold, ok, tt.admit, tt.hold, tt.want)
			}
		})
	}
}

// TestBatchUnderContention: 64 goroutines serve requests through
// sessions of one Set on Redis, each admission and hold in one script call
// and settled with its real usage, against a rate limit and a budget that
// refuse most of them: at most the RPM are admitted, the settled cost
// stays within the budget and every hold is gone at the end.
func TestBatchUnderContention(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, err := redisx.New(redisx.Options{Addrs: []string{srv.Addr()}, Timeout: time.Second, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	counter := budget.NewRedis(c, nil, budget.RedisOptions{})
	var ids atomic.Int64
	set := NewSet(Config{Log: quietLog(), Prices: fuzzPrices{}, Limiter: limiter.NewRedis(c, limiter.RedisOptions{}), Budget: counter,
		NewID: func(dst []byte) []byte { return strconv.AppendInt(append(dst, "h"...), ids.Add(1), 10) }})
	const rpm, budgetMicros = 200, 60_000
	acme := &wasmhost.Tenant{ID: "acme", PlanRPM: rpm, PlanTPM: 1_000_000, KeyRPM: -1, KeyTPM: -1, BudgetMicros: budgetMicros}
	var allowed, limited, held, insufficient, cost atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 6 {
				var s Session
				s.Bind(set)
				r := newRequest(acme, "mock-1")
				completion := int64(20 + (w*31+i*17)%200)
				a, b := s.admitReserve(r, []byte("fail_closed 1 300\ntenant"), []byte("10 "+strconv.FormatInt(completion, 10)+" 60000"))
				switch {
				case string(a.Body) == "allowed":
					allowed.Add(1)
				case strings.HasPrefix(string(a.Body), "limited "):
					limited.Add(1)
					if b.Status != wasmhost.StatusSkipped || s.NeedsUsage() {
						t.Errorf("limited, yet the hold was %q (status %d), needs usage %v", b.Body, b.Status, s.NeedsUsage())
					}
				default:
					t.Errorf("admit %q (status %d)", a.Body, a.Status)
				}
				switch w := strings.Fields(string(b.Body)); {
				case len(w) > 0 && w[0] == "ok":
					held.Add(1)
				case len(w) > 0 && w[0] == "insufficient":
					insufficient.Add(1)
				}
				s.Settle(r, 10, completion-int64(i)) // within the hold
				cost.Add(r.CostMicros)
				wasmhost.ReleaseRequest(r)
				s.Reset()
			}
		})
	}
	wg.Wait()
	t.Logf("allowed=%d limited=%d held=%d insufficient=%d cost=%d", allowed.Load(), limited.Load(), held.Load(), insufficient.Load(), cost.Load())
	// The limit admits rpm at once, and one more every 60s/rpm since.
	limit := rpm + int64(time.Since(start)*rpm/time.Minute)
	if allowed.Load() > limit || limited.Load() == 0 || insufficient.Load() == 0 {
		t.Errorf("allowed %d (limit %d), limited %d, insufficient %d: want within the limit, and both refusals", allowed.Load(), limit, limited.Load(), insufficient.Load())
	}
	scope := budget.Scope{Kind: budget.ScopeTenant, Window: budget.Month, Period: budget.Month.Period(time.Now())}
	spent, reserved, err := counter.Status(ctx, "acme", scope)
	if err != nil || spent != cost.Load() || spent > budgetMicros || reserved != 0 {
		t.Errorf("spent %d reserved %d (%v), want %d ≤ %d and 0", spent, reserved, err, cost.Load(), budgetMicros)
	}
}
