package admin_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/pricing"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// storePrices reads prices as the tenant cache does: the store's over the
// catalog, now.
type storePrices struct{ s *pricing.Store }

func (p storePrices) Price(ctx context.Context, model string) (*tenant.Price, error) {
	return p.s.Price(ctx, model, time.Now())
}

// Every rate and bound goes through PUT, and GET answers the price
// requests are charged: what the admin set, the rest from the catalog.
func TestPriceKindsAndEffective(t *testing.T) {
	t.Parallel()
	e := newEnv(t, token)
	cat, err := pricing.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(admin.NewHandler(e.store, e.evict, token, slog.New(slog.NewTextHandler(io.Discard, nil)),
		admin.WithPrices(storePrices{&pricing.Store{Store: e.store, Catalog: cat}})))
	t.Cleanup(srv.Close)
	e.srv = srv
	runSteps(t, e, []step{
		{"set every kind", "PUT", "/v1/admin/prices",
			`{"model":"m-kinds","input_usd_per_mtok":"1","output_usd_per_mtok":"2","cached_input_usd_per_mtok":"0.1","cache_write_usd_per_mtok":"1.25",` +
				`"audio_input_usd_per_mtok":"3","image_input_usd_per_mtok":"4","reasoning_usd_per_mtok":"5","audio_output_usd_per_mtok":"6",` +
				`"image_output_usd_per_mtok":"7","context_window":1000,"max_output_tokens":500,"image_tokens":85,"reasoning":true,` +
				`"effective_from":"2026-01-01T00:00:00Z"}`, 200,
			`{"model":"m-kinds","input_usd_per_mtok":"1","output_usd_per_mtok":"2","cached_input_usd_per_mtok":"0.1","cache_write_usd_per_mtok":"1.25",` +
				`"audio_input_usd_per_mtok":"3","image_input_usd_per_mtok":"4","reasoning_usd_per_mtok":"5","audio_output_usd_per_mtok":"6",` +
				`"image_output_usd_per_mtok":"7","context_window":1000,"max_output_tokens":500,"image_tokens":85,"reasoning":true,` +
				`"effective_from":"2026-01-01T00:00:00Z"}`, "", []string{"price:m-kinds"}},
		{"read it back", "GET", "/v1/admin/prices/m-kinds", "", 200,
			`{"model":"m-kinds","input_usd_per_mtok":"1","output_usd_per_mtok":"2","cached_input_usd_per_mtok":"0.1","cache_write_usd_per_mtok":"1.25",` +
				`"audio_input_usd_per_mtok":"3","image_input_usd_per_mtok":"4","reasoning_usd_per_mtok":"5","audio_output_usd_per_mtok":"6",` +
				`"image_output_usd_per_mtok":"7","context_window":1000,"max_output_tokens":500,"image_tokens":85,"reasoning":true,` +
				`"effective_from":"2026-01-01T00:00:00Z","source":"admin"}`, "", nil},
		{"override a catalog model", "PUT", "/v1/admin/prices",
			`{"model":"claude-sonnet-4-5","input_usd_per_mtok":"2","output_usd_per_mtok":"10","cache_write_usd_per_mtok":"3","effective_from":"2026-01-01T00:00:00Z"}`, 200,
			`{"model":"claude-sonnet-4-5","input_usd_per_mtok":"2","output_usd_per_mtok":"10","cache_write_usd_per_mtok":"3","effective_from":"2026-01-01T00:00:00Z"}`,
			"", []string{"price:claude-sonnet-4-5"}},
		{"merged over the catalog", "GET", "/v1/admin/prices/claude-sonnet-4-5", "", 200,
			`{"model":"claude-sonnet-4-5","input_usd_per_mtok":"2","output_usd_per_mtok":"10","cached_input_usd_per_mtok":"0.3","cache_write_usd_per_mtok":"3",` +
				`"context_window":200000,"max_output_tokens":64000,"image_tokens":1600,"reasoning":true,` +
				`"effective_from":"2026-01-01T00:00:00Z","source":"admin over catalog 2026-12-01"}`, "", nil},
		{"catalog only, a Bedrock id", "GET", "/v1/admin/prices/us.anthropic.claude-haiku-4-5-20251001-v1:0", "", 200,
			`{"model":"us.anthropic.claude-haiku-4-5-20251001-v1:0","input_usd_per_mtok":"1","output_usd_per_mtok":"5","cached_input_usd_per_mtok":"0.1",` +
				`"cache_write_usd_per_mtok":"1.25","context_window":200000,"max_output_tokens":64000,"image_tokens":1600,"reasoning":true,` +
				`"effective_from":null,"source":"catalog 2026-12-01"}`, "", nil},
		{"no price", "GET", "/v1/admin/prices/my-finetune", "", 404, "not_found", "model", nil},
		{"negative bound", "PUT", "/v1/admin/prices", `{"model":"m","input_usd_per_mtok":"1","image_tokens":-1}`, 400, "invalid_value", "", nil},
		{"negative kind rate", "PUT", "/v1/admin/prices", `{"model":"m","reasoning_usd_per_mtok":"-1"}`, 400, "invalid_body", "", nil},
	})
}
