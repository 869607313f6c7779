package hostsvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// scopeTenants knows one key, k1 of acme, on a plan with a budget of each
// scope: tenant 100 USD a month (alerts at 50 and 100%), key 1 USD a day
// (alert at 80%), user 0.05 USD a day.
type scopeTenants struct{ key tenant.KeyBudget }

func (s scopeTenants) Key(_ context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if h != tenant.HashKey(fuzzKey) {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Snapshot{
		Key:    tenant.Key{ID: "k1", TenantID: "acme", Hash: h, Status: tenant.StatusActive, Budget: s.key},
		Tenant: tenant.Tenant{ID: "acme", PlanID: "p", Status: tenant.StatusActive},
		Plan: tenant.Plan{ID: "p", MonthlyBudgetMicros: 100_000_000, Budgets: []tenant.BudgetRule{
			{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: 100_000_000, Alerts: []int{50, 100}},
			{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 1_000_000, Alerts: []int{80}},
			{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 50_000},
		}},
	}, nil
}

// alertLog is an AlertSink that remembers what it was told.
type alertLog struct {
	mu        sync.Mutex
	crossed   []budget.Crossing
	exhausted []string
}

func (a *alertLog) Crossed(_ context.Context, cs []budget.Crossing) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.crossed = append(a.crossed, cs...)
}

func (a *alertLog) Exhausted(_ context.Context, tenant string, s budget.Scope, spent int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.exhausted = append(a.exhausted, tenant+" "+s.String())
}

type headers map[string]string

func (h headers) PeekBytes(name []byte) []byte {
	for k, v := range h {
		if strings.EqualFold(k, string(name)) {
			return []byte(v)
		}
	}
	return nil
}

// scopeWorld is a Set over scopeTenants with a clock the test moves.
type scopeWorld struct {
	set     *Set
	counter *budget.Memory
	alerts  *alertLog
	now     time.Time
	ids     int
}

func newScopeWorld(t *testing.T, key tenant.KeyBudget) *scopeWorld {
	w := &scopeWorld{counter: budget.NewMemory(nil, nil), alerts: &alertLog{},
		now: time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)}
	w.set = NewSet(Config{
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tenants: scopeTenants{key: key}, Prices: fuzzPrices{},
		Limiter: limiter.NewMemory(nil), Budget: w.counter, Alerts: w.alerts,
		Now: func() time.Time { return w.now },
		NewID: func(dst []byte) []byte {
			w.ids++
			return append(dst, byte('a'+w.ids%26), byte('a'+w.ids/26))
		},
	})
	return w
}

// request resolves the key on a fresh session with the client headers h
// and body.
func (w *scopeWorld) request(t *testing.T, h headers, body string) (*Session, *wasmhost.Request) {
	t.Helper()
	c := new(Session)
	c.Bind(w.set)
	r := wasmhost.AcquireRequest()
	t.Cleanup(func() { wasmhost.ReleaseRequest(r); c.Reset() })
	r.Model, r.Body, r.ClientHeader = []byte("mock-1"), []byte(body), h
	if out, err := c.Call(r, "tenant.resolve", []byte(fuzzKey)); err != nil || !strings.HasPrefix(string(out), "ok") {
		t.Fatalf("resolve = %q, %v", out, err)
	}
	return c, r
}

func (w *scopeWorld) spent(t *testing.T, s budget.Scope) int64 {
	t.Helper()
	spent, _, err := w.counter.Status(context.Background(), "acme", s)
	if err != nil {
		t.Fatal(err)
	}
	return spent
}

