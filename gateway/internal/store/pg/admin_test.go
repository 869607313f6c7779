package pg_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// TestAdminErrors: each failing write wraps the error the admin API maps to
// a status code, and changes nothing.
func TestAdminErrors(t *testing.T) {
	s, _ := open(t)
	seed(t, s)
	ctx := t.Context()
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate plan", s.CreatePlan(ctx, tenant.Plan{ID: "pro"}), pg.ErrExists},
		{"empty plan id", s.CreatePlan(ctx, tenant.Plan{}), pg.ErrInvalid},
		{"long plan id", s.CreatePlan(ctx, tenant.Plan{ID: strings.Repeat("p", 201)}), pg.ErrInvalid},
		{"negative limit", s.CreatePlan(ctx, tenant.Plan{ID: "neg", Limits: tenant.Limits{RPM: -1}}), pg.ErrInvalid},
		{"update unknown plan", s.UpdatePlan(ctx, tenant.Plan{ID: "nope"}), tenant.ErrNotFound},
		{"duplicate tenant", s.CreateTenant(ctx, tenant.Tenant{ID: "acme", PlanID: "free"}), pg.ErrExists},
		{"tenant on unknown plan", s.CreateTenant(ctx, tenant.Tenant{ID: "new", PlanID: "nope"}), tenant.ErrNotFound},
		{"tenant with bad status", s.CreateTenant(ctx, tenant.Tenant{ID: "new", PlanID: "free", Status: "gone"}), pg.ErrInvalid},
		{"status of unknown tenant", s.SetTenantStatus(ctx, "nope", tenant.StatusSuspended), tenant.ErrNotFound},
		{"bad status", s.SetTenantStatus(ctx, "acme", "revoked"), pg.ErrInvalid},
		{"revoke unknown key", s.RevokeKey(ctx, "key_nope"), tenant.ErrNotFound},
		{"negative price", s.SetPrice(ctx, tenant.Price{Model: "m", InputMicrosPerMTok: -1, EffectiveFrom: time.Now()}), pg.ErrInvalid},
		{"price without time", s.SetPrice(ctx, tenant.Price{Model: "m"}), pg.ErrInvalid},
	}
	for _, tt := range tests {
		if !errors.Is(tt.err, tt.want) {
			t.Errorf("%s: error %v, want one wrapping %v", tt.name, tt.err, tt.want)
		}
	}
	_, _, err := s.CreateKey(ctx, "nope", pg.KeyOptions{})
	if !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("key of unknown tenant: %v, want ErrNotFound", err)
	}
	_, _, err = s.CreateKey(ctx, "acme", pg.KeyOptions{Limits: tenant.Limits{TPM: -5}})
	if !errors.Is(err, pg.ErrInvalid) {
		t.Errorf("key with negative limit: %v, want ErrInvalid", err)
	}
	if _, err := s.ListKeys(ctx, "nope"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("ListKeys of unknown tenant: %v, want ErrNotFound", err)
	}
	// Nothing of the failed writes landed.
	if keys, err := s.ListKeys(ctx, "acme"); err != nil || len(keys) != 3 {
		t.Errorf("acme has %d keys (%v), want the 3 of the fixture", len(keys), err)
	}
}

func TestListKeysAndRevoke(t *testing.T) {
	s, _ := open(t)
	f := seed(t, s)
	ctx := t.Context()
	must(t, s.CreateTenant(ctx, tenant.Tenant{ID: "empty", PlanID: "free"}))
	keys, err := s.ListKeys(ctx, "empty")
	if err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("ListKeys of a tenant without keys = %#v, %v; want an empty slice", keys, err)
	}

	keys, err = s.ListKeys(ctx, "acme")
	must(t, err)
	var statuses []string
	for _, k := range keys {
		statuses = append(statuses, k.Status)
		if k.TenantID != "acme" || !strings.HasPrefix(k.Prefix, "tg_") || k.Hash == (tenant.KeyHash{}) {
			t.Errorf("listed key %+v", k)
		}
	}
	if got := strings.Join(statuses, ","); got != "active,revoked,active" {
		t.Fatalf("statuses oldest first = %s, want active,revoked,active", got)
	}
	if keys[0].ID != f.activeKey.ID || keys[0].Limits.RPM != 60 || !keys[0].ExpiresAt.Equal(f.activeKey.ExpiresAt) {
		t.Errorf("first key %+v, created %+v", keys[0], *f.activeKey)
	}

	// Revoking twice succeeds and the key stays revoked.
	must(t, s.RevokeKey(ctx, keys[0].ID))
	must(t, s.RevokeKey(ctx, keys[0].ID))
	snap, err := s.KeyByHash(ctx, tenant.HashKey(f.active))
	must(t, err)
	if snap.Key.Status != tenant.StatusRevoked || snap.Usable(time.Now()) {
		t.Fatalf("revoked key: status %q, usable %v", snap.Key.Status, snap.Usable(time.Now()))
	}

	must(t, s.SetTenantStatus(ctx, "shady", tenant.StatusActive))
	snap, err = s.KeyByHash(ctx, tenant.HashKey(f.suspended))
	must(t, err)
	if !snap.Usable(time.Now()) {
		t.Fatalf("key of a reactivated tenant not usable: %+v", snap)
	}
}

