package pricing

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

func embedded(t *testing.T) *Catalog {
	t.Helper()
	c, err := Embedded()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The embedded catalog parses, and every entry is coherent: a cached read
// costs less than the input it replaces, a cache write at least as much,
// a reply's bound fits the context, and every reasoning model says how
// long its replies can be (what a hold of a reply without max_tokens
// needs).
func TestEmbeddedCatalogCoherent(t *testing.T) {
	c := embedded(t)
	if c.Version != "2026-12-01" || c.Len() < 40 {
		t.Fatalf("version %q with %d names", c.Version, c.Len())
	}
	for name, p := range c.exact {
		if p.Source != "catalog "+c.Version {
			t.Errorf("%s: source %q", name, p.Source)
		}
		if p.InputMicrosPerMTok <= 0 {
			t.Errorf("%s: no input rate", name)
		}
		if r := p.CachedInputMicrosPerMTok; r > 0 && r >= p.InputMicrosPerMTok {
			t.Errorf("%s: cached input %d is not below input %d", name, r, p.InputMicrosPerMTok)
		}
		if r := p.CacheWriteMicrosPerMTok; r > 0 && r < p.InputMicrosPerMTok {
			t.Errorf("%s: cache write %d below input %d", name, r, p.InputMicrosPerMTok)
		}
		if p.ContextWindow > 0 && p.MaxOutputTokens > p.ContextWindow {
			t.Errorf("%s: max output %d above the context window %d", name, p.MaxOutputTokens, p.ContextWindow)
		}
		if p.Reasoning && p.MaxOutputTokens <= 0 {
			t.Errorf("%s: a reasoning model without max_output_tokens", name)
		}
	}
}

func TestCatalogLookup(t *testing.T) {
	c := embedded(t)
	tests := []struct {
		model      string
		known      bool
		in, cached int64 // micros per Mtok
	}{
		{"gpt-4o", true, 2_500_000, 1_250_000},
		{"gpt-4o-2024-11-20", true, 2_500_000, 1_250_000}, // alias
		{"gpt-4o-2024-05-13", true, 5_000_000, 0},         // its own entry, not gpt-4o's
		{"gpt-4o-mini-2024-07-18", true, 150_000, 75_000},
		{"gpt-5-2025-08-07", true, 1_250_000, 125_000},           // pattern
		{"gpt-5-mini-2025-08-07", true, 250_000, 25_000},         // not gpt-5's pattern
		{"claude-sonnet-4-5-20250929", true, 3_000_000, 300_000}, // pattern
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", true, 3_000_000, 300_000},
		{"global.anthropic.claude-haiku-4-5-20251001-v1:0", true, 1_000_000, 100_000},
		{"gemini-2.5-flash-lite-preview-06-17", true, 100_000, 10_000}, // not flash's
		{"gemini-2.5-flash", true, 300_000, 30_000},
		{"amazon.nova-micro-v1:0", true, 35_000, 8_750},
		{"gpt-4o-mini-tts-nope", false, 0, 0},
		{"my-finetune", false, 0, 0},
		{"", false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			p, ok := c.Lookup(tt.model)
			if ok != tt.known {
				t.Fatalf("known %v, want %v", ok, tt.known)
			}
			if ok && (p.InputMicrosPerMTok != tt.in || p.CachedInputMicrosPerMTok != tt.cached) {
				t.Errorf("input %d cached %d; want %d, %d", p.InputMicrosPerMTok, p.CachedInputMicrosPerMTok, tt.in, tt.cached)
			}
		})
	}
	var none *Catalog
	if _, ok := none.Lookup("gpt-4o"); ok {
		t.Error("a nil catalog knows gpt-4o")
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown field", "version: 2026-12-01\nmodels:\n  - {model: a, input_usd_per_mtok: 1, colour: red}\n", "colour"},
		{"bad version", "version: soon\nmodels: []\n", "version"},
		{"negative rate", "version: 2026-12-01\nmodels:\n  - {model: a, input_usd_per_mtok: -1}\n", "input_usd_per_mtok"},
		{"too precise", "version: 2026-12-01\nmodels:\n  - {model: a, input_usd_per_mtok: 0.0000001}\n", "6 decimals"},
		{"twice", "version: 2026-12-01\nmodels:\n  - {model: a}\n  - {model: b, aliases: [a]}\n", "named twice"},
		{"bad pattern", "version: 2026-12-01\nmodels:\n  - {model: a, patterns: ['[']}\n", "pattern"},
		{"dated entry", "version: 2026-12-01\nmodels:\n  - {model: a, effective_from: 2025-01-01T00:00:00Z}\n", "effective_from"},
		{"no model", "version: 2026-12-01\nmodels:\n  - {input_usd_per_mtok: 1}\n", "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v; want an error naming %q", err, tt.want)
			}
		})
	}
}

