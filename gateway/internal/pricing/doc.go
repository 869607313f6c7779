// Package pricing owns what a model costs when no one has said: the price
// catalog, a versioned data file of the providers' list prices and each
// model's bounds (catalog/<version>.yaml, embedded in the binary), and the
// merging of the prices admins set (Postgres model_prices through the
// admin API, or the policy's tenants.prices) over it.
//
// Resolution, per model: an admin price in force wins, and every field it
// leaves unset (a rate of a kind of token, a bound: 0) comes from the
// catalog's entry for the model; a model without an admin price has the
// catalog's; a model in neither has no price (tenant.ErrNotFound), and
// the policy's pricing.unpriced decides what that means (docs/POLICY.md,
// "Prices"). Store wraps a tenant.Store with this, so the tenant cache in
// front of it holds merged prices and a warm request reads no catalog.
package pricing