// A request is held against every budget of its plan, with the key's and
// the end user's ids and the periods of when it was admitted; it is
// settled in those periods even after midnight; crossings reach the sink.
func TestScopesHeldAndSettled(t *testing.T) {
	w := newScopeWorld(t, tenant.KeyBudget{})
	c, r := w.request(t, headers{"X-Tollgate-End-User": "alice"}, `{}`)
	// 10 prompt tokens at 1 USD/Mtok + 1000 completion at 10 USD/Mtok: 10,010 micros.
	out, err := c.Call(r, "budget.reserve", []byte("10 1000 60000"))
	if err != nil || string(out) != "ok 10010 39990" { // the user's 50,000 is the tightest
		t.Fatalf("reserve = %q, %v", out, err)
	}
	want := []string{"tenant 2026-12", "key k1 2026-12-01", "user alice 2026-12-01"}
	var got []string
	for _, s := range c.meter.scopes {
		got = append(got, s.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("scopes %q, want %q", got, want)
	}
	w.now = w.now.Add(2 * time.Minute) // the next day
	if out, err := c.Call(r, "budget.extend", []byte("100 60000")); err != nil || !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("extend = %q, %v", out, err)
	}
	// 1,000 completion tokens more than reserved: 810,000 micros, past
	// the key's 80% alert (800,000) and over the user's budget (an
	// overrun the counter charges as it is).
	c.Settle(r, 1000, 80_900)
	if r.CostMicros != 810_000 {
		t.Fatalf("cost %d, want 810000", r.CostMicros)
	}
	scopes := slices.Clone(c.meter.scopes)
	for _, s := range scopes {
		if got := w.spent(t, s); got != 810_000 {
			t.Errorf("%s spent %d, want 810000", s, got)
		}
	}
	next := budget.Scope{Kind: budget.ScopeKey, ID: "k1", Window: budget.Day, Period: "2026-12-02", Limit: 1}
	if got := w.spent(t, next); got != 0 {
		t.Errorf("the next day's key budget spent %d, want 0", got)
	}
	if len(w.alerts.crossed) != 1 || w.alerts.crossed[0].Threshold != 80 || w.alerts.crossed[0].Scope.Kind != budget.ScopeKey {
		t.Errorf("crossings %+v, want the key's 80%%", w.alerts.crossed)
	}
}

// The tightest budget refuses, and the answer names it; the sink hears
// of the refusal. Without an end user there is no user budget; a key's
// own budget replaces the plan's key budget.
func TestScopeRefusals(t *testing.T) {
	tests := []struct {
		name    string
		key     tenant.KeyBudget
		h       headers
		body    string
		reserve string
		want    string
		refused string
	}{
		{"user per day", tenant.KeyBudget{}, headers{"x-tollgate-end-user": "bob"}, `{}`, "0 5001 60000",
			"insufficient 50010 50000 user:day", "acme user bob 2026-12-01"},
		{"user from the body", tenant.KeyBudget{}, nil, `{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"carol"}`, "0 5001 60000",
			"insufficient 50010 50000 user:day", "acme user carol 2026-12-01"},
		{"no end user: the key per day", tenant.KeyBudget{}, nil, `{"messages":[{"role":"user","content":"\"user\": x"}]}`, "0 100001 60000",
			"insufficient 1000010 1000000 key:day", "acme key k1 2026-12-01"},
		{"the key's own, per month", tenant.KeyBudget{LimitMicros: 20_000, Window: tenant.WindowMonth}, nil, `{}`, "0 2001 60000",
			"insufficient 20010 20000 key:month", "acme key k1 2026-12"},
		{"the tenant per month", tenant.KeyBudget{LimitMicros: 200_000_000, Window: tenant.WindowDay}, nil, `{}`, "0 10000001 60000",
			"insufficient 100000010 100000000 tenant:month", "acme tenant 2026-12"},
		{"fits", tenant.KeyBudget{}, nil, `{}`, "0 100000 60000", "ok 1000000 0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newScopeWorld(t, tt.key)
			c, r := w.request(t, tt.h, tt.body)
			out, err := c.Call(r, "budget.reserve", []byte(tt.reserve))
			if err != nil || string(out) != tt.want {
				t.Fatalf("reserve = %q, %v; want %q", out, err, tt.want)
			}
			var refused []string
			if tt.refused != "" {
				refused = []string{tt.refused}
			}
			if !slices.Equal(w.alerts.exhausted, refused) {
				t.Errorf("exhausted %q, want %q", w.alerts.exhausted, refused)
			}
			if c.NeedsUsage() != (tt.refused == "") {
				t.Errorf("NeedsUsage = %v after %q", c.NeedsUsage(), out)
			}
		})
	}
}

