package calllog

import (
	"reflect"
	"testing"
	"time"
)

func TestScopeSpend(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	now := time.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := MonthStart(now)
	earlier := month // the month's first instant: today only on the 1st
	if day.Equal(month) {
		earlier = day.Add(-time.Microsecond) // the month before; ensure its partition
	}
	if _, err := pool.Exec(ctx, `SELECT tollgate_ensure_call_log_partition($1)`, earlier); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, key_id, end_user, model, status, started_at, cost_micros) VALUES
		('a', 'acme', 'k1', 'u1', 'm', 200, $1, 10),
		('b', 'acme', 'k1', NULL, 'm', 200, $1, 20),
		('c', 'acme', 'k2', 'u1', 'm', 200, $1, 40),
		('d', 'acme', 'k1', 'u1', 'm', 200, $2, 100),
		('e', 'globex', 'k1', 'u1', 'm', 200, $1, 1000)`, day.Add(time.Second), earlier); err != nil {
		t.Fatal(err)
	}
	sameMonth := !day.Equal(month)
	monthly := func(today, before int64) int64 {
		if sameMonth {
			return today + before
		}
		return today
	}
	tests := []struct {
		kind, id string
		from, to time.Time
		want     int64
	}{
		{ScopeTenant, "", day, day.AddDate(0, 0, 1), 70},
		{ScopeKey, "k1", day, day.AddDate(0, 0, 1), 30},
		{ScopeKey, "k1", month, month.AddDate(0, 1, 0), monthly(30, 100)},
		{ScopeKey, "k2", day, day.AddDate(0, 0, 1), 40},
		{ScopeUser, "u1", day, day.AddDate(0, 0, 1), 50},
		{ScopeUser, "u1", month, month.AddDate(0, 1, 0), monthly(50, 100)},
		{ScopeUser, "nobody", day, day.AddDate(0, 0, 1), 0},
		{ScopeKey, "k1", day.AddDate(0, 0, 1), day.AddDate(0, 0, 2), 0},
	}
	for _, tt := range tests {
		got, err := ScopeSpend(ctx, pool, "acme", tt.kind, tt.id, tt.from, tt.to)
		if err != nil || got != tt.want {
			t.Errorf("ScopeSpend(acme, %s %q, %s) = %d, %v; want %d", tt.kind, tt.id, tt.from.Format(time.RFC3339), got, err, tt.want)
		}
	}
	if _, err := ScopeSpend(ctx, pool, "acme", "team", "x", day, day); err == nil {
		t.Error("ScopeSpend accepted an unknown kind")
	}
}

func TestActiveScopes(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	ctx := t.Context()
	now := time.Now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := MonthStart(now)
	for _, q := range []string{
		`INSERT INTO plans (id, budgets) VALUES ('team', '[{"scope":"key","window":"day","limit_micros":5},
			{"scope":"user","window":"month","limit_micros":9},{"scope":"tenant","window":"day","limit_micros":7}]')`,
		`UPDATE tenants SET plan_id = 'team' WHERE id IN ('acme', 'globex')`,
		`INSERT INTO api_keys (id, tenant_id, key_hash, prefix) VALUES
			('k1', 'acme', sha256('1'), 'p'), ('k2', 'acme', sha256('2'), 'p'), ('k3', 'initech', sha256('3'), 'p')`,
		// k2's own budget is per month: the plan's daily key budget is not its.
		`UPDATE api_keys SET budget_micros = 3, budget_window = 'month' WHERE id = 'k2'`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, key_id, end_user, model, status, started_at, cost_micros) VALUES
		('a', 'acme', 'k1', 'u1', 'm', 200, $1, 10),
		('b', 'acme', 'k1', NULL, 'm', 200, $1, 20),
		('c', 'acme', 'k2', 'u1', 'm', 200, $1, 40),
		('d', 'initech', 'k3', 'u1', 'm', 200, $1, 1000)`, day.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := ActiveScopes(ctx, pool, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []ScopeSum{
		{Tenant: "acme", Kind: ScopeTenant, Window: "day", From: day, Spent: 70},
		{Tenant: "acme", Kind: ScopeKey, ID: "k1", Window: "day", From: day, Spent: 30},
		{Tenant: "acme", Kind: ScopeKey, ID: "k2", Window: "month", From: month, Spent: 40},
		{Tenant: "acme", Kind: ScopeUser, ID: "u1", Window: "month", From: month, Spent: 50},
	}
	for i := range got {
		got[i].From = got[i].From.UTC()
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ActiveScopes =\n %+v\nwant\n %+v", got, want)
	}
}
