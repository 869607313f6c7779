package limiter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is a clock that moves only when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock {
	return &testClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const us = time.Microsecond

// step is one call in a scripted sequence against a Memory.
type step struct {
	advance time.Duration
	limits  []Limit // nil: the test's limits
	tokens  int64
	adjust  int64 // non-zero: Adjust by this instead of Admit
	want    Decision
}

func TestMemoryGCRA(t *testing.T) {
	rpm3 := []Limit{{Key: "t", RPM: 3}}   // T = 20s
	tpm := []Limit{{Key: "t", TPM: 1000}} // a token is 60ms
	multi := []Limit{{Key: "t", RPM: 10}, {Key: "k:1", RPM: 2}, {Key: "m:1:gpt", TPM: 100}}
	tests := []struct {
		name   string
		limits []Limit
		steps  []step
	}{
		{"burst of RPM, then one per T", rpm3, []step{
			{want: Decision{Allowed: true, LimitRequests: 3, RemainingRequests: 2, ResetRequests: 20 * time.Second}},
			{want: Decision{Allowed: true, LimitRequests: 3, RemainingRequests: 1, ResetRequests: 40 * time.Second}},
			{want: Decision{Allowed: true, LimitRequests: 3, RemainingRequests: 0, ResetRequests: time.Minute}},
			{want: Decision{LimitRequests: 3, ResetRequests: time.Minute, RetryAfter: 20 * time.Second}},
			{advance: 20*time.Second - us, want: Decision{LimitRequests: 3, ResetRequests: 40*time.Second + us, RetryAfter: us}},
			{advance: us, want: Decision{Allowed: true, LimitRequests: 3, ResetRequests: time.Minute}},
			{want: Decision{LimitRequests: 3, ResetRequests: time.Minute, RetryAfter: 20 * time.Second}},
			{advance: 20 * time.Second, want: Decision{Allowed: true, LimitRequests: 3, ResetRequests: time.Minute}},
			{advance: 50 * time.Second, want: Decision{Allowed: true, LimitRequests: 3, RemainingRequests: 1, ResetRequests: 30 * time.Second}},
			{advance: time.Hour, want: Decision{Allowed: true, LimitRequests: 3, RemainingRequests: 2, ResetRequests: 20 * time.Second}},
		}},
		{"tokens: charge, reject, give back, debt", tpm, []step{
			{tokens: 400, want: Decision{Allowed: true, LimitTokens: 1000, RemainingTokens: 600, ResetTokens: 24 * time.Second}},
			{tokens: 600, want: Decision{Allowed: true, LimitTokens: 1000, ResetTokens: time.Minute}},
			{tokens: 1, want: Decision{LimitTokens: 1000, ResetTokens: time.Minute, RetryAfter: 60 * time.Millisecond}},
			{adjust: -500},
			{tokens: 0, want: Decision{Allowed: true, LimitTokens: 1000, RemainingTokens: 500, ResetTokens: 30 * time.Second}},
			{tokens: 500, want: Decision{Allowed: true, LimitTokens: 1000, ResetTokens: time.Minute}},
			{adjust: 1000}, // debt: the TAT is two minutes ahead
			{tokens: 0, want: Decision{LimitTokens: 1000, ResetTokens: 2 * time.Minute, RetryAfter: time.Minute}},
			{advance: time.Minute, tokens: 0, want: Decision{Allowed: true, LimitTokens: 1000, ResetTokens: time.Minute}},
			{advance: 30 * time.Second, tokens: 1001, want: Decision{LimitTokens: 1000, RemainingTokens: 500, ResetTokens: 30 * time.Second, RetryAfter: time.Minute}},
			{adjust: -1 << 62}, // a give-back stops at now: a full cell
			{tokens: 1000, want: Decision{Allowed: true, LimitTokens: 1000, ResetTokens: time.Minute}},
		}},
		{"give-back to a fresh limit changes nothing", tpm, []step{
			{adjust: -300},
			{tokens: 1000, want: Decision{Allowed: true, LimitTokens: 1000, ResetTokens: time.Minute}},
			{tokens: 1, want: Decision{LimitTokens: 1000, ResetTokens: time.Minute, RetryAfter: 60 * time.Millisecond}},
		}},
		{"debt on a fresh limit", tpm, []step{
			{adjust: 250},
			{tokens: 0, want: Decision{Allowed: true, LimitTokens: 1000, RemainingTokens: 750, ResetTokens: 15 * time.Second}},
		}},
		{"several limits: all or none charged; least remaining reported", multi, []step{
			// t: T=6s; k:1: T=30s; m: 600ms a token.
			{tokens: 50, want: Decision{Allowed: true, LimitRequests: 2, RemainingRequests: 1, ResetRequests: 30 * time.Second,
				LimitTokens: 100, RemainingTokens: 50, ResetTokens: 30 * time.Second}},
			// Rejected by m alone (50+60 > 100): nothing is charged.
			{tokens: 60, want: Decision{LimitRequests: 2, RemainingRequests: 1, ResetRequests: 30 * time.Second,
				LimitTokens: 100, RemainingTokens: 50, ResetTokens: 30 * time.Second, RetryAfter: 6 * time.Second}},
			{tokens: 10, want: Decision{Allowed: true, LimitRequests: 2, RemainingRequests: 0, ResetRequests: time.Minute,
				LimitTokens: 100, RemainingTokens: 40, ResetTokens: 36 * time.Second}},
			// Rejected by k:1 alone.
			{tokens: 0, want: Decision{LimitRequests: 2, RemainingRequests: 0, ResetRequests: time.Minute,
				LimitTokens: 100, RemainingTokens: 40, ResetTokens: 36 * time.Second, RetryAfter: 30 * time.Second}},
			// t was charged twice in four calls: 12s ahead.
			{limits: []Limit{{Key: "t", RPM: 10}}, want: Decision{Allowed: true, LimitRequests: 10, RemainingRequests: 7, ResetRequests: 18 * time.Second}},
		}},
		{"no rate in any limit", []Limit{{Key: "t"}, {Key: "k", RPM: -1, TPM: 0}}, []step{
			{tokens: 1 << 40, want: Decision{Allowed: true}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newTestClock()
			m := NewMemory(clk.Now)
			ctx := context.Background()
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				limits := s.limits
				if limits == nil {
					limits = tt.limits
				}
				if s.adjust != 0 {
					if err := m.Adjust(ctx, "acme", limits, s.adjust, FailClosed, 0); err != nil {
						t.Fatalf("step %d: Adjust: %v", i, err)
					}
					continue
				}
				got, err := m.Admit(ctx, &Request{Tenant: "acme", Limits: limits, Tokens: s.tokens})
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got != s.want {
					t.Fatalf("step %d:\n got %+v\nwant %+v", i, got, s.want)
				}
			}
		})
	}
}

// TestMemoryBurstIsExact checks that a burst admits exactly RPM requests
// also where a minute is no multiple of µs per request.
func TestMemoryBurstIsExact(t *testing.T) {
	tests := []struct {
		rpm       int64
		wantRetry time.Duration
	}{
		{1, time.Minute},
		{7, 8571429 * us}, // T = ⌈60s/7⌉
		{100, 600 * time.Millisecond},
		{70_000, 858 * us}, // T = ⌈857.14µs⌉
	}
	for _, tt := range tests {
		clk := newTestClock()
		m := NewMemory(clk.Now)
		r := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: tt.rpm}}}
		for i := range tt.rpm {
			d, err := m.Admit(context.Background(), r)
			if err != nil || !d.Allowed || d.RemainingRequests != tt.rpm-1-i {
				t.Fatalf("rpm %d: request %d: %+v, %v", tt.rpm, i, d, err)
			}
		}
		d, _ := m.Admit(context.Background(), r)
		if d.Allowed || d.RetryAfter != tt.wantRetry {
			t.Fatalf("rpm %d: request %d: %+v, want a rejection with RetryAfter %v", tt.rpm, tt.rpm, d, tt.wantRetry)
		}
		clk.Advance(tt.wantRetry)
		if d, _ := m.Admit(context.Background(), r); !d.Allowed {
			t.Fatalf("rpm %d: rejected after RetryAfter: %+v", tt.rpm, d)
		}
	}
}

