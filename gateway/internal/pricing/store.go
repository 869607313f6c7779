package pricing

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Store is a tenant.Store whose prices are merged over a catalog: the
// wrapped store's price of a model, with what it leaves unset from the
// catalog's entry, else the catalog's. Keys are the wrapped store's.
type Store struct {
	tenant.Store
	// Catalog fills in prices; nil: the wrapped store's prices alone.
	Catalog *Catalog
}

var _ tenant.Store = (*Store)(nil)

// Price returns the price of model in force at: the wrapped store's
// merged over the catalog's, or the catalog's when the store has none.
// An error of the store other than tenant.ErrNotFound is returned as is
// (the catalog does not stand in for an unreachable database: the cache
// serves its stale entry, or the request fails as before).
func (s *Store) Price(ctx context.Context, model string, at time.Time) (*tenant.Price, error) {
	own, err := s.Store.Price(ctx, model, at)
	if err != nil && !errors.Is(err, tenant.ErrNotFound) {
		return nil, err
	}
	base, known := s.Catalog.Lookup(model)
	switch {
	case own != nil && known:
		return Merge(own, base), nil
	case own != nil:
		return own, nil
	case known:
		p := *base
		p.Model = model // a pattern's or alias's match is priced under its own name
		return &p, nil
	}
	return nil, err
}

// Merge returns over with every field it leaves unset taken from base:
// the rates of the kinds of token and the bounds (0 is unset), and
// Reasoning (either marks the model). The input and output rates are
// over's, whatever they are (0 is a price: free). Source says both.
func Merge(over, base *tenant.Price) *tenant.Price {
	p := *over
	for _, f := range []struct{ dst, src *int64 }{
		{&p.CachedInputMicrosPerMTok, &base.CachedInputMicrosPerMTok},
		{&p.CacheWriteMicrosPerMTok, &base.CacheWriteMicrosPerMTok},
		{&p.AudioInputMicrosPerMTok, &base.AudioInputMicrosPerMTok},
		{&p.ImageInputMicrosPerMTok, &base.ImageInputMicrosPerMTok},
		{&p.ReasoningMicrosPerMTok, &base.ReasoningMicrosPerMTok},
		{&p.AudioOutputMicrosPerMTok, &base.AudioOutputMicrosPerMTok},
		{&p.ImageOutputMicrosPerMTok, &base.ImageOutputMicrosPerMTok},
		{&p.ContextWindow, &base.ContextWindow},
		{&p.MaxOutputTokens, &base.MaxOutputTokens},
		{&p.ImageTokens, &base.ImageTokens},
	} {
		if *f.dst <= 0 {
			*f.dst = *f.src
		}
	}
	p.Reasoning = over.Reasoning || base.Reasoning
	if p.Source == "" {
		p.Source = "admin"
	}
	p.Source += " over " + base.Source
	return &p
}
