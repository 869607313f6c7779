package admin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// The admin API over the memory store (store.kind: memory): the policy
// file is the store, so the API reads it — plans, tenants, keys, prices —
// and answers every write 501 read_only_store (edit the policy and reload
// instead). It has no call log: usage over time and guard actions answer
// 501 no_call_log, the overview zeros with read_only true. A request
// cancel is not a store write and works.

// MemTables is what the read-only admin API reads (store/mem.Store).
type MemTables interface {
	Plans() []*tenant.Plan
	Tenants() []*tenant.Tenant
	Keys() []tenant.Key
	Prices(at time.Time) []*tenant.Price
}

// readOnlyWrites are the non-GET routes that still work on a read-only
// store: they write nothing to it.
var readOnlyWrites = map[string]bool{
	"POST " + sessionPath:                 true,
	"DELETE " + sessionPath:               true,
	"POST /v1/admin/requests/{id}/cancel": true,
}

// refuseReadOnly answers a write to a read-only store.
func (h *handler) refuseReadOnly(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, &openai.Error{Status: http.StatusNotImplemented, Type: openai.TypeInvalidRequest, Code: "read_only_store",
		Message: "The admin API cannot write with the memory store (store.kind: memory): edit the policy and reload, or use store.kind: postgres."})
}

// ReadOnlyStore is a Store over the memory store's tables: reads answer
// from them, writes fail with ErrReadOnly.
func ReadOnlyStore(m MemTables) Store { return readOnlyStore{m} }

type readOnlyStore struct{ m MemTables }

func (readOnlyStore) CreatePlan(context.Context, tenant.Plan) error     { return ErrReadOnly }
func (readOnlyStore) UpdatePlan(context.Context, tenant.Plan) error     { return ErrReadOnly }
func (readOnlyStore) CreateTenant(context.Context, tenant.Tenant) error { return ErrReadOnly }
func (readOnlyStore) SetTenantStatus(context.Context, string, string) error {
	return ErrReadOnly
}
func (readOnlyStore) CreateKey(context.Context, string, pg.KeyOptions) (string, *tenant.Key, error) {
	return "", nil, ErrReadOnly
}
func (readOnlyStore) RevokeKeyHash(context.Context, string) (tenant.KeyHash, error) {
	return tenant.KeyHash{}, ErrReadOnly
}
func (readOnlyStore) SetPrice(context.Context, tenant.Price) error { return ErrReadOnly }
func (readOnlyStore) SetTenantPlugins(context.Context, string, tenant.PluginOverrides) error {
	return ErrReadOnly
}
func (readOnlyStore) DeletePlan(context.Context, string) error { return ErrReadOnly }
func (readOnlyStore) UpdateTenant(context.Context, string, pg.TenantPatch) error {
	return ErrReadOnly
}
func (readOnlyStore) DeleteTenant(context.Context, string) ([]tenant.KeyHash, error) {
	return nil, ErrReadOnly
}
func (readOnlyStore) UpdateKey(context.Context, string, pg.KeyPatch) (pg.KeyInfo, error) {
	return pg.KeyInfo{}, ErrReadOnly
}
func (readOnlyStore) DeleteKey(context.Context, string) (tenant.KeyHash, error) {
	return tenant.KeyHash{}, ErrReadOnly
}
func (readOnlyStore) DeletePrice(context.Context, string) error { return ErrReadOnly }

func (readOnlyStore) UsageOver(context.Context, pg.UsageQuery) ([]pg.UsageRow, error) {
	return nil, ErrNoCallLog
}
func (readOnlyStore) RecentCalls(context.Context, time.Time, int) (pg.Recent, error) {
	return pg.Recent{}, ErrNoCallLog
}
func (readOnlyStore) GuardActions(context.Context, string, time.Time, string, int) ([]pg.GuardAction, error) {
	return nil, ErrNoCallLog
}

// MonthUsage is 0: the memory store keeps no ledger (the usage route adds
// the budget counter's spend).
func (readOnlyStore) MonthUsage(context.Context, string, time.Time) (int64, error) { return 0, nil }

func (s readOnlyStore) tenant(id string) (*tenant.Tenant, *tenant.Plan, error) {
	for _, t := range s.m.Tenants() {
		if t.ID == id {
			p, err := s.plan(t.PlanID)
			return t, p, err
		}
	}
	return nil, nil, fmt.Errorf("tenant %q: %w", id, tenant.ErrNotFound)
}

func (s readOnlyStore) plan(id string) (*tenant.Plan, error) {
	for _, p := range s.m.Plans() {
		if p.ID == id {
			return p, nil
		}
	}
	return nil, fmt.Errorf("plan %q: %w", id, tenant.ErrNotFound)
}

func (s readOnlyStore) TenantBudget(_ context.Context, id string) (int64, error) {
	_, p, err := s.tenant(id)
	if err != nil {
		return 0, err
	}
	return tenant.MonthlyBudget(p.Budgets), nil
}

// Budgets serves GET /v1/admin/tenants/{id}/budgets (BudgetStore).
func (s readOnlyStore) Budgets(_ context.Context, tenantID, keyID string) ([]tenant.BudgetRule, tenant.KeyBudget, error) {
	_, p, err := s.tenant(tenantID)
	if err != nil {
		return nil, tenant.KeyBudget{}, err
	}
	var kb tenant.KeyBudget
	if keyID != "" {
		k, err := s.key(keyID)
		if err != nil || k.TenantID != tenantID {
			return nil, kb, fmt.Errorf("key %q of tenant %q: %w", keyID, tenantID, tenant.ErrNotFound)
		}
		kb = k.Budget
	}
	return p.Budgets, kb, nil
}