func TestMemoryTenantsAndKeysAreSeparate(t *testing.T) {
	m := NewMemory(newTestClock().Now)
	ctx := context.Background()
	admit := func(tenant, key string) bool {
		d, err := m.Admit(ctx, &Request{Tenant: tenant, Limits: []Limit{{Key: key, RPM: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	got := []bool{admit("a", "k"), admit("a", "k"), admit("b", "k"), admit("a", "j"), admit("b", "k")}
	want := []bool{true, false, true, true, false}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admissions = %v, want %v", got, want)
		}
	}
}

func TestMemoryConcurrentExact(t *testing.T) {
	clk := newTestClock() // frozen
	m := NewMemory(clk.Now)
	r := Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 100}, {Key: "k:1", RPM: 1000}}}
	var allowed, rejected atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= 500 {
				d, err := m.Admit(context.Background(), &r)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					allowed.Add(1)
				} else {
					rejected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 100 || rejected.Load() != 400 {
		t.Fatalf("allowed %d, rejected %d; want 100, 400", allowed.Load(), rejected.Load())
	}
	// k:1 was charged only for the 100 admitted requests.
	d, _ := m.Admit(context.Background(), &Request{Tenant: "acme", Limits: []Limit{{Key: "k:1", RPM: 1000}}})
	if !d.Allowed || d.RemainingRequests != 899 {
		t.Fatalf("k:1 after the run: %+v, want 899 remaining", d)
	}
}

func TestMemorySweepDropsIdleLimits(t *testing.T) {
	clk := newTestClock()
	m := NewMemory(clk.Now)
	ctx := context.Background()
	for _, tenant := range []string{"a", "b", "c"} {
		if _, err := m.Admit(ctx, &Request{Tenant: tenant, Limits: []Limit{{Key: "t", RPM: 60}, {Key: "k", TPM: 60}}, Tokens: 30}); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n != 6 {
		t.Fatalf("Len = %d, want 6", n)
	}
	clk.Advance(time.Minute)
	// 30 tokens of 60 TPM hold "k" for 30s; "t" for 1s. Both are full now.
	if _, err := m.Admit(ctx, &Request{Tenant: "a", Limits: []Limit{{Key: "t", RPM: 60}}}); err != nil {
		t.Fatal(err)
	}
	if n := m.Len(); n != 1 {
		t.Fatalf("Len after a minute = %d, want 1", n)
	}
}

func TestValidation(t *testing.T) {
	ok := []Limit{{Key: "t", RPM: 1}}
	many := make([]Limit, MaxLimits+1)
	for i := range many {
		many[i] = Limit{Key: string(rune('a' + i)), RPM: 1}
	}
	tests := []struct {
		name string
		r    *Request
		want string // "" valid; else part of the error
	}{
		{"valid", &Request{Tenant: "a", Limits: ok}, ""},
		{"longest key", &Request{Tenant: "a", Limits: []Limit{{Key: strings.Repeat("k", MaxKeyLen)}}}, ""},
		{"16 limits", &Request{Tenant: "a", Limits: many[:MaxLimits]}, ""},
		{"unicode and braces in key", &Request{Tenant: "{a}", Limits: []Limit{{Key: "m:κ:{gpt-4o}", RPM: 1}}}, ""},
		{"max RPM", &Request{Tenant: "a", Limits: []Limit{{Key: "t", RPM: MaxRPM}}}, ""},
		{"replicas", &Request{Tenant: "a", Limits: ok, OnError: FailOpen, Replicas: 3}, ""},
		{"nil", nil, "nil request"},
		{"empty tenant", &Request{Limits: ok}, "empty tenant"},
		{"no limits", &Request{Tenant: "a"}, "0 limits"},
		{"17 limits", &Request{Tenant: "a", Limits: many}, "17 limits"},
		{"empty key", &Request{Tenant: "a", Limits: []Limit{{RPM: 1}}}, "empty"},
		{"long key", &Request{Tenant: "a", Limits: []Limit{{Key: strings.Repeat("k", MaxKeyLen+1)}}}, "too long"},
		{"space", &Request{Tenant: "a", Limits: []Limit{{Key: "a b"}}}, "whitespace"},
		{"tab", &Request{Tenant: "a", Limits: []Limit{{Key: "a\tb"}}}, "whitespace"},
		{"newline", &Request{Tenant: "a", Limits: []Limit{{Key: "a\n"}}}, "whitespace"},
		{"no-break space", &Request{Tenant: "a", Limits: []Limit{{Key: "a\u00a0b"}}}, "whitespace"},
		{"not utf-8", &Request{Tenant: "a", Limits: []Limit{{Key: "a\xffb"}}}, "UTF-8"},
		{"duplicate key", &Request{Tenant: "a", Limits: []Limit{{Key: "t", RPM: 1}, {Key: "t", TPM: 1}}}, "named twice"},
		{"RPM too high", &Request{Tenant: "a", Limits: []Limit{{Key: "t", RPM: MaxRPM + 1}}}, "above"},
		{"negative tokens", &Request{Tenant: "a", Limits: ok, Tokens: -1}, "negative tokens"},
		{"negative replicas", &Request{Tenant: "a", Limits: ok, Replicas: -1}, "negative replicas"},
		{"unknown mode", &Request{Tenant: "a", Limits: ok, OnError: 2}, "fail mode"},
	}
	m := NewMemory(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Admit(context.Background(), tt.r)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("valid request rejected: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
	if err := m.Adjust(context.Background(), "", ok, 1, FailClosed, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Adjust with an empty tenant: %v, want ErrInvalid", err)
	}
	if err := m.Adjust(context.Background(), "a", ok, 1, FailOpen, -2); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Adjust with negative replicas: %v, want ErrInvalid", err)
	}
}

func TestMemoryAdmitDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	m := NewMemory(newTestClock().Now)
	r := &Request{Tenant: "acme", Limits: []Limit{{Key: "t", RPM: 1 << 20, TPM: 1 << 40}, {Key: "k:1", RPM: 1 << 20}}, Tokens: 10}
	ctx := context.Background()
	if _, err := m.Admit(ctx, r); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = m.Admit(ctx, r) }); n != 0 {
		t.Fatalf("Admit allocates %v times per call, want 0", n)
	}
}

