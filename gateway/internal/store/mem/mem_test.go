package mem

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/tenant/storetest"
	"github.com/tollgate/tollgate/gateway/internal/tenantspec"
)

func sha(key string) string {
	h := tenant.HashKey(key)
	return hex.EncodeToString(h[:])
}

// configOf turns a fixture into a tenantspec.Config the way an operator
// would write it: budgets and prices in dollars, keys as hashes, except the keys of
// tenant initech, which come from the environment (returned as env).
func configOf(f storetest.Fixture) (tenantspec.Config, map[string]string) {
	var cfg tenantspec.Config
	env := make(map[string]string)
	usd := func(micros int64) float64 { return float64(micros) / 1e6 }
	for _, p := range f.Plans {
		pc := tenantspec.PlanConfig{
			ID: p.ID, MonthlyBudgetUSD: usd(p.MonthlyBudgetMicros),
			RPM: p.RPM, TPM: p.TPM, MaxTokens: p.MaxTokens, AllowedModels: p.AllowedModels,
		}
		if len(p.Budgets) > 0 {
			pc.MonthlyBudgetUSD = 0 // the tenant/month rule says it, with its alerts
		}
		for _, r := range p.Budgets {
			pc.Budgets = append(pc.Budgets, tenantspec.BudgetConfig{Scope: r.Scope, Window: r.Window, USD: usd(r.LimitMicros), Alerts: r.Alerts})
		}
		pc.Plugins = overrideConfigs(p.Plugins)
		cfg.Plans = append(cfg.Plans, pc)
	}
	for _, tn := range f.Tenants {
		tc := tenantspec.TenantConfig{ID: tn.ID, Plan: tn.PlanID, Status: tn.Status, Plugins: overrideConfigs(tn.Plugins)}
		for _, k := range tn.Keys {
			kc := tenantspec.KeyConfig{
				ID: k.ID, Prefix: k.Prefix, Status: k.Status, ExpiresAt: k.ExpiresAt,
				RPM: k.Limits.RPM, TPM: k.Limits.TPM, MaxTokens: k.Limits.MaxTokens,
				BudgetUSD: usd(k.Budget.LimitMicros), BudgetWindow: k.Budget.Window,
			}
			if tn.ID == "initech" {
				kc.KeyEnv = "TG_KEY_" + strings.ToUpper(strings.ReplaceAll(k.ID, "-", "_"))
				env[kc.KeyEnv] = k.Plaintext
			} else {
				kc.KeySHA256 = sha(k.Plaintext)
			}
			tc.Keys = append(tc.Keys, kc)
		}
		cfg.Tenants = append(cfg.Tenants, tc)
	}
	for _, p := range f.Prices {
		cfg.Prices = append(cfg.Prices, tenantspec.PriceConfig{
			Model: p.Model, InputUSDPerMTok: usd(p.InputMicrosPerMTok),
			OutputUSDPerMTok: usd(p.OutputMicrosPerMTok), EffectiveFrom: p.EffectiveFrom,
		})
	}
	return cfg, env
}

