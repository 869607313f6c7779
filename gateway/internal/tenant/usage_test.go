package tenant

import "testing"

func TestPriceCost(t *testing.T) {
	p := Price{InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000,
		CachedInputMicrosPerMTok: 300_000, CacheWriteMicrosPerMTok: 3_750_000}
	tests := []struct {
		name string
		u    TokenUsage
		want int64
	}{
		{"nothing", TokenUsage{}, 0},
		{"base rates", TokenUsage{Prompt: 1_000_000, Completion: 1_000_000}, 18_000_000},
		{"cached read and write", TokenUsage{Prompt: 1_000_000, CachedInput: 500_000, CacheWrite: 500_000}, 150_000 + 1_875_000},
		{"reasoning falls back to output", TokenUsage{Completion: 1_000, Reasoning: 400}, 15_000},
		{"rounds up", TokenUsage{Prompt: 1}, 3},
		{"kinds above the total", TokenUsage{Prompt: 10, CachedInput: 1_000_000}, 300_000},
	}
	for _, tt := range tests {
		if got := p.Cost(tt.u); got != tt.want {
			t.Errorf("%s: Cost(%+v) = %d, want %d", tt.name, tt.u, got, tt.want)
		}
	}
	if got := p.InputRateMax(); got != 3_750_000 {
		t.Errorf("InputRateMax = %d, want the cache-write rate", got)
	}
	if got := p.BoundCost(1_000_000, 1_000_000); got != 3_750_000+15_000_000 {
		t.Errorf("BoundCost = %d", got)
	}
	// Any usage within a bound costs at most the bound.
	for _, u := range []TokenUsage{{Prompt: 1000, CacheWrite: 1000, Completion: 500, Reasoning: 500}, {Prompt: 1000, Completion: 500}} {
		if p.Cost(u) > p.BoundCost(u.Prompt, u.Completion) {
			t.Errorf("Cost(%+v) = %d above BoundCost %d", u, p.Cost(u), p.BoundCost(u.Prompt, u.Completion))
		}
	}
}
