package hostsvc

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// tieredPrices prices "tiered" with cache writes above the input rate and
// reasoning above the output rate, and a context window.
type tieredPrices struct{}

func (tieredPrices) Price(_ context.Context, model string) (*tenant.Price, error) {
	if model != "tiered" {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Price{Model: model, InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 10_000_000,
		CacheWriteMicrosPerMTok: 2_000_000, ReasoningMicrosPerMTok: 12_000_000,
		ContextWindow: 1000, MaxOutputTokens: 500, ImageTokens: 300, Reasoning: true}, nil
}

// The hold prices every token at its side's highest rate; the model's
// facts come from its price; a prompt count reported before the reply
// shrinks the hold to the count and the completion held, never above.
func TestHoldBoundAndShrink(t *testing.T) {
	tests := []struct {
		name      string
		unbounded int64
		extend    bool  // a 100-token extension before the count
		input     int64 // the count reported
		want      int64 // reserved afterwards, in micros
	}{
		// 400 prompt tokens at 2 USD/Mtok + 200 completion at 12 USD/Mtok.
		{"no count", 0, false, -1, 800 + 2_400},
		{"a lower count", 0, false, 100, 200 + 2_400},
		{"a lower count after an extension", 0, true, 100, 200 + 3_600},
		{"a count above the bound", 0, false, 900, 800 + 2_400},
		{"unbounded parts keep the hold", 1, false, 100, 800 + 2_400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := budget.NewMemory(nil, nil)
			set := NewSet(Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Prices: tieredPrices{},
				Limiter: limiter.NewMemory(nil), Budget: counter})
			var c Session
			c.Bind(set)
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Model, r.RequestID = []byte("tiered"), []byte("req-1")
			r.Tenant = &wasmhost.Tenant{ID: "acme", BudgetMicros: 1_000_000}
			r.Bound.Unbounded = tt.unbounded
			if got := c.ModelFacts(r); got != (wasmhost.ModelFacts{ContextWindow: 1000, MaxOutputTokens: 500, ImageTokens: 300, Reasoning: true, Known: true}) {
				t.Fatalf("ModelFacts = %+v", got)
			}
			if out, err := c.Call(r, "budget.reserve", []byte("400 200 60000")); err != nil || string(out) != "ok 3200 996800" {
				t.Fatalf("reserve = %q, %v", out, err)
			}
			if tt.extend {
				if out, err := c.Call(r, "budget.extend", []byte("100 60000")); err != nil || string(out[:3]) != "ok " {
					t.Fatalf("extend = %q, %v", out, err)
				}
			}
			if tt.input >= 0 {
				c.InputKnown(r, tt.input)
			}
			if len(c.meter.scopes) != 1 {
				t.Fatalf("scopes %+v, want the tenant's month", c.meter.scopes)
			}
			if _, reserved, err := counter.Status(context.Background(), "acme", c.meter.scopes[0]); err != nil || reserved != tt.want {
				t.Fatalf("reserved %d, %v; want %d", reserved, err, tt.want)
			}
		})
	}
}

// Without a price the model is unknown.
func TestModelFactsUnknown(t *testing.T) {
	set := NewSet(Config{Prices: tieredPrices{}, Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil)})
	var c Session
	r := wasmhost.AcquireRequest()
	defer wasmhost.ReleaseRequest(r)
	r.Model = []byte("other")
	if got := c.ModelFacts(r); got != (wasmhost.ModelFacts{}) {
		t.Fatalf("unbound session: %+v", got)
	}
	c.Bind(set)
	if got := c.ModelFacts(r); got != (wasmhost.ModelFacts{}) {
		t.Fatalf("unpriced model: %+v", got)
	}
}

// A settled cost above the hold (after a shrink, what is left of it) is
// charged and counted as an overrun.
func TestOverrunCounted(t *testing.T) {
	tests := []struct {
		name               string
		input              int64 // reported before the reply; -1 none
		prompt, completion int64 // settled
		overruns, micros   int64
	}{
		{"within the hold", -1, 400, 200, 0, 0},
		// 400 prompt at 1 + 250 completion at 10: 2,900 of 3,200 held
		// (the usage is priced at base rates).
		{"above its base price, within the bound", -1, 400, 250, 0, 0},
		{"above the hold", -1, 2000, 500, 1, 2000 + 5000 - 3200},
		// Shrunk to 100 prompt tokens at 2 + 200 completion at 12: 2,600.
		{"above the shrunk hold", 100, 700, 200, 1, 700 + 2000 - 2600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts := new(Counts)
			set := NewSet(Config{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Prices: tieredPrices{},
				Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil), Counts: counts})
			var c Session
			c.Bind(set)
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Model, r.RequestID = []byte("tiered"), []byte("req-1")
			r.Tenant = &wasmhost.Tenant{ID: "acme", BudgetMicros: 1_000_000}
			if out, err := c.Call(r, "budget.reserve", []byte("400 200 60000")); err != nil || string(out) != "ok 3200 996800" {
				t.Fatalf("reserve = %q, %v", out, err)
			}
			if tt.input >= 0 {
				c.InputKnown(r, tt.input)
			}
			c.Settle(r, tt.prompt, tt.completion)
			if n, m := counts.BudgetOverruns.Load(), counts.BudgetOverrunMicros.Load(); n != tt.overruns || m != tt.micros {
				t.Fatalf("overruns %d, %d µ$; want %d, %d", n, m, tt.overruns, tt.micros)
			}
			if want := tt.prompt*1 + tt.completion*10; r.CostMicros != want {
				t.Fatalf("charged %d, want %d", r.CostMicros, want)
			}
		})
	}
}
