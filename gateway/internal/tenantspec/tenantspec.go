package tenantspec

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Config is the policy's tenants section:
//
//	tenants:
//	  plans:
//	    - {id: basic, monthly_budget_usd: 12.5, rpm: 60, max_tokens: 256, allowed_models: ["gpt-4o*"]}
//	    - id: team
//	      budgets:
//	        - {scope: tenant, window: month, usd: 100, alerts: [80, 100]}
//	        - {scope: key, window: day, usd: 5}
//	        - {scope: user, window: day, usd: 1}
//	  tenants:
//	    - id: acme
//	      plan: basic
//	      keys:
//	        - {id: k-1, key_sha256: 9f86d0…}      # hex SHA-256 of the key
//	        - {id: k-2, key_env: ACME_KEY, max_tokens: 4096}
//	        - {id: k-3, key_env: ACME_CI_KEY, budget_usd: 2, budget_window: day}
//	  prices:
//	    - {model: gpt-4o-mini, input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6, effective_from: 2024-07-18}
//
// API keys are never written in a policy: a key is its SHA-256 in hex, or
// the name of an environment variable holding it.
type Config struct {
	Plans   []PlanConfig   `yaml:"plans"`
	Tenants []TenantConfig `yaml:"tenants"`
	Prices  []PriceConfig  `yaml:"prices"`
}

// PlanConfig declares a tenant.Plan. Zero limits are unlimited.
type PlanConfig struct {
	ID string `yaml:"id"`
	// MonthlyBudgetUSD is converted exactly to USD micros; at most 6
	// decimals; 0 means no budget.
	MonthlyBudgetUSD float64 `yaml:"monthly_budget_usd"`
	RPM              int64   `yaml:"rpm"`
	TPM              int64   `yaml:"tpm"`
	MaxTokens        int64   `yaml:"max_tokens"`
	// AllowedModels are model names or path.Match patterns; empty allows
	// every routed model.
	AllowedModels []string `yaml:"allowed_models"`
	// Budgets are the plan's budgets per scope and window;
	// monthly_budget_usd is the tenant/month one, so the two cannot both
	// name it.
	Budgets []BudgetConfig `yaml:"budgets"`
	// Plugins switch the policy's plugins on or off for the plan's
	// tenants and override their config, by plugin name.
	Plugins map[string]PluginOverrideConfig `yaml:"plugins"`
}

// BudgetConfig declares a tenant.BudgetRule.
type BudgetConfig struct {
	// Scope is tenant (all of the tenant's requests), key (each key on its
	// own) or user (each end user on its own).
	Scope string `yaml:"scope"`
	// Window is month (default) or day, UTC calendar periods.
	Window string `yaml:"window"`
	// USD is the limit per window, at most 6 decimals; must be positive.
	USD float64 `yaml:"usd"`
	// Alerts are percentages of the limit (ascending, 1..100) whose
	// crossing is reported.
	Alerts []int `yaml:"alerts"`
}

// TenantConfig declares a tenant.Tenant and its keys.
type TenantConfig struct {
	ID     string      `yaml:"id"`
	Plan   string      `yaml:"plan"`   // a PlanConfig.ID
	Status string      `yaml:"status"` // active (default) or suspended
	Keys   []KeyConfig `yaml:"keys"`
	// Plugins switch the policy's plugins on or off for this tenant and
	// override their config, over the plan's, by plugin name.
	Plugins map[string]PluginOverrideConfig `yaml:"plugins"`
}

// KeyConfig declares a tenant.Key. Exactly one of KeySHA256 and KeyEnv is
// set. Zero limits inherit the plan's.
type KeyConfig struct {
	ID string `yaml:"id"`
	// KeySHA256 is the hex SHA-256 of the key (64 digits).
	KeySHA256 string `yaml:"key_sha256"`
	// KeyEnv names an environment variable holding the key itself; it is
	// hashed at load.
	KeyEnv    string    `yaml:"key_env"`
	Prefix    string    `yaml:"prefix"` // shown to operators, e.g. "tg_live_ab12"
	Status    string    `yaml:"status"` // active (default) or revoked
	ExpiresAt time.Time `yaml:"expires_at"`
	RPM       int64     `yaml:"rpm"`
	TPM       int64     `yaml:"tpm"`
	MaxTokens int64     `yaml:"max_tokens"`
	// BudgetUSD is the key's own budget per BudgetWindow (month by
	// default), replacing the plan's key budgets for this key; 0 inherits
	// them.
	BudgetUSD    float64 `yaml:"budget_usd"`
	BudgetWindow string  `yaml:"budget_window"`
}

