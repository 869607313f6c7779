// Package tenant defines what the gateway knows about the callers of its
// API: tenants, their plans, their API keys and model prices, and the Store
// interface the Postgres and in-memory stores implement. Values handed out
// by a Store or the cache are immutable snapshots: never modify them.
package tenant

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"
)

// ErrNotFound is returned by a Store for an unknown key, tenant, plan or
// price. An unknown key and a revoked one look the same to the client.
var ErrNotFound = errors.New("not found")

// KeyHash is the SHA-256 of an API key. Keys are stored and looked up only
// by their hash.
type KeyHash [32]byte

// HashKey returns the hash of a presented API key.
func HashKey(key string) KeyHash { return sha256.Sum256([]byte(key)) }

// Statuses of tenants and keys.
const (
	StatusActive    = "active"
	StatusSuspended = "suspended" // tenants
	StatusRevoked   = "revoked"   // keys
)

// Limits are request limits. Zero means "not set" (inherit or unlimited).
type Limits struct {
	RPM       int64 // requests per minute
	TPM       int64 // tokens per minute
	MaxTokens int64 // cap on a request's max_tokens
}

// Plan is what a tenant pays for.
type Plan struct {
	ID string
	// MonthlyBudgetMicros is the tenant's monthly budget in millionths of a
	// currency unit (USD micros); 0 means none. It is the limit of the
	// tenant/month rule of Budgets (see PlanBudgets).
	MonthlyBudgetMicros int64
	// Budgets are every budget of the plan, the tenant/month one included,
	// each scope and window at most once (see PlanBudgets); nil: none.
	Budgets []BudgetRule
	Limits
	// AllowedModels are exact names or path.Match patterns; empty allows
	// every routed model.
	AllowedModels []string
	// Plugins switch the policy's plugins on or off for the plan's
	// tenants and override their config; nil: none.
	Plugins PluginOverrides
}

// Tenant is a customer of the gateway.
type Tenant struct {
	ID     string
	Status string
	PlanID string
	// Plugins are the tenant's own plugin overrides, applied over its
	// plan's; nil: none.
	Plugins PluginOverrides
}

// Key is an API key's record; the key itself is never stored.
type Key struct {
	ID        string
	TenantID  string
	Hash      KeyHash
	Prefix    string // the first characters, for display ("tg_live_ab12")
	Status    string
	ExpiresAt time.Time // zero: never
	Limits    Limits    // per-key overrides; zero fields inherit the plan's
	// Budget is the key's own budget, replacing the plan's key budgets;
	// zero: the plan's apply.
	Budget KeyBudget
}

// Snapshot is everything the request path needs about a presented key:
// the key, its tenant and the tenant's plan, read together. It is built
// once per load and never modified.
type Snapshot struct {
	Key    Key
	Tenant Tenant
	Plan   Plan
	// LoadedAt is when the snapshot was read from the store.
	LoadedAt time.Time
	// Plugins are the plan's and tenant's plugin overrides; nil when
	// neither has any (see NewPluginSet).
	Plugins *PluginSet
}

// Effective returns the limits that apply: the key's where set, else the
// plan's.
func (s *Snapshot) Effective() Limits {
	l := s.Plan.Limits
	if s.Key.Limits.RPM > 0 {
		l.RPM = s.Key.Limits.RPM
	}
	if s.Key.Limits.TPM > 0 {
		l.TPM = s.Key.Limits.TPM
	}
	if s.Key.Limits.MaxTokens > 0 {
		l.MaxTokens = s.Key.Limits.MaxTokens
	}
	return l
}

// Usable reports whether the key may be used at now: key and tenant active,
// key not expired.
func (s *Snapshot) Usable(now time.Time) bool {
	return s.Key.Status == StatusActive && s.Tenant.Status == StatusActive &&
		(s.Key.ExpiresAt.IsZero() || now.Before(s.Key.ExpiresAt))
}

// Price is a model's price per million tokens, in USD micros, from
// EffectiveFrom on, and the bounds of what one request to it can use.
// A rate of a kind of token that is 0 is not set and falls back to the
// input or output rate; bounds that are 0 are unknown.
type Price struct {
	Model               string
	InputMicrosPerMTok  int64
	OutputMicrosPerMTok int64
	EffectiveFrom       time.Time

	// Rates of the kinds of TokenUsage; 0 falls back to Input (the first
	// four) or Output (the last three).
	CachedInputMicrosPerMTok int64
	CacheWriteMicrosPerMTok  int64
	AudioInputMicrosPerMTok  int64
	ImageInputMicrosPerMTok  int64
	ReasoningMicrosPerMTok   int64
	AudioOutputMicrosPerMTok int64
	ImageOutputMicrosPerMTok int64

	// ContextWindow is the most input tokens a request can have (0:
	// unknown); MaxOutputTokens the most output tokens a reply can have
	// without max_tokens (0: unknown).
	ContextWindow   int64
	MaxOutputTokens int64
	// ImageTokens is the most input tokens one image can count for
	// (0: unknown).
	ImageTokens int64
	// Reasoning reports a model whose replies may include hidden
	// reasoning tokens: its streamed text does not bound its output.
	Reasoning bool
	// Source says where the price came from: "catalog <version>",
	// "policy", "admin"; for logs and the admin API.
	Source string
}

// Store reads tenant data. Implementations: store/pg (Postgres) and
// store/mem (the policy's YAML, the embedded default). Reads on the
// request path go through the cache, never straight to a Store.
type Store interface {
	// KeyByHash returns the snapshot for a key hash, or ErrNotFound.
	KeyByHash(ctx context.Context, h KeyHash) (*Snapshot, error)
	// Price returns the price of model in force at, or ErrNotFound.
	Price(ctx context.Context, model string, at time.Time) (*Price, error)
}