// The prompt's true count, known early, lowers the hold in every scope,
// never raises it.
func TestScopeInputKnown(t *testing.T) {
	w := newScopeWorld(t, tenant.KeyBudget{})
	c, r := w.request(t, headers{"X-Tollgate-End-User": "alice"}, `{}`)
	if out, err := c.Call(r, "budget.reserve", []byte("20000 1000 60000")); err != nil || string(out) != "ok 30000 20000" {
		t.Fatalf("reserve = %q, %v", out, err)
	}
	for _, input := range []int64{5000, 25000} { // the second would raise it
		c.InputKnown(r, input)
	}
	for _, s := range c.meter.scopes {
		if _, reserved, err := w.counter.Status(context.Background(), "acme", s); err != nil || reserved != 15_000 {
			t.Errorf("%s reserved %d, %v; want 15000", s, reserved, err)
		}
	}
}

func TestEndUserOf(t *testing.T) {
	long := strings.Repeat("u", maxEndUser+1)
	tests := []struct {
		name   string
		header string // "" is DefaultEndUserHeader
		h      headers
		body   string
		want   string
	}{
		{"header", "", headers{"X-Tollgate-End-User": " alice "}, `{"user":"bob"}`, "alice"},
		{"configured header", "X-Customer", headers{"x-customer": "carol", "X-Tollgate-End-User": "alice"}, `{}`, "carol"},
		{"configured header absent", "X-Customer", headers{"X-Tollgate-End-User": "alice"}, `{"user":"bob"}`, "bob"},
		{"body user", "", nil, `{"messages":[{"role":"user"}],"user":"bob"}`, "bob"},
		{"safety identifier", "", nil, `{"safety_identifier":"hashed-7"}`, "hashed-7"},
		{"user before safety identifier", "", nil, `{"safety_identifier":"s","user" : "u"}`, "u"},
		{"nested user is not the end user", "", nil, `{"metadata":{"user":"x"}}`, ""},
		{"role user only", "", nil, `{"messages":[{"role":"user","content":"hi"}]}`, ""},
		{"user not a string", "", nil, `{"user":42}`, ""},
		{"empty user", "", nil, `{"user":""}`, ""},
		{"escaped in the value", "", nil, `{"user":"a\u00e9b"}`, "aéb"},
		{"not JSON", "", nil, `user: x`, ""},
		{"too long", "", nil, `{"user":"` + long + `"}`, "sha256:" + hexSHA(long)},
		{"not text", "", headers{"X-Tollgate-End-User": "a\x00b"}, `{}`, "sha256:" + hexSHA("a\x00b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Body = []byte(tt.body)
			if tt.h != nil {
				r.ClientHeader = tt.h
			}
			header := tt.header
			if header == "" {
				header = DefaultEndUserHeader
			}
			if got := endUserOf(r, []byte(header)); got != tt.want {
				t.Errorf("endUserOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzEndUser: whatever the body, the end user is "" or a bounded id the
// call log can store; a JSON object whose only "user" is a top-level
// non-empty string (as encoding/json reads it) yields that string.
func FuzzEndUser(f *testing.F) {
	for _, s := range []string{`{"user":"bob"}`, `{"messages":[{"role":"user"}]}`, `{"user" :"x","user":"y"}`, `{"safety_identifier":"s"}`, `[]`, `{"user":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := wasmhost.AcquireRequest()
		defer wasmhost.ReleaseRequest(r)
		r.Body = body
		got := endUserOf(r, []byte(DefaultEndUserHeader))
		if len(got) > maxEndUser && !strings.HasPrefix(got, "sha256:") || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("end user %q", got)
		}
		var top map[string]any
		// Escapes and bad UTF-8 aside: fastjson keeps a lone surrogate's
		// escape as written and the host hashes bytes that are not
		// UTF-8, where encoding/json makes both U+FFFD; each is a
		// stable id.
		if bytes.Count(body, []byte(`"user"`)) != 1 || bytes.Contains(body, []byte(`safety_identifier`)) ||
			bytes.IndexByte(body, '\\') >= 0 || !utf8.Valid(body) || json.Unmarshal(body, &top) != nil {
			return
		}
		if u, ok := top["user"].(string); ok && u != "" && got != endUserID([]byte(u)) {
			t.Fatalf("end user %q, encoding/json reads %q", got, u)
		}
	})
}

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