func (s readOnlyStore) PlanPlugins(_ context.Context, id string) (tenant.PluginOverrides, error) {
	p, err := s.plan(id)
	if err != nil {
		return nil, err
	}
	return p.Plugins, nil
}

func (s readOnlyStore) TenantPlanPlugins(_ context.Context, id string) (tenant.PluginOverrides, error) {
	_, p, err := s.tenant(id)
	if err != nil {
		return nil, err
	}
	return p.Plugins, nil
}

func (s readOnlyStore) ListKeys(_ context.Context, tenantID string) ([]tenant.Key, error) {
	if _, _, err := s.tenant(tenantID); err != nil {
		return nil, err
	}
	out := []tenant.Key{}
	for _, k := range s.m.Keys() {
		if k.TenantID == tenantID {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s readOnlyStore) planInfo(p *tenant.Plan) pg.PlanInfo {
	info := pg.PlanInfo{Plan: *p}
	for _, t := range s.m.Tenants() {
		if t.PlanID == p.ID {
			info.Tenants++
		}
	}
	return info
}

// page returns up to limit items with keys after after, in key order
// (items are sorted by key).
func page[T any](items []T, key func(T) string, after string, limit int, keep func(T) bool) []T {
	out := []T{}
	for _, it := range items {
		if key(it) > after && (keep == nil || keep(it)) {
			out = append(out, it)
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

func (s readOnlyStore) ListPlans(_ context.Context, after string, limit int) ([]pg.PlanInfo, error) {
	var out []pg.PlanInfo
	for _, p := range page(s.m.Plans(), func(p *tenant.Plan) string { return p.ID }, after, limit, nil) {
		out = append(out, s.planInfo(p))
	}
	return nonNilSlice(out), nil
}

func (s readOnlyStore) GetPlan(_ context.Context, id string) (pg.PlanInfo, error) {
	p, err := s.plan(id)
	if err != nil {
		return pg.PlanInfo{}, err
	}
	return s.planInfo(p), nil
}

func (s readOnlyStore) tenantInfo(t *tenant.Tenant, now time.Time) pg.TenantInfo {
	info := pg.TenantInfo{Tenant: *t}
	for _, k := range s.m.Keys() {
		if k.TenantID == t.ID && k.Status == tenant.StatusActive && (k.ExpiresAt.IsZero() || k.ExpiresAt.After(now)) {
			info.KeysActive++
		}
	}
	return info
}

func (s readOnlyStore) ListTenants(_ context.Context, f pg.TenantFilter, now time.Time, after string, limit int) ([]pg.TenantInfo, error) {
	keep := func(t *tenant.Tenant) bool {
		return (f.PlanID == "" || t.PlanID == f.PlanID) && (f.Status == "" || t.Status == f.Status) && strings.HasPrefix(t.ID, f.IDPrefix)
	}
	var out []pg.TenantInfo
	for _, t := range page(s.m.Tenants(), func(t *tenant.Tenant) string { return t.ID }, after, limit, keep) {
		out = append(out, s.tenantInfo(t, now))
	}
	return nonNilSlice(out), nil
}

func (s readOnlyStore) GetTenant(_ context.Context, id string, now time.Time) (pg.TenantInfo, error) {
	t, _, err := s.tenant(id)
	if err != nil {
		return pg.TenantInfo{}, err
	}
	return s.tenantInfo(t, now), nil
}

func (s readOnlyStore) key(id string) (tenant.Key, error) {
	keys := s.m.Keys()
	if i := slices.IndexFunc(keys, func(k tenant.Key) bool { return k.ID == id }); i >= 0 {
		return keys[i], nil
	}
	return tenant.Key{}, fmt.Errorf("key %q: %w", id, tenant.ErrNotFound)
}

func (s readOnlyStore) ListAllKeys(_ context.Context, f pg.KeyFilter, after string, limit int) ([]pg.KeyInfo, error) {
	now := time.Now()
	switch f.Status {
	case "", tenant.StatusActive, tenant.StatusRevoked, "expired":
	default:
		return nil, fmt.Errorf("listing keys: status %q: want active, revoked or expired: %w", f.Status, pg.ErrInvalid)
	}
	keep := func(k tenant.Key) bool {
		expired := k.Status == tenant.StatusActive && !k.ExpiresAt.IsZero() && !k.ExpiresAt.After(now)
		return (f.TenantID == "" || k.TenantID == f.TenantID) &&
			(f.Status == "" || (f.Status == "expired" && expired) || (f.Status != "expired" && k.Status == f.Status))
	}
	var out []pg.KeyInfo
	for _, k := range page(s.m.Keys(), func(k tenant.Key) string { return k.ID }, after, limit, keep) {
		out = append(out, pg.KeyInfo{Key: k})
	}
	return nonNilSlice(out), nil
}

func (s readOnlyStore) GetKey(_ context.Context, id string) (pg.KeyInfo, error) {
	k, err := s.key(id)
	if err != nil {
		return pg.KeyInfo{}, err
	}
	return pg.KeyInfo{Key: k}, nil
}

func (s readOnlyStore) ListPrices(_ context.Context, model string, at time.Time, after string, limit int) ([]tenant.Price, error) {
	var out []tenant.Price
	for _, p := range page(s.m.Prices(at), func(p *tenant.Price) string { return p.Model }, after, limit,
		func(p *tenant.Price) bool { return model == "" || p.Model == model }) {
		c := *p
		c.Source = "policy"
		out = append(out, c)
	}
	return nonNilSlice(out), nil
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