// overrideConfigs writes plugin overrides as a policy would (configs as
// YAML values).
func overrideConfigs(ovs tenant.PluginOverrides) map[string]tenantspec.PluginOverrideConfig {
	if ovs == nil {
		return nil
	}
	out := make(map[string]tenantspec.PluginOverrideConfig, len(ovs))
	for name, ov := range ovs {
		c := tenantspec.PluginOverrideConfig{Enabled: ov.Enabled}
		if ov.Config != nil {
			if err := json.Unmarshal(ov.Config, &c.Config); err != nil {
				panic(err)
			}
		}
		out[name] = c
	}
	return out
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T, f storetest.Fixture) tenant.Store {
		cfg, env := configOf(f)
		s, err := New(cfg, lookup(env))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestDecodeYAML checks the yaml tags against the policy format.
func TestDecodeYAML(t *testing.T) {
	const doc = `
plans:
  - {id: basic, monthly_budget_usd: 12.5, rpm: 60, tpm: 1000, max_tokens: 256, allowed_models: ["mock-*"]}
tenants:
  - id: acme
    plan: basic
    status: active
    keys:
      - {id: k-1, key_sha256: ` + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" + `, prefix: tg_x, status: revoked,
         expires_at: 2030-01-02T03:04:05Z, rpm: 1, tpm: 2, max_tokens: 3}
      - {id: k-2, key_env: ACME_KEY}
prices:
  - {model: m, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6, effective_from: 2024-07-18}
`
	var cfg tenantspec.Config
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, lookup(map[string]string{"ACME_KEY": "tg_acme"}))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := hex.DecodeString("9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
	snap, err := s.KeyByHash(context.Background(), tenant.KeyHash(h))
	if err != nil {
		t.Fatal(err)
	}
	k := snap.Key
	if k.ID != "k-1" || k.Prefix != "tg_x" || k.Status != tenant.StatusRevoked || k.ExpiresAt.Year() != 2030 ||
		k.Limits != (tenant.Limits{RPM: 1, TPM: 2, MaxTokens: 3}) || snap.Plan.MonthlyBudgetMicros != 12_500_000 ||
		snap.Plan.Limits != (tenant.Limits{RPM: 60, TPM: 1000, MaxTokens: 256}) || snap.Plan.AllowedModels[0] != "mock-*" {
		t.Errorf("decoded snapshot = %+v", snap)
	}
	if _, err := s.KeyByHash(context.Background(), tenant.HashKey("tg_acme")); err != nil {
		t.Errorf("key_env key: %v", err)
	}
	p, err := s.Price(context.Background(), "m", cfg.Prices[0].EffectiveFrom)
	if err != nil || p.InputMicrosPerMTok != 150_000 || p.OutputMicrosPerMTok != 600_000 {
		t.Errorf("price = %+v, %v", p, err)
	}
}

func TestNewRejects(t *testing.T) {
	valid := func() tenantspec.Config {
		return tenantspec.Config{
			Plans: []tenantspec.PlanConfig{{ID: "basic"}, {ID: "free"}},
			Tenants: []tenantspec.TenantConfig{
				{ID: "acme", Plan: "basic", Keys: []tenantspec.KeyConfig{{ID: "k-1", KeySHA256: sha("a")}}},
				{ID: "globex", Plan: "free", Keys: []tenantspec.KeyConfig{{ID: "k-2", KeySHA256: sha("b")}}},
			},
			Prices: []tenantspec.PriceConfig{{Model: "m", InputUSDPerMTok: 1}},
		}
	}
	tests := []struct {
		name   string
		modify func(*tenantspec.Config)
		want   []string // each a problem's "path: message" prefix
	}{
		{"valid", func(*tenantspec.Config) {}, nil},
		{"unknown plan", func(c *tenantspec.Config) { c.Tenants[1].Plan = "gold" },
			[]string{`tenants[1].plan: unknown plan "gold" (declared: "basic", "free")`}},
		{"missing plan", func(c *tenantspec.Config) { c.Tenants[0].Plan = "" }, []string{"tenants[0].plan: is required"}},
		{"duplicate plan id", func(c *tenantspec.Config) { c.Plans[1].ID = "basic" },
			[]string{
				`plans[1].id: duplicate plan id "basic" (first at plans[0].id)`,
				`tenants[1].plan: unknown plan "free" (declared: "basic")`,
			}},
		{"missing plan id", func(c *tenantspec.Config) { c.Plans = append(c.Plans, tenantspec.PlanConfig{}) }, []string{"plans[2].id: plan id is required"}},
		{"duplicate tenant id", func(c *tenantspec.Config) { c.Tenants[1].ID = "acme" },
			[]string{`tenants[1].id: duplicate tenant id "acme" (first at tenants[0].id)`}},
		{"duplicate key id across tenants", func(c *tenantspec.Config) { c.Tenants[1].Keys[0].ID = "k-1" },
			[]string{`tenants[1].keys[0].id: duplicate key id "k-1" (first at tenants[0].keys[0].id)`}},
		{"duplicate hash", func(c *tenantspec.Config) { c.Tenants[1].Keys[0].KeySHA256 = strings.ToUpper(sha("a")) },
			[]string{"tenants[1].keys[0]: same key as tenants[0].keys[0]"}},
		{"duplicate hash through env", func(c *tenantspec.Config) {
			c.Tenants[1].Keys[0].KeySHA256, c.Tenants[1].Keys[0].KeyEnv = "", "KEY_A"
		}, []string{"tenants[1].keys[0]: same key as tenants[0].keys[0]"}},
		{"bad hex", func(c *tenantspec.Config) { c.Tenants[1].Keys[0].KeySHA256 = strings.Repeat("zz", 32) },
			[]string{"tenants[1].keys[0].key_sha256: must be the key's SHA-256 as 64 hex digits: not hex"}},
		{"plaintext key in key_sha256 is not echoed", func(c *tenantspec.Config) { c.Tenants[1].Keys[0].KeySHA256 = "tg_live_secret" },
			[]string{"tenants[1].keys[0].key_sha256: must be the key's SHA-256 as 64 hex digits, got 14 characters"}},
		{"missing key", func(c *tenantspec.Config) { c.Tenants[0].Keys[0].KeySHA256 = "" },
			[]string{"tenants[0].keys[0]: missing key"}},
		{"both key forms", func(c *tenantspec.Config) { c.Tenants[0].Keys[0].KeyEnv = "KEY_A" },
			[]string{"tenants[0].keys[0]: set one of key_sha256 and key_env"}},
		{"unset env", func(c *tenantspec.Config) { c.Tenants[0].Keys[0].KeySHA256, c.Tenants[0].Keys[0].KeyEnv = "", "NOPE" },
			[]string{"tenants[0].keys[0].key_env: environment variable NOPE is not set"}},
		{"empty env", func(c *tenantspec.Config) { c.Tenants[0].Keys[0].KeySHA256, c.Tenants[0].Keys[0].KeyEnv = "", "EMPTY" },
			[]string{"tenants[0].keys[0].key_env: environment variable EMPTY is not set"}},
		{"missing key id", func(c *tenantspec.Config) { c.Tenants[0].Keys[0].ID = "" }, []string{"tenants[0].keys[0].id: key id is required"}},
		{"bad statuses", func(c *tenantspec.Config) {
			c.Tenants[0].Status = "revoked"
			c.Tenants[0].Keys[0].Status = "suspended"
		}, []string{
			`tenants[0].status: must be active or suspended, got "revoked"`,
			`tenants[0].keys[0].status: must be active or revoked, got "suspended"`,
		}},
		{"negative limits", func(c *tenantspec.Config) {
			c.Plans[0].RPM = -1
			c.Tenants[0].Keys[0].MaxTokens = -2
		}, []string{"plans[0].rpm: must not be negative", "tenants[0].keys[0].max_tokens: must not be negative"}},
		{"rpm above the limiter's maximum", func(c *tenantspec.Config) {
			c.Plans[0].RPM = 60_000_001
			c.Tenants[0].Keys[0].RPM = 100_000_000
		}, []string{"plans[0].rpm: at most 60000000", "tenants[0].keys[0].rpm: at most 60000000"}},
		{"bad model pattern", func(c *tenantspec.Config) { c.Plans[0].AllowedModels = []string{"ok", "[", ""} }, []string{
			`plans[0].allowed_models[1]: must be a model name or a path.Match pattern, got "["`,
			`plans[0].allowed_models[2]: must be a model name or a path.Match pattern, got ""`,
		}},
		{"budgets", func(c *tenantspec.Config) {
			c.Plans[0].Budgets = []tenantspec.BudgetConfig{
				{Scope: "key", Window: "day", USD: 5},
				{Scope: "team", USD: 1},
				{Scope: "user", Window: "week", USD: 1},
				{Scope: "user", USD: 0},
				{Scope: "user", USD: 1, Alerts: []int{100, 80}},
				{Scope: "key", Window: "day", USD: 0.5},
			}
		}, []string{
			`plans[0].budgets[1]: scope must be tenant, key or user, got "team"`,
			`plans[0].budgets[2]: window must be month or day, got "week"`,
			"plans[0].budgets[3].usd: must be positive",
			"plans[0].budgets[4]: alerts must be ascending",
			"plans[0].budgets[5]: a second key budget per day (first at plans[0].budgets[0])",
		}},
		{"monthly budget twice", func(c *tenantspec.Config) {
			c.Plans[0].MonthlyBudgetUSD = 10
			c.Plans[0].Budgets = []tenantspec.BudgetConfig{{Scope: "tenant", Window: "month", USD: 5}}
		}, []string{"plans[0].budgets[0]: monthly_budget_usd already sets the tenant's budget per month"}},
		{"key budgets", func(c *tenantspec.Config) {
			c.Tenants[0].Keys[0].BudgetUSD, c.Tenants[0].Keys[0].BudgetWindow = 1, "year"
			c.Tenants[1].Keys[0].BudgetWindow = "day"
		}, []string{
			`tenants[0].keys[0].budget_window: window must be month or day, got "year"`,
			"tenants[1].keys[0].budget_window: is set without budget_usd",
		}},
		{"budget with 7 decimals", func(c *tenantspec.Config) { c.Plans[0].MonthlyBudgetUSD = 0.1234567 },
			[]string{"plans[0].monthly_budget_usd: has more than 6 decimals"}},
		{"negative price", func(c *tenantspec.Config) { c.Prices[0].OutputUSDPerMTok = -1 },
			[]string{"prices[0].output_usd_per_mtok: must not be negative"}},
		{"price without model", func(c *tenantspec.Config) { c.Prices[0].Model = "" }, []string{"prices[0].model: is required"}},
		{"duplicate price", func(c *tenantspec.Config) { c.Prices = append(c.Prices, c.Prices[0]) },
			[]string{`prices[1]: duplicate price for "m" from 0001-01-01T00:00:00Z (first at prices[0])`}},
		{"problems are all reported", func(c *tenantspec.Config) {
			c.Tenants[0].Plan = "x"
			c.Tenants[1].Keys[0].KeySHA256 = "00"
		}, []string{"tenants[0].plan: unknown plan", "tenants[1].keys[0].key_sha256: must be"}},
	}
	env := lookup(map[string]string{"KEY_A": "a", "EMPTY": ""})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.modify(&cfg)
			s, err := New(cfg, env)
			if len(tt.want) == 0 {
				if err != nil || s == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted the config")
			}
			var problems []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ce *tenantspec.ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("problem %v is not a *tenantspec.ConfigError", e)
				}
				problems = append(problems, ce.Error())
			}
			if len(problems) != len(tt.want) {
				t.Fatalf("problems = %q, want %d matching %q", problems, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(problems[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, problems[i], w)
				}
			}
			if strings.Contains(err.Error(), "tg_live_secret") {
				t.Error("the error echoes a key")
			}
		})
	}
}

func TestStoreIsACopy(t *testing.T) {
	cfg := tenantspec.Config{
		Plans:   []tenantspec.PlanConfig{{ID: "p", AllowedModels: []string{"a"}}},
		Tenants: []tenantspec.TenantConfig{{ID: "t", Plan: "p", Keys: []tenantspec.KeyConfig{{ID: "k", KeySHA256: sha("k")}}}},
	}
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Plans[0].AllowedModels[0] = "changed"
	a, _ := s.KeyByHash(context.Background(), tenant.HashKey("k"))
	b, _ := s.KeyByHash(context.Background(), tenant.HashKey("k"))
	if a.Plan.AllowedModels[0] != "a" {
		t.Errorf("the store shares the config's slices: %q", a.Plan.AllowedModels)
	}
	if a == b {
		t.Error("KeyByHash returned the same snapshot twice; each read is a new snapshot")
	}
}
