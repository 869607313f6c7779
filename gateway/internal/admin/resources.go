package admin

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// ResourceStore is what the admin API's reads, updates and deletes need of
// the store (pg.Store; a read-only store answers its writes with
// ErrReadOnly). Lists take the last id of the previous page (after) and at
// most how many rows to return.
type ResourceStore interface {
	ListPlans(ctx context.Context, after string, limit int) ([]pg.PlanInfo, error)
	GetPlan(ctx context.Context, id string) (pg.PlanInfo, error)
	DeletePlan(ctx context.Context, id string) error

	ListTenants(ctx context.Context, f pg.TenantFilter, now time.Time, after string, limit int) ([]pg.TenantInfo, error)
	GetTenant(ctx context.Context, id string, now time.Time) (pg.TenantInfo, error)
	UpdateTenant(ctx context.Context, id string, p pg.TenantPatch) error
	DeleteTenant(ctx context.Context, id string) ([]tenant.KeyHash, error)

	ListAllKeys(ctx context.Context, f pg.KeyFilter, after string, limit int) ([]pg.KeyInfo, error)
	GetKey(ctx context.Context, id string) (pg.KeyInfo, error)
	UpdateKey(ctx context.Context, id string, p pg.KeyPatch) (pg.KeyInfo, error)
	DeleteKey(ctx context.Context, id string) (tenant.KeyHash, error)

	ListPrices(ctx context.Context, model string, at time.Time, after string, limit int) ([]tenant.Price, error)
	DeletePrice(ctx context.Context, model string) error

	UsageOver(ctx context.Context, q pg.UsageQuery) ([]pg.UsageRow, error)
	RecentCalls(ctx context.Context, since time.Time, top int) (pg.Recent, error)
	GuardActions(ctx context.Context, tenantID string, beforeAt time.Time, beforeID string, limit int) ([]pg.GuardAction, error)
}

// ErrReadOnly is the error of every write to a read-only store (the memory
// store: the policy file is the store); the API answers 501
// read_only_store.
var ErrReadOnly = errors.New("the store is read-only (store.kind: memory): edit the policy and reload")

// ErrNoCallLog is the error of call log reads from a store without one;
// the API answers 501 no_call_log.
var ErrNoCallLog = errors.New("this store keeps no call log (store.kind: memory)")

// deletedJSON answers a delete.
type deletedJSON struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}
