// Package mem is the tenant store of the embedded default: plans, tenants,
// keys and prices declared in the policy's tenants section (tenantspec),
// validated once and then read without locks. A policy reload builds a new
// Store.
package mem

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

// Store is a tenant.Store over a validated tenantspec.Config. It is immutable.
type Store struct {
	keys    map[tenant.KeyHash]*tenant.Snapshot
	prices  map[string][]*tenant.Price // by EffectiveFrom, ascending
	plans   map[string]*tenant.Plan
	tenants map[string]*tenant.Tenant
}

var _ tenant.Store = (*Store)(nil)

// New validates cfg and builds a Store (see tenantspec.Build: lookupEnv
// resolves key_env, nil meaning os.LookupEnv; the error joins one
// *tenantspec.ConfigError per problem). cfg may be reused.
func New(cfg tenantspec.Config, lookupEnv func(string) (string, bool)) (*Store, error) {
	t, err := tenantspec.Build(cfg, lookupEnv)
	if err != nil {
		return nil, err
	}
	return &Store{keys: t.Keys, prices: t.Prices, plans: t.Plans, tenants: t.Tenants}, nil
}

// KeyByHash returns the snapshot of the key with hash h, or
// tenant.ErrNotFound. Revoked and expired keys are returned (see
// Snapshot.Usable).
func (s *Store) KeyByHash(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	snap, ok := s.keys[h]
	if !ok {
		return nil, tenant.ErrNotFound
	}
	c := *snap // shares the plan's AllowedModels, which is never modified
	c.LoadedAt = time.Now()
	return &c, nil
}

// Price returns the price of model in force at, or tenant.ErrNotFound.
// The result is shared: do not modify it.
func (s *Store) Price(ctx context.Context, model string, at time.Time) (*tenant.Price, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ps := s.prices[model]
	// The first price starting after at; the one before it is in force.
	i := sort.Search(len(ps), func(i int) bool { return ps[i].EffectiveFrom.After(at) })
	if i == 0 {
		return nil, tenant.ErrNotFound
	}
	return ps[i-1], nil
}

// Plans returns every plan, by id. The plans are shared: do not modify
// them.
func (s *Store) Plans() []*tenant.Plan {
	out := make([]*tenant.Plan, 0, len(s.plans))
	for _, p := range s.plans {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *tenant.Plan) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Tenants returns every tenant, by id (shared: do not modify them).
func (s *Store) Tenants() []*tenant.Tenant {
	out := make([]*tenant.Tenant, 0, len(s.tenants))
	for _, t := range s.tenants {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *tenant.Tenant) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Keys returns every key's record, by id.
func (s *Store) Keys() []tenant.Key {
	out := make([]tenant.Key, 0, len(s.keys))
	for _, snap := range s.keys {
		out = append(out, snap.Key)
	}
	slices.SortFunc(out, func(a, b tenant.Key) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Prices returns the price of each model in force at, by model (shared:
// do not modify them).
func (s *Store) Prices(at time.Time) []*tenant.Price {
	var out []*tenant.Price
	for model := range s.prices {
		if p, err := s.Price(context.Background(), model, at); err == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *tenant.Price) int { return strings.Compare(a.Model, b.Model) })
	return out
}
