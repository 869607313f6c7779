package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// PriceReader reads the price the gateway charges for a model: the tenant
// cache's, the admin price merged over the price catalog.
type PriceReader interface {
	Price(ctx context.Context, model string) (*tenant.Price, error)
}

// WithPrices serves GET /v1/admin/prices/{model}: the price in force, as
// requests are charged.
func WithPrices(r PriceReader) Option { return func(h *handler) { h.prices = r } }

// priceJSON is a price in the API: USD per million tokens. The rates of
// the kinds of token and the bounds are optional (absent or 0: unset,
// filled in from the price catalog, else the input or output rate).
type priceJSON struct {
	Model            string `json:"model"`
	InputUSDPerMTok  usd    `json:"input_usd_per_mtok"`
	OutputUSDPerMTok usd    `json:"output_usd_per_mtok"`

	CachedInputUSDPerMTok usd `json:"cached_input_usd_per_mtok,omitempty"`
	CacheWriteUSDPerMTok  usd `json:"cache_write_usd_per_mtok,omitempty"`
	AudioInputUSDPerMTok  usd `json:"audio_input_usd_per_mtok,omitempty"`
	ImageInputUSDPerMTok  usd `json:"image_input_usd_per_mtok,omitempty"`
	ReasoningUSDPerMTok   usd `json:"reasoning_usd_per_mtok,omitempty"`
	AudioOutputUSDPerMTok usd `json:"audio_output_usd_per_mtok,omitempty"`
	ImageOutputUSDPerMTok usd `json:"image_output_usd_per_mtok,omitempty"`

	ContextWindow   int64 `json:"context_window,omitempty"`
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	ImageTokens     int64 `json:"image_tokens,omitempty"`
	Reasoning       bool  `json:"reasoning,omitempty"`

	EffectiveFrom *time.Time `json:"effective_from"` // request: nil means now
	// Source says where an answered price came from ("admin", "catalog
	// 2026-12-01", "admin over catalog 2026-12-01"); ignored in requests.
	Source string `json:"source,omitempty"`
}

func (in *priceJSON) price() tenant.Price {
	return tenant.Price{Model: in.Model,
		InputMicrosPerMTok: int64(in.InputUSDPerMTok), OutputMicrosPerMTok: int64(in.OutputUSDPerMTok),
		CachedInputMicrosPerMTok: int64(in.CachedInputUSDPerMTok), CacheWriteMicrosPerMTok: int64(in.CacheWriteUSDPerMTok),
		AudioInputMicrosPerMTok: int64(in.AudioInputUSDPerMTok), ImageInputMicrosPerMTok: int64(in.ImageInputUSDPerMTok),
		ReasoningMicrosPerMTok: int64(in.ReasoningUSDPerMTok), AudioOutputMicrosPerMTok: int64(in.AudioOutputUSDPerMTok),
		ImageOutputMicrosPerMTok: int64(in.ImageOutputUSDPerMTok),
		ContextWindow:            in.ContextWindow, MaxOutputTokens: in.MaxOutputTokens, ImageTokens: in.ImageTokens,
		Reasoning: in.Reasoning, EffectiveFrom: in.EffectiveFrom.UTC()}
}

func priceOut(p *tenant.Price) priceJSON {
	from := p.EffectiveFrom
	out := priceJSON{Model: p.Model,
		InputUSDPerMTok: usd(p.InputMicrosPerMTok), OutputUSDPerMTok: usd(p.OutputMicrosPerMTok),
		CachedInputUSDPerMTok: usd(p.CachedInputMicrosPerMTok), CacheWriteUSDPerMTok: usd(p.CacheWriteMicrosPerMTok),
		AudioInputUSDPerMTok: usd(p.AudioInputMicrosPerMTok), ImageInputUSDPerMTok: usd(p.ImageInputMicrosPerMTok),
		ReasoningUSDPerMTok: usd(p.ReasoningMicrosPerMTok), AudioOutputUSDPerMTok: usd(p.AudioOutputMicrosPerMTok),
		ImageOutputUSDPerMTok: usd(p.ImageOutputMicrosPerMTok),
		ContextWindow:         p.ContextWindow, MaxOutputTokens: p.MaxOutputTokens, ImageTokens: p.ImageTokens,
		Reasoning: p.Reasoning, Source: p.Source}
	if !from.IsZero() {
		out.EffectiveFrom = &from
	}
	return out
}

func (h *handler) setPrice(w http.ResponseWriter, r *http.Request) {
	var in priceJSON
	if !h.decode(w, r, &in, false) {
		return
	}
	if in.ContextWindow < 0 || in.MaxOutputTokens < 0 || in.ImageTokens < 0 {
		h.fail(w, r, &openai.Error{Status: http.StatusBadRequest, Type: openai.TypeInvalidRequest, Code: "invalid_value",
			Message: "context_window, max_output_tokens and image_tokens must not be negative"})
		return
	}
	if in.EffectiveFrom == nil {
		// Postgres keeps microseconds; truncating makes the answer the
		// stored value.
		now := h.now().UTC().Truncate(time.Microsecond)
		in.EffectiveFrom = &now
	}
	p := in.price()
	if err := h.store.SetPrice(r.Context(), p); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictPrice(p.Model)
	in.EffectiveFrom, in.Source = &p.EffectiveFrom, ""
	h.reply(w, http.StatusOK, in)
}

// getPrice answers the price requests for model are charged now: the
// admin price merged over the catalog, or the catalog's.
func (h *handler) getPrice(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	var p *tenant.Price
	err := fmt.Errorf("prices are not readable here: %w", tenant.ErrNotFound)
	if h.prices != nil {
		p, err = h.prices.Price(r.Context(), model)
	}
	if errors.Is(err, tenant.ErrNotFound) {
		h.fail(w, r, &openai.Error{Status: http.StatusNotFound, Type: openai.TypeInvalidRequest, Code: "not_found",
			Param: "model", Message: fmt.Sprintf("model %q has no price (pricing.unpriced applies)", model)})
		return
	}
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	h.reply(w, http.StatusOK, priceOut(p))
}

// listPrices answers the admin prices in force now, by model name (source
// "admin"; the catalog's prices are not listed: GET /v1/admin/prices/{model}
// answers the merged price of one model).
func (h *handler) listPrices(w http.ResponseWriter, r *http.Request) {
	l, ok := h.parseList(w, r, "model")
	if !ok {
		return
	}
	ps, err := h.store.ListPrices(r.Context(), l.get("model"), h.now(), l.cursor, l.limit+1)
	if err != nil {
		h.storeError(w, r, err)
		return
	}
	replyPage(h, w, ps, l.limit, func(p tenant.Price) priceJSON { return priceOut(&p) }, func(p tenant.Price) string { return p.Model })
}

// deletePrice deletes every admin price of a model (scheduled ones too);
// the catalog's price, if any, applies again.
func (h *handler) deletePrice(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	if err := h.store.DeletePrice(r.Context(), model); err != nil {
		h.storeError(w, r, err)
		return
	}
	h.evict.EvictPrice(model)
	h.reply(w, http.StatusOK, deletedJSON{ID: model, Object: "price", Deleted: true})
}
