package pg_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Every rate of a kind of token and every bound round-trips through
// model_prices; unset ones (0, false) stay unset, so the catalog can
// fill them in; replacing a price replaces them all.
func TestPriceKindsRoundTrip(t *testing.T) {
	s, _ := open(t)
	ctx := t.Context()
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full := tenant.Price{Model: "claude-x", InputMicrosPerMTok: 3_000_000, OutputMicrosPerMTok: 15_000_000, EffectiveFrom: jan,
		CachedInputMicrosPerMTok: 300_000, CacheWriteMicrosPerMTok: 3_750_000, AudioInputMicrosPerMTok: 1,
		ImageInputMicrosPerMTok: 2, ReasoningMicrosPerMTok: 3, AudioOutputMicrosPerMTok: 4, ImageOutputMicrosPerMTok: 5,
		ContextWindow: 200_000, MaxOutputTokens: 64_000, ImageTokens: 1600, Reasoning: true, Source: "admin"}
	bare := tenant.Price{Model: "claude-x", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 2, EffectiveFrom: jan, Source: "admin"}
	for _, want := range []tenant.Price{full, bare, full} {
		in := want
		in.Source = ""
		must(t, s.SetPrice(ctx, in))
		got, err := s.Price(ctx, "claude-x", jan)
		must(t, err)
		if *got != want {
			t.Fatalf("Price =\n %+v\nwant\n %+v", *got, want)
		}
	}
	neg := full
	neg.ImageTokens = -1
	if err := s.SetPrice(ctx, neg); err == nil {
		t.Error("a negative bound was stored")
	}
}