func TestMerge(t *testing.T) {
	base := &tenant.Price{Model: "m", InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000,
		CachedInputMicrosPerMTok: 300_000, CacheWriteMicrosPerMTok: 3_750_000, ContextWindow: 200_000,
		MaxOutputTokens: 64_000, ImageTokens: 1600, Reasoning: true, Source: "catalog 2026-12-01"}
	tests := []struct {
		name string
		over tenant.Price
		want tenant.Price
	}{
		{"rates only", tenant.Price{Model: "m", InputMicrosPerMTok: 2_000_000, OutputMicrosPerMTok: 10_000_000, Source: "admin"},
			tenant.Price{Model: "m", InputMicrosPerMTok: 2_000_000, OutputMicrosPerMTok: 10_000_000,
				CachedInputMicrosPerMTok: 300_000, CacheWriteMicrosPerMTok: 3_750_000, ContextWindow: 200_000,
				MaxOutputTokens: 64_000, ImageTokens: 1600, Reasoning: true, Source: "admin over catalog 2026-12-01"}},
		{"free model keeps its zero base rates", tenant.Price{Model: "m", CachedInputMicrosPerMTok: 1, MaxOutputTokens: 10, Source: "policy"},
			tenant.Price{Model: "m", CachedInputMicrosPerMTok: 1, CacheWriteMicrosPerMTok: 3_750_000, ContextWindow: 200_000,
				MaxOutputTokens: 10, ImageTokens: 1600, Reasoning: true, Source: "policy over catalog 2026-12-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := tt.over
			got := Merge(&over, base)
			if *got != tt.want {
				t.Errorf("Merge\n got %+v\nwant %+v", *got, tt.want)
			}
			if over != tt.over {
				t.Error("Merge modified its argument")
			}
		})
	}
}

// fakeStore has prices for some models and fails for one.
type fakeStore struct {
	tenant.Store
	prices map[string]*tenant.Price
}

var errDown = errors.New("database down")

func (f fakeStore) Price(_ context.Context, model string, _ time.Time) (*tenant.Price, error) {
	if model == "down" {
		return nil, errDown
	}
	if p, ok := f.prices[model]; ok {
		return p, nil
	}
	return nil, tenant.ErrNotFound
}

func TestStorePrice(t *testing.T) {
	c := embedded(t)
	fs := fakeStore{prices: map[string]*tenant.Price{
		"gpt-4o":      {Model: "gpt-4o", InputMicrosPerMTok: 2_000_000, OutputMicrosPerMTok: 8_000_000, Source: "admin"},
		"my-finetune": {Model: "my-finetune", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 2, Source: "admin"},
	}}
	tests := []struct {
		name, model  string
		catalog      *Catalog
		err          error
		in, cached   int64
		source       string
		contextWinow int64
	}{
		{"override merged", "gpt-4o", c, nil, 2_000_000, 1_250_000, "admin over catalog 2026-12-01", 128_000},
		{"catalog only", "claude-sonnet-4-5-20250929", c, nil, 3_000_000, 300_000, "catalog 2026-12-01", 200_000},
		{"store only", "my-finetune", c, nil, 1, 0, "admin", 0},
		{"catalog off", "gpt-4o", nil, nil, 2_000_000, 0, "admin", 0},
		{"catalog off, unknown", "claude-sonnet-4-5", nil, tenant.ErrNotFound, 0, 0, "", 0},
		{"nowhere", "nope", c, tenant.ErrNotFound, 0, 0, "", 0},
		{"store down", "down", c, errDown, 0, 0, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Store{Store: fs, Catalog: tt.catalog}
			p, err := s.Price(context.Background(), tt.model, time.Now())
			if !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if p.Model != tt.model || p.InputMicrosPerMTok != tt.in || p.CachedInputMicrosPerMTok != tt.cached ||
				p.Source != tt.source || p.ContextWindow != tt.contextWinow {
				t.Errorf("price %+v", *p)
			}
		})
	}
}

// FuzzParse: whatever a catalog file holds, Parse answers an error or a
// catalog in which every name it accepted resolves to a price of that
// catalog with no negative rate or bound.
func FuzzParse(f *testing.F) {
	b, err := catalogFiles.ReadFile("catalog/2026-12-01.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("version: 2026-12-01\nmodels:\n  - {model: a, aliases: [b], patterns: ['c-*'], input_usd_per_mtok: 1}\n")
	f.Add("version: x\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse([]byte(s))
		if err != nil {
			return
		}
		for name, p := range c.exact {
			got, ok := c.Lookup(name)
			if !ok || got != p || p.Source != "catalog "+c.Version {
				t.Fatalf("%q resolves to %+v (%v)", name, got, ok)
			}
			for _, v := range []int64{p.InputMicrosPerMTok, p.OutputMicrosPerMTok, p.CachedInputMicrosPerMTok,
				p.CacheWriteMicrosPerMTok, p.ContextWindow, p.MaxOutputTokens, p.ImageTokens} {
				if v < 0 {
					t.Fatalf("%q: negative field in %+v", name, *p)
				}
			}
		}
	})
}
