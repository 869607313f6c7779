package pg_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// auditActions returns the actions recorded for a resource, oldest first.
func auditActions(t *testing.T, dsn, resource, id string) []string {
	t.Helper()
	rows, err := connect(t, dsn).Query(t.Context(),
		`SELECT action || ':' || (before IS NOT NULL)::text || ':' || (after IS NOT NULL)::text
		 FROM admin_audit WHERE resource = $1 AND resource_id = $2 ORDER BY id`, resource, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		must(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

func TestListAndGetPlans(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	seed(t, s)
	ctx := t.Context()
	for i := range 3 {
		must(t, s.CreatePlan(ctx, tenant.Plan{ID: fmt.Sprintf("p%d", i)}))
	}
	var ids []string
	after := ""
	for {
		page, err := s.ListPlans(ctx, after, 2)
		must(t, err)
		for _, p := range page {
			ids = append(ids, p.ID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if want := []string{"free", "p0", "p1", "p2", "pro"}; !slices.Equal(ids, want) {
		t.Fatalf("plans %v, want %v", ids, want)
	}
	p, err := s.GetPlan(ctx, "pro")
	must(t, err)
	if p.Tenants != 1 || p.MonthlyBudgetMicros != 50_000_000 || p.RPM != 600 || !slices.Equal(p.AllowedModels, []string{"gpt-4o*", "llama-3-8b"}) {
		t.Errorf("GetPlan(pro) = %+v", p)
	}
	if _, err := s.GetPlan(ctx, "nope"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("GetPlan(nope): %v, want ErrNotFound", err)
	}
}

func TestDeletePlan(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	seed(t, s)
	ctx := t.Context()
	if err := s.DeletePlan(ctx, "pro"); !errors.Is(err, pg.ErrInUse) {
		t.Fatalf("deleting a plan with tenants: %v, want ErrInUse", err)
	}
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "spare"}))
	ch := listen(t, s)
	expect(t, ch, 10*time.Second, "all")
	must(t, s.DeletePlan(ctx, "spare"))
	expect(t, ch, 10*time.Second, "plan:spare")
	if err := s.DeletePlan(ctx, "spare"); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("deleting a deleted plan: %v, want ErrNotFound", err)
	}
	if got, want := auditActions(t, dsn, "plan", "spare"), []string{"plan.create:false:true", "plan.delete:true:false"}; !slices.Equal(got, want) {
		t.Errorf("audit %v, want %v (the create and the delete; the refused and the missing delete leave none)", got, want)
	}
}

// TestDeletePlanRacesTenantCreate: a plan delete and a tenant's creation on
// that plan, at once, never leave a tenant on a deleted plan: either the
// delete is refused (ErrInUse) or the creation (ErrNotFound).
func TestDeletePlanRacesTenantCreate(t *testing.T) {
	t.Parallel()
	s, _ := open(t)
	ctx := t.Context()
	var deleted, inUse int
	defer func() { t.Logf("plan deleted first %d times, tenant created first %d times", deleted, inUse) }()
	for i := range 20 {
		plan := fmt.Sprintf("race%d", i)
		must(t, s.CreatePlan(ctx, tenant.Plan{ID: plan}))
		var wg sync.WaitGroup
		var delErr, createErr error
		wg.Go(func() { delErr = s.DeletePlan(ctx, plan) })
		wg.Go(func() { createErr = s.CreateTenant(ctx, tenant.Tenant{ID: "t" + plan, PlanID: plan}) })
		wg.Wait()
		switch {
		case delErr == nil && errors.Is(createErr, tenant.ErrNotFound):
			deleted++
		case errors.Is(delErr, pg.ErrInUse) && createErr == nil:
			inUse++
		default:
			t.Fatalf("round %d: delete %v, create %v: want exactly one to win", i, delErr, createErr)
		}
	}
}

func TestTenantsListUpdateDelete(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	f := seed(t, s)
	ctx := t.Context()
	now := time.Now()
	ts, err := s.ListTenants(ctx, pg.TenantFilter{}, now, "", 10)
	must(t, err)
	if len(ts) != 2 || ts[0].ID != "acme" || ts[0].KeysActive != 1 || ts[1].ID != "shady" || ts[1].KeysActive != 1 {
		t.Fatalf("tenants %+v: want acme (1 active key: one revoked, one expired) and shady", ts)
	}
	for _, tc := range []struct {
		f    pg.TenantFilter
		want []string
	}{
		{pg.TenantFilter{PlanID: "free"}, []string{"shady"}},
		{pg.TenantFilter{Status: "active"}, []string{"acme"}},
		{pg.TenantFilter{IDPrefix: "ac"}, []string{"acme"}},
		{pg.TenantFilter{IDPrefix: "x"}, nil},
	} {
		ts, err := s.ListTenants(ctx, tc.f, now, "", 10)
		must(t, err)
		var ids []string
		for _, x := range ts {
			ids = append(ids, x.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("ListTenants(%+v) = %v, want %v", tc.f, ids, tc.want)
		}
	}
	free, suspended := "free", tenant.StatusSuspended
	must(t, s.UpdateTenant(ctx, "acme", pg.TenantPatch{PlanID: &free, Status: &suspended}))
	got, err := s.GetTenant(ctx, "acme", now)
	must(t, err)
	if got.PlanID != "free" || got.Status != suspended {
		t.Errorf("after the patch: %+v", got)
	}
	nope := "nope"
	if err := s.UpdateTenant(ctx, "acme", pg.TenantPatch{PlanID: &nope}); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("patch to an unknown plan: %v, want ErrNotFound", err)
	}
	if err := s.UpdateTenant(ctx, "nope", pg.TenantPatch{Status: &suspended}); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("patch of an unknown tenant: %v, want ErrNotFound", err)
	}

	conn := connect(t, dsn)
	_, err = conn.Exec(ctx, `INSERT INTO spend_month (tenant_id, month, cost_micros) VALUES ('acme', $1, 5)`, pg.MonthStart(now))
	must(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at) VALUES ('r1', 'acme', 'm', 200, now())`)
	must(t, err)
	ch := listen(t, s)
	expect(t, ch, 10*time.Second, "all")
	hashes, err := s.DeleteTenant(ctx, "acme")
	must(t, err)
	if len(hashes) != 3 || hashes[0] == (tenant.KeyHash{}) {
		t.Fatalf("DeleteTenant returned %d hashes, want acme's 3", len(hashes))
	}
	seen := map[string]bool{}
	for range 4 {
		seen[next(t, ch, 10*time.Second).payload] = true
	}
	if !seen["tenant:acme"] || !seen[keyPayload(f.activeKey.Hash)] {
		t.Errorf("notifications %v: want tenant:acme and the keys'", seen)
	}
	if _, err := s.KeyByHash(ctx, tenant.HashKey(f.active)); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("the deleted tenant's key: %v, want ErrNotFound", err)
	}
	var calls int
	must(t, conn.QueryRow(ctx, `SELECT count(*) FROM call_log WHERE tenant_id = 'acme'`).Scan(&calls))
	if calls != 1 {
		t.Errorf("call log rows of the deleted tenant: %d, want 1 (it stays)", calls)
	}
	if got, want := auditActions(t, dsn, "tenant", "acme"), []string{"tenant.create:false:true", "tenant.update:true:true", "tenant.delete:true:false"}; !slices.Equal(got, want) {
		t.Errorf("tenant audit %v, want %v", got, want)
	}
	if got, want := auditActions(t, dsn, "key", f.activeKey.ID), []string{"key.create:false:true", "key.delete:true:false"}; !slices.Equal(got, want) {
		t.Errorf("key audit %v, want %v", got, want)
	}
	if _, err := s.DeleteTenant(ctx, "acme"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
}

func TestKeysListUpdateDelete(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	f := seed(t, s)
	ctx := t.Context()
	count := func(kf pg.KeyFilter) int {
		ks, err := s.ListAllKeys(ctx, kf, "", 100)
		must(t, err)
		return len(ks)
	}
	for _, tc := range []struct {
		f    pg.KeyFilter
		want int
	}{
		{pg.KeyFilter{}, 4}, {pg.KeyFilter{TenantID: "acme"}, 3}, {pg.KeyFilter{Status: "revoked"}, 1},
		{pg.KeyFilter{Status: "expired"}, 1}, {pg.KeyFilter{TenantID: "shady", Status: "active"}, 1},
	} {
		if got := count(tc.f); got != tc.want {
			t.Errorf("ListAllKeys(%+v): %d keys, want %d", tc.f, got, tc.want)
		}
	}
	if _, err := s.ListAllKeys(ctx, pg.KeyFilter{Status: "gone"}, "", 10); !errors.Is(err, pg.ErrInvalid) {
		t.Errorf("status gone: %v, want ErrInvalid", err)
	}
	id := f.activeKey.ID
	rpm, zero := int64(5), int64(0)
	never := time.Time{}
	k, err := s.UpdateKey(ctx, id, pg.KeyPatch{RPM: &rpm, MaxTokens: &zero, ExpiresAt: &never,
		Budget: &tenant.KeyBudget{LimitMicros: 1_000_000, Window: "day"}})
	must(t, err)
	if k.Limits.RPM != 5 || !k.ExpiresAt.IsZero() || k.Budget.Window != "day" || k.Hash != f.activeKey.Hash || k.CreatedAt.IsZero() {
		t.Errorf("updated key %+v", k)
	}
	got, err := s.GetKey(ctx, id)
	must(t, err)
	if got.Limits.RPM != 5 || got.Budget.LimitMicros != 1_000_000 {
		t.Errorf("GetKey after update: %+v", got)
	}
	// Only the fields given change.
	tpm := int64(7)
	k, err = s.UpdateKey(ctx, id, pg.KeyPatch{TPM: &tpm})
	must(t, err)
	if k.Limits.RPM != 5 || k.Limits.TPM != 7 || k.Budget.LimitMicros != 1_000_000 {
		t.Errorf("a TPM patch changed more: %+v", k)
	}
	neg := int64(-1)
	if _, err := s.UpdateKey(ctx, id, pg.KeyPatch{RPM: &neg}); !errors.Is(err, pg.ErrInvalid) {
		t.Errorf("negative rpm: %v, want ErrInvalid", err)
	}
	if _, err := s.UpdateKey(ctx, "key_nope", pg.KeyPatch{RPM: &rpm}); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("unknown key: %v, want ErrNotFound", err)
	}
	h, err := s.DeleteKey(ctx, id)
	must(t, err)
	if h != f.activeKey.Hash {
		t.Errorf("DeleteKey returned another hash")
	}
	if _, err := s.KeyByHash(ctx, h); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("deleted key: %v, want ErrNotFound", err)
	}
	if got, want := auditActions(t, dsn, "key", id), []string{"key.create:false:true", "key.update:true:true", "key.update:true:true", "key.delete:true:false"}; !slices.Equal(got, want) {
		t.Errorf("audit %v, want %v", got, want)
	}
}

func TestPricesListDelete(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	must(t, s.SetPrice(ctx, tenant.Price{Model: "a", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 2, EffectiveFrom: now.Add(-time.Hour)}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "a", InputMicrosPerMTok: 3, OutputMicrosPerMTok: 4, EffectiveFrom: now.Add(-time.Minute), ContextWindow: 9}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "a", InputMicrosPerMTok: 5, OutputMicrosPerMTok: 6, EffectiveFrom: now.Add(time.Hour)}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "b", InputMicrosPerMTok: 7, OutputMicrosPerMTok: 8, EffectiveFrom: now.Add(-time.Hour)}))
	must(t, s.SetPrice(ctx, tenant.Price{Model: "later", InputMicrosPerMTok: 7, OutputMicrosPerMTok: 8, EffectiveFrom: now.Add(time.Hour)}))
	ps, err := s.ListPrices(ctx, "", now, "", 10)
	must(t, err)
	if len(ps) != 2 || ps[0].Model != "a" || ps[0].InputMicrosPerMTok != 3 || ps[0].ContextWindow != 9 || ps[1].Model != "b" || ps[0].Source != "admin" {
		t.Fatalf("prices now %+v: want a's second and b's", ps)
	}
	ps, err = s.ListPrices(ctx, "", now, "a", 10)
	must(t, err)
	if len(ps) != 1 || ps[0].Model != "b" {
		t.Errorf("after a: %+v", ps)
	}
	ps, err = s.ListPrices(ctx, "b", now, "", 10)
	must(t, err)
	if len(ps) != 1 || ps[0].Model != "b" {
		t.Errorf("model b: %+v", ps)
	}
	must(t, s.DeletePrice(ctx, "a"))
	if _, err := s.Price(ctx, "a", now.Add(2*time.Hour)); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("a deleted model's scheduled price: %v, want ErrNotFound", err)
	}
	if err := s.DeletePrice(ctx, "a"); !errors.Is(err, tenant.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if got, want := auditActions(t, dsn, "price", "a"), []string{"price.set:false:true", "price.set:false:true", "price.set:false:true", "price.delete:true:false"}; !slices.Equal(got, want) {
		t.Errorf("audit %v, want %v", got, want)
	}
}

func TestUsageOverviewGuardActions(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	seed(t, s)
	ctx := t.Context()
	conn := connect(t, dsn)
	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	if now.Sub(today) < 10*time.Minute {
		// Just past midnight "a few minutes ago" is yesterday: the rows below are
		// today's by construction, so the test's "now" moves a few minutes on.
		now = today.Add(10 * time.Minute)
	}
	// Two days, two tenants, two models; errors, guard actions.
	yesterday := today.AddDate(0, 0, -1)
	must(t, s.EnsureCallLogPartition(ctx, yesterday))
	rows := []struct {
		id, tenant, model string
		status            int
		at                time.Time
		cost              int64
		guard             *string
	}{
		{"r1", "acme", "m1", 200, now.Add(-time.Minute), 10, nil},
		{"r2", "acme", "m2", 500, now.Add(-2 * time.Minute), 0, nil},
		{"r3", "shady", "m1", 403, now.Add(-3 * time.Minute), 0, ptr("block:keywordguard")},
		{"r4", "acme", "m1", 200, yesterday.Add(time.Hour), 100, ptr("redact:pii")},
	}
	for _, r := range rows {
		_, err := conn.Exec(ctx, `INSERT INTO call_log (request_id, tenant_id, model, status, started_at, prompt_tokens, completion_tokens, cost_micros, guard_action)
VALUES ($1, $2, $3, $4, $5, 3, 4, $6, $7)`, r.id, r.tenant, r.model, r.status, r.at, r.cost, r.guard)
		must(t, err)
	}
	_, err := conn.Exec(ctx, `INSERT INTO spend_month (tenant_id, month, cost_micros) VALUES ('acme', $1, 110), ('shady', $1, 1)`, pg.MonthStart(now))
	must(t, err)

	u, err := s.UsageOver(ctx, pg.UsageQuery{From: yesterday, To: today, ByDay: true, Limit: 10})
	must(t, err)
	if len(u) != 2 || !u[0].Day.Equal(yesterday) || u[0].Requests != 1 || u[0].CostMicros != 100 || u[0].GuardActions != 1 ||
		u[1].Requests != 3 || u[1].Errors != 2 || u[1].PromptTokens != 9 || u[1].CompletionTokens != 12 || u[1].GuardActions != 1 {
		t.Errorf("by day: %+v", u)
	}
	u, err = s.UsageOver(ctx, pg.UsageQuery{From: today, To: today, ByTenant: true, ByModel: true, Limit: 10})
	must(t, err)
	if len(u) != 3 || u[0].TenantID != "acme" || u[0].Model != "m1" || u[1].Model != "m2" || u[2].TenantID != "shady" || !u[0].Day.IsZero() {
		t.Errorf("by tenant and model today: %+v", u)
	}
	u, err = s.UsageOver(ctx, pg.UsageQuery{From: yesterday, To: today, TenantID: "shady", Limit: 10})
	must(t, err)
	if len(u) != 1 || u[0].Requests != 1 {
		t.Errorf("shady, one group: %+v", u)
	}
	u, err = s.UsageOver(ctx, pg.UsageQuery{From: yesterday.AddDate(0, 0, -5), To: yesterday.AddDate(0, 0, -3), Limit: 10})
	must(t, err)
	if len(u) != 0 {
		t.Errorf("an empty range: %+v, want no rows", u)
	}

	r, err := s.RecentCalls(ctx, now.Add(-5*time.Minute), 10)
	must(t, err)
	if r.Requests != 3 || r.Errors != 2 || r.GuardActions != 1 || r.SpendMonthMicros != 111 ||
		len(r.Top) != 2 || r.Top[0].TenantID != "acme" || r.Top[0].Requests != 2 || r.Top[1].Requests != 1 {
		t.Errorf("recent: %+v", r)
	}

	g, err := s.GuardActions(ctx, "", time.Time{}, "", 1)
	must(t, err)
	if len(g) != 1 || g[0].RequestID != "r3" || g[0].Action != "block:keywordguard" || g[0].Status != 403 {
		t.Fatalf("newest guard action: %+v", g)
	}
	g, err = s.GuardActions(ctx, "", g[0].StartedAt, g[0].RequestID, 10)
	must(t, err)
	if len(g) != 1 || g[0].RequestID != "r4" {
		t.Errorf("after r3: %+v", g)
	}
	g, err = s.GuardActions(ctx, "shady", time.Time{}, "", 10)
	must(t, err)
	if len(g) != 1 || g[0].TenantID != "shady" {
		t.Errorf("shady's: %+v", g)
	}
}

func ptr[T any](v T) *T { return &v }

// TestDeleteTenantRacesKeyCreate: a tenant's delete and the creation of a
// key for it, at once, never leave a key of a deleted tenant: either the
// creation fails (ErrNotFound) or the delete takes the new key with the
// others (and returns its hash to evict).
func TestDeleteTenantRacesKeyCreate(t *testing.T) {
	t.Parallel()
	s, dsn := open(t)
	ctx := t.Context()
	must(t, s.CreatePlan(ctx, tenant.Plan{ID: "p"}))
	conn := connect(t, dsn)
	var refused, taken int
	defer func() { t.Logf("key creation refused %d times, key taken by the delete %d times", refused, taken) }()
	for i := range 20 {
		id := fmt.Sprintf("t%d", i)
		must(t, s.CreateTenant(ctx, tenant.Tenant{ID: id, PlanID: "p"}))
		var wg sync.WaitGroup
		var hashes []tenant.KeyHash
		var delErr, keyErr error
		var key *tenant.Key
		wg.Go(func() { hashes, delErr = s.DeleteTenant(ctx, id) })
		wg.Go(func() { _, key, keyErr = s.CreateKey(ctx, id, pg.KeyOptions{}) })
		wg.Wait()
		if delErr != nil {
			t.Fatalf("round %d: delete: %v", i, delErr)
		}
		switch {
		case errors.Is(keyErr, tenant.ErrNotFound):
			refused++
		case keyErr == nil && len(hashes) == 1 && hashes[0] == key.Hash:
			taken++
		default:
			t.Fatalf("round %d: key %v, delete returned %d hashes", i, keyErr, len(hashes))
		}
		var left int
		must(t, conn.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE tenant_id = $1`, id).Scan(&left))
		if left != 0 {
			t.Fatalf("round %d: %d keys of the deleted tenant", i, left)
		}
	}
}