func TestTokenMath(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"charge rounds up", tokenMicros(1, 7, true), 8571429},
		{"give-back rounds down", tokenMicros(1, 7, false), 8571428},
		{"exact", tokenMicros(400, 1000, true), 24_000_000},
		{"zero", tokenMicros(0, 1000, true), 0},
		{"capped", tokenMicros(1<<62, 1, true), maxShift},
		{"capped, no overflow", tokenMicros(1<<62, 1<<62, true), 60_000_000},
		{"debt", shiftMicros(5, 1000), 300_000},
		{"give-back", shiftMicros(-5, 1000), -300_000},
		{"smallest give-back", shiftMicros(-1<<63, 1), -maxShift},
		{"tokens left: full", tokensLeft(0, 1000), 1000},
		{"tokens left: half", tokensLeft(30_000_000, 1000), 500},
		{"tokens left: rounds down", tokensLeft(30_000_001, 1000), 499},
		{"tokens left: in debt", tokensLeft(90_000_000, 1000), 0},
		{"tokens left: huge TPM", tokensLeft(1, 1<<62), 4611685941565954263}, // ⌊(60e6−1)·2^62/60e6⌋: no overflow
		{"divUp", divUp(100, 3), 34},
		{"divUp exact", divUp(100, 4), 25},
		{"divUp max", divUp(1<<63-1, 1), 1<<63 - 1},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}

func TestPlanDividesByReplicas(t *testing.T) {
	var p plan
	p.build([]Limit{{Key: "a", RPM: 100, TPM: 1000}, {Key: "b", RPM: 1}}, 10, 3)
	if p.n != 3 {
		t.Fatalf("%d cells, want 3", p.n)
	}
	want := []cell{
		{limit: 0, rate: 34, cost: 1764706, tol: 34 * 1764706},
		{limit: 0, tokens: true, rate: 334, cost: 1796408, tol: window}, // ⌈10·60e6/334⌉
		{limit: 1, rate: 1, cost: window, tol: window},
	}
	for i, w := range want {
		if p.cells[i] != w {
			t.Errorf("cell %d = %+v, want %+v", i, p.cells[i], w)
		}
	}
}
