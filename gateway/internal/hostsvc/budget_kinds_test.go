package hostsvc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// kindPrices prices every kind of token apart.
type kindPrices struct{}

func (kindPrices) Price(_ context.Context, model string) (*tenant.Price, error) {
	if model != "kinds" {
		return nil, tenant.ErrNotFound
	}
	return &tenant.Price{Model: model, InputMicrosPerMTok: 2_000_000, OutputMicrosPerMTok: 8_000_000,
		CachedInputMicrosPerMTok: 500_000, CacheWriteMicrosPerMTok: 2_500_000,
		AudioInputMicrosPerMTok: 40_000_000, ImageInputMicrosPerMTok: 4_000_000,
		ReasoningMicrosPerMTok: 10_000_000, AudioOutputMicrosPerMTok: 80_000_000, ImageOutputMicrosPerMTok: 32_000_000}, nil
}

// Settle charges every kind of token the upstream reported at its own
// rate, and the rest of the prompt and completion at the base rates;
// the ledger's pricing (UsageCost) agrees.
func TestSettlePricesTokenKinds(t *testing.T) {
	set := NewSet(Config{
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Prices: kindPrices{}, Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil),
	})
	tests := []struct {
		name               string
		prompt, completion int64
		kinds              wasmhost.TokenKinds
		want               int64
	}{
		{"base only", 1000, 1000, wasmhost.TokenKinds{}, 2_000 + 8_000},
		{"cached read", 10_000, 100, wasmhost.TokenKinds{CachedInput: 8_000}, 2_000*2 + 8_000/2 + 800},
		{"cache write", 10_000, 0, wasmhost.TokenKinds{CacheWrite: 10_000}, 25_000},
		{"reasoning", 0, 3_000, wasmhost.TokenKinds{Reasoning: 2_000}, 8_000 + 20_000},
		{"audio and images", 2_000, 2_000, wasmhost.TokenKinds{AudioInput: 1_000, ImageInput: 1_000, AudioOutput: 1_000, ImageOutput: 1_000},
			40_000 + 4_000 + 80_000 + 32_000},
		// Kinds above their side's total (a malformed report) are charged
		// as reported, never less.
		{"kinds above the total", 10, 0, wasmhost.TokenKinds{CachedInput: 1_000_000}, 500_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Session
			c.Bind(set)
			defer c.Reset()
			r := wasmhost.AcquireRequest()
			defer wasmhost.ReleaseRequest(r)
			r.Model, r.RequestID = []byte("kinds"), []byte("req-"+tt.name)
			r.Tenant = &wasmhost.Tenant{ID: "acme", BudgetMicros: 100_000_000} // the hold is at the highest rates: 12 USD
			if out, err := c.Call(r, "budget.reserve", []byte("100000 100000 60000")); err != nil || string(out[:3]) != "ok " {
				t.Fatalf("reserve = %q, %v", out, err)
			}
			r.TokenKindsUsed = tt.kinds
			c.Settle(r, tt.prompt, tt.completion)
			if !r.CostSettled || r.CostMicros != tt.want {
				t.Errorf("settled %d micros (settled %v); want %d", r.CostMicros, r.CostSettled, tt.want)
			}
			if got, ok := set.UsageCost(r, TokenUsage(tt.prompt, tt.completion, tt.kinds)); !ok || got != tt.want {
				t.Errorf("UsageCost = %d, %v; want %d", got, ok, tt.want)
			}
		})
	}
}

// pricing.unpriced: under refuse a model without a price is answered
// "noprice refuse" whatever the tenant's budget; under free the answers
// are as before. A request found unpriced is marked (for the metric) and
// the model logged once, however often it is asked for.
func TestUnpricedPolicy(t *testing.T) {
	tests := []struct {
		name   string
		refuse bool
		model  string
		budget int64
		want   string
	}{
		{"free, budget", false, "nope", 1_000_000, "noprice"},
		{"free, unlimited", false, "nope", 0, "unlimited"},
		{"refuse, budget", true, "nope", 1_000_000, "noprice refuse"},
		{"refuse, unlimited", true, "nope", 0, "noprice refuse"},
		{"refuse, priced", true, "kinds", 0, "unlimited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			set := NewSet(Config{Log: slog.New(slog.NewTextHandler(&logs, nil)), Prices: kindPrices{},
				Limiter: limiter.NewMemory(nil), Budget: budget.NewMemory(nil, nil), RefuseUnpriced: tt.refuse})
			for range 3 {
				var c Session
				c.Bind(set)
				r := wasmhost.AcquireRequest()
				r.Model, r.RequestID = []byte(tt.model), []byte("req")
				r.Tenant = &wasmhost.Tenant{ID: "acme", BudgetMicros: tt.budget}
				out, err := c.Call(r, "budget.reserve", []byte("10 10 60000"))
				if err != nil || string(out) != tt.want {
					t.Fatalf("reserve = %q, %v; want %q", out, err, tt.want)
				}
				if r.Unpriced != (tt.model == "nope" && (tt.refuse || tt.budget > 0)) {
					t.Errorf("Unpriced = %v", r.Unpriced)
				}
				wasmhost.ReleaseRequest(r)
				c.Reset()
			}
			n := strings.Count(logs.String(), "model has no price")
			// Only a request that was priced finds it has no price: an
			// unlimited tenant's, under free, is not priced at all.
			if want := map[bool]int{true: 1, false: 0}[tt.model == "nope" && (tt.refuse || tt.budget > 0)]; n != want {
				t.Errorf("logged %d times, want %d:\n%s", n, want, logs.String())
			}
		})
	}
}
