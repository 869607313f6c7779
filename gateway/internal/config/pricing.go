package config

// Pricing says where model prices come from besides the tenant store's,
// and what a request for a model without any price means
// (docs/POLICY.md, "Prices").
type Pricing struct {
	// Catalog turns the built-in price catalog (the providers' list
	// prices, versioned) on or off; default on. Prices set by admins or
	// in tenants.prices override it per model either way.
	Catalog *bool `yaml:"catalog"`
	// Unpriced is what a request for a model with no price gets:
	// "free" (default: served, costs 0, counted in
	// tollgate_budget_unpriced_requests_total and logged once per model)
	// or "refuse" (400 model_not_priced, where a budget plugin holds the
	// request's cost).
	Unpriced string `yaml:"unpriced"`
}

// Unpriced policies.
const (
	UnpricedFree   = "free"
	UnpricedRefuse = "refuse"
)

// CatalogOn reports whether the price catalog is used.
func (p *Pricing) CatalogOn() bool { return p.Catalog == nil || *p.Catalog }

func (p *Policy) validatePricing(ps *Problems) {
	setDefault(&p.Pricing.Unpriced, UnpricedFree)
	if u := p.Pricing.Unpriced; u != UnpricedFree && u != UnpricedRefuse {
		ps.add("pricing.unpriced", "must be %q or %q, got %q", UnpricedFree, UnpricedRefuse, u)
	}
}
