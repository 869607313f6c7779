// Package storetest is the behaviour every tenant.Store implementation must
// show, as one table each implementation runs against its own seeding of a
// shared Fixture:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, f storetest.Fixture) tenant.Store {
//			return seed(t, f) // however the implementation stores f
//		})
//	}
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Fixture is the data a store under test is seeded with. It is plain data;
// keys come in plaintext (what a client presents) and must be stored only
// as tenant.HashKey(Plaintext).
type Fixture struct {
	Plans   []tenant.Plan
	Tenants []Tenant
	Prices  []tenant.Price
}

// Tenant is a tenant with its keys.
type Tenant struct {
	ID      string
	Status  string
	PlanID  string
	Keys    []Key
	Plugins tenant.PluginOverrides
}

// Key is an API key of a Tenant.
type Key struct {
	ID        string
	Plaintext string // the key a client presents, e.g. "tg_test_active"
	Prefix    string
	Status    string
	ExpiresAt time.Time // zero: never
	Limits    tenant.Limits
	Budget    tenant.KeyBudget
}

func date(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// NewFixture returns the fixture Run seeds stores with: plans basic
// (budget, limits, model patterns) and free (nothing set); tenant acme
// (active, basic) with active, revoked, expired, expiring-later and
// limit-overriding keys; globex (suspended, free); initech (active, free);
// and prices with several effective dates. Each call returns fresh slices.
func NewFixture() Fixture {
	on, off := true, false
	return Fixture{
		Plans: []tenant.Plan{
			{
				ID:                  "basic",
				MonthlyBudgetMicros: 12_500_000,
				Budgets: []tenant.BudgetRule{
					{Scope: tenant.BudgetTenant, Window: tenant.WindowMonth, LimitMicros: 12_500_000, Alerts: []int{80, 100}},
					{Scope: tenant.BudgetKey, Window: tenant.WindowDay, LimitMicros: 5_000_000, Alerts: []int{50}},
					{Scope: tenant.BudgetUser, Window: tenant.WindowDay, LimitMicros: 1_000_001},
				},
				Limits:        tenant.Limits{RPM: 60, TPM: 10_000, MaxTokens: 256},
				AllowedModels: []string{"gpt-test", "mock-*"},
				Plugins: tenant.PluginOverrides{
					"guard": {Enabled: &on, Config: []byte(`{"keywords":["x"],"mode":{"strict":true}}`)},
					"hold":  {Enabled: &off},
				},
			},
			{ID: "free"},
		},
		Tenants: []Tenant{
			{ID: "acme", Status: tenant.StatusActive, PlanID: "basic", Plugins: tenant.PluginOverrides{
				"guard": {Config: []byte(`{"mode":null}`)},
			}, Keys: []Key{
				{ID: "k-active", Plaintext: "tg_test_active", Prefix: "tg_test_act", Status: tenant.StatusActive},
				{ID: "k-revoked", Plaintext: "tg_test_revoked", Prefix: "tg_test_rev", Status: tenant.StatusRevoked},
				{ID: "k-expired", Plaintext: "tg_test_expired", Status: tenant.StatusActive, ExpiresAt: date(2020, 1, 1)},
				{ID: "k-later", Plaintext: "tg_test_later", Status: tenant.StatusActive, ExpiresAt: date(2100, 1, 1)},
				{ID: "k-override", Plaintext: "tg_test_override", Status: tenant.StatusActive,
					Limits: tenant.Limits{RPM: 600, MaxTokens: 4096},
					Budget: tenant.KeyBudget{LimitMicros: 2_000_000, Window: tenant.WindowMonth}},
			}},
			{ID: "globex", Status: tenant.StatusSuspended, PlanID: "free", Keys: []Key{
				{ID: "k-suspended", Plaintext: "tg_test_suspended", Status: tenant.StatusActive},
			}},
			{ID: "initech", Status: tenant.StatusActive, PlanID: "free", Keys: []Key{
				{ID: "k-free", Plaintext: "tg_test_free", Status: tenant.StatusActive},
			}},
		},
		Prices: []tenant.Price{
			{Model: "gpt-test", InputMicrosPerMTok: 1_000_000, OutputMicrosPerMTok: 2_000_000, EffectiveFrom: date(2024, 1, 1)},
			{Model: "gpt-test", InputMicrosPerMTok: 1_500_000, OutputMicrosPerMTok: 3_000_000, EffectiveFrom: date(2025, 1, 1)},
			{Model: "gpt-other", InputMicrosPerMTok: 150_001, OutputMicrosPerMTok: 600_000, EffectiveFrom: date(2024, 6, 1)},
			{Model: "gpt-scheduled", InputMicrosPerMTok: 1, OutputMicrosPerMTok: 2, EffectiveFrom: date(2099, 1, 1)},
		},
	}
}

// Run seeds one store with NewFixture through newStore and checks KeyByHash
// and Price against it.
func Run(t *testing.T, newStore func(t *testing.T, f Fixture) tenant.Store) {
	t.Helper()
	f := NewFixture()
	st := newStore(t, NewFixture())
	if st == nil {
		t.Fatal("newStore returned nil")
	}
	t.Run("KeyByHash", func(t *testing.T) { runKeys(t, st, f) })
	t.Run("Price", func(t *testing.T) { runPrices(t, st, f) })
}

func runKeys(t *testing.T, st tenant.Store, f Fixture) {
	now := time.Now()
	tests := []struct {
		name      string
		key       string
		wantFound bool
		usable    bool
		effective tenant.Limits
	}{
		{"active", "tg_test_active", true, true, tenant.Limits{RPM: 60, TPM: 10_000, MaxTokens: 256}},
		{"revoked", "tg_test_revoked", true, false, tenant.Limits{RPM: 60, TPM: 10_000, MaxTokens: 256}},
		{"expired", "tg_test_expired", true, false, tenant.Limits{RPM: 60, TPM: 10_000, MaxTokens: 256}},
		{"expires later", "tg_test_later", true, true, tenant.Limits{RPM: 60, TPM: 10_000, MaxTokens: 256}},
		{"per-key limits override the plan's", "tg_test_override", true, true, tenant.Limits{RPM: 600, TPM: 10_000, MaxTokens: 4096}},
		{"suspended tenant", "tg_test_suspended", true, false, tenant.Limits{}},
		{"plan without limits", "tg_test_free", true, true, tenant.Limits{}},
		{"unknown", "tg_test_unknown", false, false, tenant.Limits{}},
		{"empty", "", false, false, tenant.Limits{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.KeyByHash(context.Background(), tenant.HashKey(tt.key))
			if !tt.wantFound {
				if !errors.Is(err, tenant.ErrNotFound) {
					t.Fatalf("KeyByHash(%q) = %+v, %v; want ErrNotFound", tt.key, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("KeyByHash(%q): %v", tt.key, err)
			}
			if got == nil {
				t.Fatalf("KeyByHash(%q): nil snapshot", tt.key)
			}
			want := expectedSnapshot(t, f, tt.key)
			for _, d := range diffSnapshot(got, want) {
				t.Error(d)
			}
			if got.LoadedAt.IsZero() {
				t.Error("LoadedAt is zero; set it to when the snapshot was read")
			}
			if u := got.Usable(now); u != tt.usable {
				t.Errorf("Usable = %v, want %v", u, tt.usable)
			}
			if e := got.Effective(); e != tt.effective {
				t.Errorf("Effective() = %+v, want %+v", e, tt.effective)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := st.KeyByHash(ctx, tenant.HashKey("tg_test_active")); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

// expectedSnapshot builds the snapshot the fixture implies for key.
func expectedSnapshot(t *testing.T, f Fixture, key string) *tenant.Snapshot {
	t.Helper()
	for _, tn := range f.Tenants {
		for _, k := range tn.Keys {
			if k.Plaintext != key {
				continue
			}
			i := slices.IndexFunc(f.Plans, func(p tenant.Plan) bool { return p.ID == tn.PlanID })
			if i < 0 {
				t.Fatalf("fixture: tenant %s has unknown plan %s", tn.ID, tn.PlanID)
			}
			return &tenant.Snapshot{
				Key: tenant.Key{
					ID: k.ID, TenantID: tn.ID, Hash: tenant.HashKey(k.Plaintext), Prefix: k.Prefix,
					Status: k.Status, ExpiresAt: k.ExpiresAt, Limits: k.Limits, Budget: k.Budget,
				},
				Tenant: tenant.Tenant{ID: tn.ID, Status: tn.Status, PlanID: tn.PlanID, Plugins: tn.Plugins},
				Plan:   f.Plans[i],
			}
		}
	}
	t.Fatalf("fixture has no key %q", key)
	return nil
}

// diffSnapshot lists how got differs from want (LoadedAt aside). Times
// compare as instants; nil and empty AllowedModels are equal.
func diffSnapshot(got, want *tenant.Snapshot) []string {
	var d []string
	check := func(field string, ok bool, g, w any) {
		if !ok {
			d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
		}
	}
	gk, wk := got.Key, want.Key
	check("Key.ID", gk.ID == wk.ID, gk.ID, wk.ID)
	check("Key.TenantID", gk.TenantID == wk.TenantID, gk.TenantID, wk.TenantID)
	check("Key.Hash", gk.Hash == wk.Hash, gk.Hash, wk.Hash)
	check("Key.Prefix", gk.Prefix == wk.Prefix, gk.Prefix, wk.Prefix)
	check("Key.Status", gk.Status == wk.Status, gk.Status, wk.Status)
	check("Key.ExpiresAt", gk.ExpiresAt.Equal(wk.ExpiresAt), gk.ExpiresAt, wk.ExpiresAt)
	check("Key.Limits", gk.Limits == wk.Limits, gk.Limits, wk.Limits)
	check("Key.Budget", gk.Budget == wk.Budget, gk.Budget, wk.Budget)
	gt, wt := got.Tenant, want.Tenant
	check("Tenant", gt.ID == wt.ID && gt.Status == wt.Status && gt.PlanID == wt.PlanID, gt, wt)
	check("Tenant.Plugins", overridesEqual(gt.Plugins, wt.Plugins), gt.Plugins, wt.Plugins)
	check("Plan.Plugins", overridesEqual(got.Plan.Plugins, want.Plan.Plugins), got.Plan.Plugins, want.Plan.Plugins)
	wantSet := len(want.Plan.Plugins)+len(want.Tenant.Plugins) > 0
	check("Plugins", (got.Plugins != nil) == wantSet && (got.Plugins == nil ||
		got.Plugins.PlanID == got.Plan.ID && got.Plugins.TenantID == gt.ID &&
			overridesEqual(got.Plugins.Plan, got.Plan.Plugins) && overridesEqual(got.Plugins.Tenant, gt.Plugins)), got.Plugins, wantSet)
	gp, wp := got.Plan, want.Plan
	check("Plan.ID", gp.ID == wp.ID, gp.ID, wp.ID)
	check("Plan.MonthlyBudgetMicros", gp.MonthlyBudgetMicros == wp.MonthlyBudgetMicros, gp.MonthlyBudgetMicros, wp.MonthlyBudgetMicros)
	check("Plan.Limits", gp.Limits == wp.Limits, gp.Limits, wp.Limits)
	check("Plan.Budgets", budgetsEqual(gp.Budgets, wp.Budgets), gp.Budgets, wp.Budgets)
	gb, wb := got.AppendBudgets(nil), want.AppendBudgets(nil)
	check("AppendBudgets", budgetsEqual(gb, wb), gb, wb)
	check("Plan.AllowedModels", slices.Equal(gp.AllowedModels, wp.AllowedModels), gp.AllowedModels, wp.AllowedModels)
	return d
}

// overridesEqual compares plugin overrides; configs as JSON values.
func overridesEqual(a, b tenant.PluginOverrides) bool {
	return maps.EqualFunc(a, b, func(x, y tenant.PluginOverride) bool {
		if (x.Enabled == nil) != (y.Enabled == nil) || x.Enabled != nil && *x.Enabled != *y.Enabled {
			return false
		}
		if (x.Config == nil) != (y.Config == nil) {
			return false
		}
		var xv, yv any
		if x.Config != nil && (json.Unmarshal(x.Config, &xv) != nil || json.Unmarshal(y.Config, &yv) != nil) {
			return false
		}
		return reflect.DeepEqual(xv, yv)
	})
}

// budgetsEqual compares rules in order; nil and empty Alerts are equal.
func budgetsEqual(a, b []tenant.BudgetRule) bool {
	return slices.EqualFunc(a, b, func(x, y tenant.BudgetRule) bool {
		return x.Scope == y.Scope && x.Window == y.Window && x.LimitMicros == y.LimitMicros && slices.Equal(x.Alerts, y.Alerts)
	})
}

func runPrices(t *testing.T, st tenant.Store, f Fixture) {
	byDate := func(model string, from time.Time) *tenant.Price {
		for i := range f.Prices {
			if p := &f.Prices[i]; p.Model == model && p.EffectiveFrom.Equal(from) {
				return p
			}
		}
		t.Fatalf("fixture has no price for %s from %s", model, from)
		return nil
	}
	tests := []struct {
		name  string
		model string
		at    time.Time
		want  *tenant.Price // nil: ErrNotFound
	}{
		{"before the first price", "gpt-test", date(2023, 12, 31), nil},
		{"on the first price's start", "gpt-test", date(2024, 1, 1), byDate("gpt-test", date(2024, 1, 1))},
		{"during the first price", "gpt-test", date(2025, 1, 1).Add(-time.Second), byDate("gpt-test", date(2024, 1, 1))},
		{"on the second price's start", "gpt-test", date(2025, 1, 1), byDate("gpt-test", date(2025, 1, 1))},
		{"now", "gpt-test", time.Now(), byDate("gpt-test", date(2025, 1, 1))},
		{"another model", "gpt-other", time.Now(), byDate("gpt-other", date(2024, 6, 1))},
		{"only a future price", "gpt-scheduled", time.Now(), nil},
		{"once the future price applies", "gpt-scheduled", date(2099, 6, 1), byDate("gpt-scheduled", date(2099, 1, 1))},
		{"in another time zone", "gpt-test", date(2025, 1, 1).In(time.FixedZone("UTC-5", -5*3600)), byDate("gpt-test", date(2025, 1, 1))},
		{"unknown model", "gpt-unknown", time.Now(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := st.Price(context.Background(), tt.model, tt.at)
			if tt.want == nil {
				if !errors.Is(err, tenant.ErrNotFound) {
					t.Fatalf("Price(%s, %s) = %+v, %v; want ErrNotFound", tt.model, tt.at, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Price(%s, %s): %v", tt.model, tt.at, err)
			}
			if got.Model != tt.want.Model || got.InputMicrosPerMTok != tt.want.InputMicrosPerMTok ||
				got.OutputMicrosPerMTok != tt.want.OutputMicrosPerMTok || !got.EffectiveFrom.Equal(tt.want.EffectiveFrom) {
				t.Errorf("Price(%s, %s) = %+v, want %+v", tt.model, tt.at, *got, *tt.want)
			}
		})
	}
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := st.Price(ctx, "gpt-test", time.Now()); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}
