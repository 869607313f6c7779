package admin

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// nopResources accepts every write and reads one of each resource.
type nopResources struct{}

func (nopResources) ListPlans(context.Context, string, int) ([]pg.PlanInfo, error) {
	return []pg.PlanInfo{{Plan: tenant.Plan{ID: "pro"}}}, nil
}
func (nopResources) GetPlan(_ context.Context, id string) (pg.PlanInfo, error) {
	return pg.PlanInfo{Plan: tenant.Plan{ID: id}}, nil
}
func (nopResources) DeletePlan(context.Context, string) error { return nil }
func (nopResources) ListTenants(context.Context, pg.TenantFilter, time.Time, string, int) ([]pg.TenantInfo, error) {
	return []pg.TenantInfo{{Tenant: tenant.Tenant{ID: "acme", PlanID: "pro", Status: "active"}}}, nil
}
func (nopResources) GetTenant(_ context.Context, id string, _ time.Time) (pg.TenantInfo, error) {
	return pg.TenantInfo{Tenant: tenant.Tenant{ID: id, PlanID: "pro", Status: "active"}}, nil
}
func (nopResources) UpdateTenant(context.Context, string, pg.TenantPatch) error { return nil }
func (nopResources) DeleteTenant(context.Context, string) ([]tenant.KeyHash, error) {
	return nil, nil
}
func (nopResources) ListAllKeys(context.Context, pg.KeyFilter, string, int) ([]pg.KeyInfo, error) {
	return nil, nil
}
func (nopResources) GetKey(_ context.Context, id string) (pg.KeyInfo, error) {
	return pg.KeyInfo{Key: tenant.Key{ID: id, TenantID: "acme", Status: "active"}}, nil
}
func (nopResources) UpdateKey(_ context.Context, id string, _ pg.KeyPatch) (pg.KeyInfo, error) {
	return pg.KeyInfo{Key: tenant.Key{ID: id, TenantID: "acme", Status: "active"}}, nil
}
func (nopResources) DeleteKey(context.Context, string) (tenant.KeyHash, error) {
	return tenant.KeyHash{}, nil
}
func (nopResources) ListPrices(context.Context, string, time.Time, string, int) ([]tenant.Price, error) {
	return nil, nil
}
func (nopResources) DeletePrice(context.Context, string) error { return nil }
func (nopResources) UsageOver(context.Context, pg.UsageQuery) ([]pg.UsageRow, error) {
	return nil, nil
}
func (nopResources) RecentCalls(context.Context, time.Time, int) (pg.Recent, error) {
	return pg.Recent{}, nil
}
func (nopResources) GuardActions(context.Context, string, time.Time, string, int) ([]pg.GuardAction, error) {
	return nil, nil
}