func TestMonthUsage(t *testing.T) {
	s, dsn := open(t)
	seed(t, s)
	conn := connect(t, dsn)
	_, err := conn.Exec(t.Context(), `INSERT INTO spend_month (tenant_id, month, cost_micros)
VALUES ('acme', '2026-02-01', 1234), ('acme', '2026-03-01', 99), ('shady', '2026-02-01', 7)`)
	must(t, err)
	tests := []struct {
		tenant string
		at     time.Time
		want   int64
	}{
		{"acme", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), 1234},
		{"acme", time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC), 1234},
		// 1 March 01:00 in UTC+3 is still February in UTC.
		{"acme", time.Date(2026, 3, 1, 1, 0, 0, 0, time.FixedZone("UTC+3", 3*3600)), 1234},
		{"acme", time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), 99},
		{"acme", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), 0},
		{"shady", time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC), 7},
		{"nobody", time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC), 0},
	}
	for _, tt := range tests {
		got, err := s.MonthUsage(t.Context(), tt.tenant, tt.at)
		if err != nil || got != tt.want {
			t.Errorf("MonthUsage(%s, %v) = %d, %v; want %d", tt.tenant, tt.at, got, err, tt.want)
		}
	}
}

// TestCallLogPartitions: a row inserts only into a month with a partition,
// and EnsureCallLogPartition (idempotent) makes one, bounded by UTC months.
func TestCallLogPartitions(t *testing.T) {
	s, dsn := open(t)
	conn := connect(t, dsn)
	insert := func(id string, at time.Time) error {
		_, err := conn.Exec(t.Context(), `INSERT INTO call_log (request_id, tenant_id, model, status, started_at)
VALUES ($1, 'acme', 'gpt-4o', 200, $2)`, id, at)
		return err
	}
	must(t, insert("now", time.Now()))
	far := time.Date(2031, 7, 31, 23, 30, 0, 0, time.UTC)
	if err := insert("far", far); err == nil {
		t.Fatal("insert into a month without a partition succeeded")
	}
	// Twice, and from a day in another time zone that is July in UTC.
	must(t, s.EnsureCallLogPartition(t.Context(), far))
	must(t, s.EnsureCallLogPartition(t.Context(), time.Date(2031, 8, 1, 1, 0, 0, 0, time.FixedZone("UTC+2", 2*3600))))
	must(t, insert("far", far))
	if err := insert("next", far.Add(time.Hour)); err == nil { // 1 August 00:30 UTC
		t.Fatal("insert into August went into July's partition")
	}
	var part string
	must(t, conn.QueryRow(t.Context(), `SELECT tableoid::regclass::text FROM call_log WHERE request_id = 'far'`).Scan(&part))
	if part != "call_log_2031_07" {
		t.Fatalf("row in partition %s, want call_log_2031_07", part)
	}
}

// TestAuditedWrite: a write leaves one audit row with its actor and the row
// before and after, in the write's transaction; a failed write leaves none.
// (The fixture's writes, made without an actor, are "unknown"'s.)
func TestAuditedWrite(t *testing.T) {
	s, dsn := open(t)
	seed(t, s)
	ctx := pg.WithActor(t.Context(), "tok_test")
	if err := s.UpdatePlan(ctx, tenant.Plan{ID: "pro", Limits: tenant.Limits{RPM: 77}}); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdatePlan(ctx, tenant.Plan{ID: "nope"}); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("update of an unknown plan: %v", err)
	}
	conn := connect(t, dsn)
	var rows []string
	r, err := conn.Query(t.Context(), `SELECT actor || ' ' || action || ' ' || resource || ' ' || resource_id || ' ' ||
       coalesce(before->>'rpm', '-') || ' ' || coalesce(after->>'rpm', '-') FROM admin_audit WHERE actor <> 'unknown' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var row string
		must(t, r.Scan(&row))
		rows = append(rows, row)
	}
	must(t, r.Err())
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "tok_test plan.update plan pro ") || !strings.HasSuffix(rows[0], " 77") ||
		strings.HasSuffix(rows[0], " 77 77") {
		t.Fatalf("audit rows %q, want one: tok_test plan.update plan pro <old rpm> 77", rows)
	}
}