// ConfigError is one problem in a Config, at its YAML path relative to the
// tenants section (e.g. "tenants[1].keys[0].key_sha256").
type ConfigError struct {
	Path    string
	Message string
}

// Error returns "path: message".
func (e *ConfigError) Error() string { return e.Path + ": " + e.Message }

// Tables is what a valid Config declares, as the tenant package's values.
type Tables struct {
	// Keys is every declared key's snapshot, by hash.
	Keys map[tenant.KeyHash]*tenant.Snapshot
	// Prices is every model's prices, by EffectiveFrom ascending.
	Prices map[string][]*tenant.Price
	// Plans and Tenants are every declared plan and tenant, by id (what
	// the admin API lists with the memory store).
	Plans   map[string]*tenant.Plan
	Tenants map[string]*tenant.Tenant
}

// Build validates cfg and returns its tables. lookupEnv resolves key_env
// (nil means os.LookupEnv). The error joins (errors.Join) one *ConfigError
// per problem. Build copies what it keeps: cfg may be reused.
func Build(cfg Config, lookupEnv func(string) (string, bool)) (*Tables, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	b := builder{
		lookupEnv: lookupEnv,
		plans:     make(map[string]*tenant.Plan, len(cfg.Plans)),
		tables: &Tables{
			Keys:    make(map[tenant.KeyHash]*tenant.Snapshot),
			Prices:  make(map[string][]*tenant.Price),
			Tenants: make(map[string]*tenant.Tenant),
		},
	}
	for i := range cfg.Plans {
		b.plan(fmt.Sprintf("plans[%d]", i), &cfg.Plans[i])
	}
	tenantAt := make(map[string]string)
	keyIDAt := make(map[string]string)
	hashAt := make(map[tenant.KeyHash]string)
	for i := range cfg.Tenants {
		tc := &cfg.Tenants[i]
		at := fmt.Sprintf("tenants[%d]", i)
		tn := b.tenant(at, tc, tenantAt)
		if tn != nil {
			b.tables.Tenants[tn.tenant.ID] = &tn.tenant
		}
		for j := range tc.Keys {
			b.key(fmt.Sprintf("%s.keys[%d]", at, j), &tc.Keys[j], tn, keyIDAt, hashAt)
		}
	}
	priceAt := make(map[string]string)
	for i := range cfg.Prices {
		b.price(fmt.Sprintf("prices[%d]", i), &cfg.Prices[i], priceAt)
	}
	if len(b.problems) > 0 {
		return nil, errors.Join(b.problems...)
	}
	b.tables.Plans = b.plans
	for _, ps := range b.tables.Prices {
		slices.SortFunc(ps, func(a, b *tenant.Price) int { return a.EffectiveFrom.Compare(b.EffectiveFrom) })
	}
	return b.tables, nil
}

// builder accumulates Tables and the problems found building it.
type builder struct {
	lookupEnv func(string) (string, bool)
	plans     map[string]*tenant.Plan
	planAt    map[string]string
	tables    *Tables
	problems  []error
}

