package pg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/tenant/storetest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/pgtest"
)

var migratedTemplate = &pgtest.Template{Name: "migrated", Prepare: pgtest.Migrate}

// The Postgres store passes the same behaviour table as the memory store.
// Plans, tenants and prices are seeded through the store's admin methods;
// keys with SQL, since the fixture fixes their plaintext (CreateKey makes
// random ones).
func TestSharedStoreTable(t *testing.T) {
	storetest.Run(t, func(t *testing.T, f storetest.Fixture) tenant.Store {
		ctx := context.Background()
		db := pgtest.SharedFrom(t, migratedTemplate)
		st, err := pg.Open(ctx, db.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		for _, p := range f.Plans {
			if err := st.CreatePlan(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		conn, err := pgx.Connect(ctx, db.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		for _, tn := range f.Tenants {
			if err := st.CreateTenant(ctx, tenant.Tenant{ID: tn.ID, Status: tn.Status, PlanID: tn.PlanID, Plugins: tn.Plugins}); err != nil {
				t.Fatal(err)
			}
			for _, k := range tn.Keys {
				h := tenant.HashKey(k.Plaintext)
				status := k.Status
				if status == "" {
					status = tenant.StatusActive
				}
				var expires, revoked any
				if !k.ExpiresAt.IsZero() {
					expires = k.ExpiresAt
				}
				if status == tenant.StatusRevoked {
					revoked = k.ExpiresAt
					if k.ExpiresAt.IsZero() {
						revoked = "2020-01-01T00:00:00Z"
					}
				}
				_, err := conn.Exec(ctx, `INSERT INTO api_keys (id, tenant_id, key_hash, prefix, status, expires_at, rpm, tpm, max_tokens, revoked_at, budget_micros, budget_window)
					VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, 0), NULLIF($8, 0), NULLIF($9, 0), $10, NULLIF($11, 0), NULLIF($12, ''))`,
					k.ID, tn.ID, h[:], k.Prefix, status, expires, k.Limits.RPM, k.Limits.TPM, k.Limits.MaxTokens, revoked,
					k.Budget.LimitMicros, k.Budget.Window)
				if err != nil {
					t.Fatalf("seeding key %s: %v", k.ID, err)
				}
			}
		}
		for _, p := range f.Prices {
			if err := st.SetPrice(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		return st
	})
}