func (b *builder) add(path, format string, args ...any) {
	b.problems = append(b.problems, &ConfigError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// unique records id at path in seen, reporting an empty or repeated id.
func (b *builder) unique(path, what, id string, seen map[string]string) bool {
	if id == "" {
		b.add(path, "%s is required", what)
		return false
	}
	if prev, dup := seen[id]; dup {
		b.add(path, "duplicate %s %q (first at %s)", what, id, prev)
		return false
	}
	seen[id] = path
	return true
}

func (b *builder) limits(at string, rpm, tpm, maxTokens int64) tenant.Limits {
	for _, f := range []struct {
		name string
		v    int64
	}{{"rpm", rpm}, {"tpm", tpm}, {"max_tokens", maxTokens}} {
		if f.v < 0 {
			b.add(at+"."+f.name, "must not be negative, got %d", f.v)
		}
	}
	if rpm > limiter.MaxRPM {
		// The limiter would refuse it on every request.
		b.add(at+".rpm", "at most %d (one request per microsecond), got %d", limiter.MaxRPM, rpm)
	}
	return tenant.Limits{RPM: rpm, TPM: tpm, MaxTokens: maxTokens}
}

func (b *builder) plan(at string, pc *PlanConfig) {
	if b.planAt == nil {
		b.planAt = make(map[string]string)
	}
	ok := b.unique(at+".id", "plan id", pc.ID, b.planAt)
	budget, err := usdToMicros(pc.MonthlyBudgetUSD)
	if err != nil {
		b.add(at+".monthly_budget_usd", "%v", err)
	}
	for i, m := range pc.AllowedModels {
		if _, err := path.Match(m, ""); m == "" || err != nil {
			b.add(fmt.Sprintf("%s.allowed_models[%d]", at, i), "must be a model name or a path.Match pattern, got %q", m)
		}
	}
	rules := b.budgets(at, pc.Budgets, budget > 0)
	merged, err := tenant.PlanBudgets(budget, rules)
	if err != nil {
		b.add(at, "%v", err)
	}
	p := &tenant.Plan{
		ID:                  pc.ID,
		MonthlyBudgetMicros: tenant.MonthlyBudget(merged),
		Budgets:             merged,
		Limits:              b.limits(at, pc.RPM, pc.TPM, pc.MaxTokens),
		AllowedModels:       slices.Clone(pc.AllowedModels),
		Plugins:             b.pluginOverrides(at, pc.Plugins),
	}
	if ok {
		b.plans[pc.ID] = p
	}
}

// budgets converts a plan's budgets, reporting each one's problems at its
// path (monthly: monthly_budget_usd is set); PlanBudgets then merges them.
func (b *builder) budgets(at string, cs []BudgetConfig, monthly bool) []tenant.BudgetRule {
	rules := make([]tenant.BudgetRule, 0, len(cs))
	seen := make(map[[2]string]string, len(cs))
	for i, c := range cs {
		bat := fmt.Sprintf("%s.budgets[%d]", at, i)
		limit, err := usdToMicros(c.USD)
		switch {
		case err != nil:
			b.add(bat+".usd", "%v", err)
			continue
		case limit == 0:
			b.add(bat+".usd", "must be positive (leave the budget out for none)")
			continue
		}
		r := tenant.BudgetRule{Scope: c.Scope, Window: cmp.Or(c.Window, tenant.WindowMonth), LimitMicros: limit, Alerts: c.Alerts}
		if err := r.Check(); err != nil {
			b.add(bat, "%v", err)
			continue
		}
		id := [2]string{r.Scope, r.Window}
		if prev, dup := seen[id]; dup {
			b.add(bat, "a second %s budget per %s (first at %s)", r.Scope, r.Window, prev)
			continue
		}
		seen[id] = bat
		if monthly && r.Scope == tenant.BudgetTenant && r.Window == tenant.WindowMonth {
			b.add(bat, "monthly_budget_usd already sets the tenant's budget per month; set one of them")
			continue
		}
		rules = append(rules, r)
	}
	return rules
}

// keyBudget converts a key's own budget.
func (b *builder) keyBudget(at string, kc *KeyConfig) tenant.KeyBudget {
	limit, err := usdToMicros(kc.BudgetUSD)
	if err != nil {
		b.add(at+".budget_usd", "%v", err)
		return tenant.KeyBudget{}
	}
	if limit == 0 {
		if kc.BudgetWindow != "" {
			b.add(at+".budget_window", "is set without budget_usd")
		}
		return tenant.KeyBudget{}
	}
	kb := tenant.KeyBudget{LimitMicros: limit, Window: cmp.Or(kc.BudgetWindow, tenant.WindowMonth)}
	if err := kb.Check(); err != nil {
		b.add(at+".budget_window", "%v", err)
		return tenant.KeyBudget{}
	}
	return kb
}

// tenant validates tc; it returns nil when its keys cannot be built.
func (b *builder) tenant(at string, tc *TenantConfig, seen map[string]string) *tenantRef {
	ok := b.unique(at+".id", "tenant id", tc.ID, seen)
	status := cmp.Or(tc.Status, tenant.StatusActive)
	if status != tenant.StatusActive && status != tenant.StatusSuspended {
		b.add(at+".status", "must be %s or %s, got %q", tenant.StatusActive, tenant.StatusSuspended, tc.Status)
	}
	p := b.plans[tc.Plan]
	switch {
	case tc.Plan == "":
		b.add(at+".plan", "is required")
	case p == nil:
		b.add(at+".plan", "unknown plan %q (declared: %s)", tc.Plan, b.declaredPlans())
	}
	if !ok || p == nil {
		return nil
	}
	return &tenantRef{tenant: tenant.Tenant{ID: tc.ID, Status: status, PlanID: p.ID, Plugins: b.pluginOverrides(at, tc.Plugins)}, plan: p}
}

type tenantRef struct {
	tenant tenant.Tenant
	plan   *tenant.Plan
	// set is the tenant's plugin overrides, shared by its keys' snapshots
	// so that what the gateway compiles from it is compiled once.
	set     *tenant.PluginSet
	setDone bool
}

func (t *tenantRef) plugins() *tenant.PluginSet {
	if !t.setDone {
		t.set, t.setDone = tenant.NewPluginSet(t.plan.ID, t.plan.Plugins, t.tenant.ID, t.tenant.Plugins), true
	}
	return t.set
}

func (b *builder) declaredPlans() string {
	if len(b.plans) == 0 {
		return "none"
	}
	ids := make([]string, 0, len(b.plans))
	for id := range b.plans {
		ids = append(ids, strconv.Quote(id))
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

func (b *builder) key(at string, kc *KeyConfig, tn *tenantRef, idAt map[string]string, hashAt map[tenant.KeyHash]string) {
	idOK := b.unique(at+".id", "key id", kc.ID, idAt)
	status := cmp.Or(kc.Status, tenant.StatusActive)
	if status != tenant.StatusActive && status != tenant.StatusRevoked {
		b.add(at+".status", "must be %s or %s, got %q", tenant.StatusActive, tenant.StatusRevoked, kc.Status)
	}
	limits := b.limits(at, kc.RPM, kc.TPM, kc.MaxTokens)
	own := b.keyBudget(at, kc)
	h, hashOK := b.keyHash(at, kc)
	if hashOK {
		if prev, dup := hashAt[h]; dup {
			b.add(at, "same key as %s", prev)
			hashOK = false
		} else {
			hashAt[h] = at
		}
	}
	if !idOK || !hashOK || tn == nil {
		return
	}
	b.tables.Keys[h] = &tenant.Snapshot{
		Key: tenant.Key{
			ID: kc.ID, TenantID: tn.tenant.ID, Hash: h, Prefix: kc.Prefix,
			Status: status, ExpiresAt: kc.ExpiresAt, Limits: limits, Budget: own,
		},
		Tenant:  tn.tenant,
		Plan:    *tn.plan,
		Plugins: tn.plugins(),
	}
}

// keyHash resolves a key's hash from key_sha256 or key_env. Messages never
// echo either value: a key pasted by mistake must not end up in logs.
func (b *builder) keyHash(at string, kc *KeyConfig) (tenant.KeyHash, bool) {
	var h tenant.KeyHash
	switch {
	case kc.KeySHA256 != "" && kc.KeyEnv != "":
		b.add(at, "set one of key_sha256 and key_env, not both")
	case kc.KeySHA256 != "":
		if len(kc.KeySHA256) != hex.EncodedLen(len(h)) {
			b.add(at+".key_sha256", "must be the key's SHA-256 as 64 hex digits, got %d characters", len(kc.KeySHA256))
			return h, false
		}
		if _, err := hex.Decode(h[:], []byte(kc.KeySHA256)); err != nil {
			b.add(at+".key_sha256", "must be the key's SHA-256 as 64 hex digits: not hex")
			return h, false
		}
		return h, true
	case kc.KeyEnv != "":
		key, ok := b.lookupEnv(kc.KeyEnv)
		if !ok || key == "" {
			b.add(at+".key_env", "environment variable %s is not set (it holds the key)", kc.KeyEnv)
			return h, false
		}
		return tenant.HashKey(key), true
	default:
		b.add(at, "missing key: set key_sha256 (the key's SHA-256 in hex) or key_env")
	}
	return h, false
}

func (b *builder) price(at string, pc *PriceConfig, seen map[string]string) {
	p, errs := pc.build(at)
	id := pc.Model + "\x00" + pc.EffectiveFrom.UTC().Format(time.RFC3339Nano)
	if prev, dup := seen[id]; dup && pc.Model != "" {
		b.add(at, "duplicate price for %q from %s (first at %s)", pc.Model, pc.EffectiveFrom.Format(time.RFC3339), prev)
		return
	}
	seen[id] = at
	if len(errs) > 0 {
		b.problems = append(b.problems, errs...)
		return
	}
	p.Source = "policy"
	b.tables.Prices[pc.Model] = append(b.tables.Prices[pc.Model], p)
}

// usdToMicros converts dollars to millionths exactly. The YAML number was
// decoded to the nearest float64; its shortest decimal form (what
// strconv.FormatFloat(v, 'f', -1, 64) prints, the literal itself for
// numbers of up to 15 significant digits) is converted digit by digit, so
// 12.5 is 12_500_000 and 0.1 is 100_000, never 99_999.
func usdToMicros(v float64) (int64, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, errors.New("must be a finite number")
	case v < 0:
		return 0, fmt.Errorf("must not be negative, got %v", v)
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 6 {
		return 0, fmt.Errorf("has more than 6 decimals (the unit is a millionth of a dollar), got %s", s)
	}
	n, err := strconv.ParseInt(whole+frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("is too large, got %s", s)
	}
	return n, nil
}
