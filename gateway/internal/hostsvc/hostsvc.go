package hostsvc

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// Service is one host service: it answers req, the guest's bytes (copied:
// a service may keep them), for the request r of the session c. Errors
// wasmhost.ErrBadServiceRequest and wasmhost.ErrNoService map to the ABI's
// INVALID and UNAVAILABLE codes; any other error is UNAVAILABLE.
type Service interface {
	Serve(c *Session, r *wasmhost.Request, req []byte) ([]byte, error)
}

// ServiceFunc is a Service written as a function (or a method value).
type ServiceFunc func(c *Session, r *wasmhost.Request, req []byte) ([]byte, error)

// Serve implements Service.
func (f ServiceFunc) Serve(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
	return f(c, r, req)
}

var (
	_ Service              = ServiceFunc(nil)
	_ Service              = (*Tenants)(nil)
	_ Service              = (*RateLimits)(nil)
	_ wasmhost.Services    = (*Session)(nil)
	_ wasmhost.ModelFacter = (*Session)(nil)
)

// Config is what a Set's services are built from. Nil fields mean the
// service they feed is absent or does without.
type Config struct {
	Log *slog.Logger
	// Tenants backs tenant.resolve; nil: no such service.
	Tenants KeyResolver
	// Prices prices tokens for the budget services and Cost; nil: no
	// prices (budget.* answer "noprice").
	Prices  PriceReader
	Limiter limiter.Limiter
	Budget  budget.Counter
	// Counts receives the services' decisions, for metrics; nil: not
	// counted.
	Counts *Counts
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID appends a fresh id to dst: the id a budget hold is known by.
	// Nil means the request's own id (plugin tests).
	NewID func(dst []byte) []byte
	// Alerts receives budget threshold crossings and refusals; nil: none.
	Alerts AlertSink
	// EndUserHeader names the request header that names the end user
	// (user budgets, the call log); "" means DefaultEndUserHeader.
	EndUserHeader string
	// RefuseUnpriced is the policy's pricing.unpriced: refuse. A model
	// without a price then gets "noprice refuse" from budget.reserve,
	// whatever the tenant's budget, and the budget plugin refuses it;
	// otherwise it is served at no cost.
	RefuseUnpriced bool
	// Callout serves the `http` service of dispatched calls; nil: no
	// plugin may call out.
	Callout *callout.Service
	// Cache backs cache.lookup and cache.skip (the response cache); nil:
	// no such services, unless OpenCache is set: it opens the store at the
	// first lookup (a policy whose plugins never ask pays nothing). Their
	// counts go to Counts.Cache.
	Cache     *respcache.Store
	OpenCache func() (*respcache.Store, error)
}

// Set is the host services of one policy state, registered by their ABI
// names. It is immutable once built and shared by every request of that
// state.
type Set struct {
	byName map[string]Service
	rate   *RateLimits
	budget *Budget
	meter  *meterstore.Store // the rate limiter and the budget counter together
	// together: ratelimit.admit and budget.reserve are the Set's own, so
	// StartBatch may serve them together.
	together bool
	tenants  *Tenants
	callout  *callout.Service
	cache    *Cache
	log      *slog.Logger
}

// NewSet builds and registers the gateway's services: tenant.resolve (when
// cfg.Tenants is set), ratelimit.admit, budget.reserve and budget.extend.
func NewSet(cfg Config) *Set {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Counts == nil {
		cfg.Counts = new(Counts)
	}
	s := &Set{byName: make(map[string]Service, 4), callout: cfg.Callout, log: cfg.Log}
	if cfg.Tenants != nil {
		s.tenants = &Tenants{log: cfg.Log, keys: cfg.Tenants, now: cfg.Now}
		s.Register("tenant.resolve", s.tenants)
	}
	s.rate = &RateLimits{log: cfg.Log, limiter: cfg.Limiter, counts: cfg.Counts}
	s.Register("ratelimit.admit", s.rate)
	if cfg.EndUserHeader == "" {
		cfg.EndUserHeader = DefaultEndUserHeader
	}
	s.budget = &Budget{log: cfg.Log, prices: cfg.Prices, counter: cfg.Budget, counts: cfg.Counts, now: cfg.Now, newID: cfg.NewID,
		alerts: cfg.Alerts, userHeader: []byte(cfg.EndUserHeader), refuseUnpriced: cfg.RefuseUnpriced}
	s.meter = meterstore.New(cfg.Limiter, cfg.Budget)
	s.meter.OnEnd(s.ended)
	s.meter.CountEnds(&cfg.Counts.Ends)
	s.meter.CountShared(&cfg.Counts.Shared[0], &cfg.Counts.Shared[1])
	s.Register("budget.reserve", ServiceFunc(s.budget.Reserve))
	s.Register("budget.extend", ServiceFunc(s.budget.Extend))
	s.together = true
	if cfg.Cache != nil || cfg.OpenCache != nil {
		s.cache = &Cache{store: cfg.Cache, open: cfg.OpenCache, log: cfg.Log, counts: &cfg.Counts.Cache, now: cfg.Now}
		s.Register(CacheLookupService, ServiceFunc(func(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
			ctx := r.Context
			if ctx == nil {
				ctx = context.Background()
			}
			return c.cacheLookup(ctx, r, req, false) // a `call` holds its instance: it never waits on another request
		}))
		s.Register(CacheSkipService, ServiceFunc(func(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
			return c.cacheSkip(r, req)
		}))
	}
	return s
}

// SetPlugins makes tenant.resolve apply the plans' and tenants' plugin
// overrides, compiled by pc for the state's pipeline. Call it while
// building the state, before the Set serves a request.
func (s *Set) SetPlugins(pc PluginCompiler) {
	if s.tenants != nil {
		s.tenants.plugins = pc
	}
}

// Register serves svc under the ABI name; a later registration of the
// same name replaces it. Register only while building the Set.
func (s *Set) Register(name string, svc Service) {
	if name == admitService || name == reserveService {
		s.together = false
	}
	s.byName[name] = svc
}

// Cost prices tokens of r's model, rounding up to the micro; false when
// the model has no price.
func (s *Set) Cost(r *wasmhost.Request, prompt, completion int64) (int64, bool) {
	return s.budget.Cost(r, prompt, completion)
}

// UsageCost prices u, what r used, for r's model; false when the model
// has no price.
func (s *Set) UsageCost(r *wasmhost.Request, u tenant.TokenUsage) (int64, bool) {
	return s.budget.UsageCost(r, u)
}

// Session is one request's binding of a Set: the wasmhost.Services its
// plugins call, and the request's meter. It lives inside the request's
// own state (no allocation per request); Bind it before the first phase
// and Reset it when the request is freed.
type Session struct {
	set   *Set
	meter Meter
	cache cacheState
}

// Bind attaches the session to set.
func (c *Session) Bind(set *Set) { c.set = set }

// Reset detaches the session and clears its meter, keeping its buffers.
func (c *Session) Reset() {
	c.set = nil
	c.meter.reset()
	c.cache.reset()
}

// AllowedModels is the plan's allowed-model patterns of the tenant
// tenant.resolve found for the request (none: every model); resolved
// false when it found none. The slice is the tenant cache's: read only.
func (c *Session) AllowedModels() (patterns []string, resolved bool) {
	if c.meter.snap == nil {
		return nil, false
	}
	return c.meter.snap.Plan.AllowedModels, true
}

// Call implements wasmhost.Services: the service registered under name.
func (c *Session) Call(r *wasmhost.Request, name string, req []byte) ([]byte, error) {
	if c.set == nil {
		return nil, wasmhost.ErrNoService
	}
	svc := c.set.byName[name]
	if svc == nil {
		return nil, wasmhost.ErrNoService
	}
	return svc.Serve(c, r, req)
}

// endUser returns the request's end user ("" for none), read once per
// request (see endUserOf).
func (c *Session) endUser(r *wasmhost.Request, header []byte) string {
	m := &c.meter
	if !m.userDone {
		m.user, m.userDone = endUserOf(r, header), true
	}
	return m.user
}

// EndUser returns the end user r names ("" for none): the end-user header,
// else the body's user or safety_identifier. The call log records it.
func (c *Session) EndUser(r *wasmhost.Request) string {
	if c.set == nil || r == nil {
		return ""
	}
	return c.endUser(r, c.set.budget.userHeader)
}

// NeedsUsage reports whether Settle needs the request's usage: tokens were
// charged to a TPM limit, or a budget hold is open.
func (c *Session) NeedsUsage() bool { return c.meter.needsUsage() }

// Settle corrects the request's rate-limit charge and settles its budget
// hold with the real usage (prompt and completion tokens), recording the
// cost in r for the call log: both in one round trip to Redis
// (meterstore.Store.AdjustSettle), before the reply's last byte goes out —
// or, when the request's admission and hold were made together, in a call
// the reply does not wait for and which the tenant's next admission on
// this gateway carries in its own round trip (meterstore.Store.End). Either
// way a client's next request sees the counters already corrected.
func (c *Session) Settle(r *wasmhost.Request, prompt, completion int64) {
	if c.set == nil {
		return
	}
	set := c.set
	corr := set.rate.correction(&c.meter, prompt+completion)
	st := set.budget.settlement(c, r, prompt, completion)
	if corr == nil && st == nil {
		return
	}
	if out, deferred := set.meter.End(corr, st, c.meter.seq); !deferred {
		set.ended(corr, st, out)
	}
}

// ended logs what a request's end (token correction, settle) did and hands
// the alert thresholds it crossed on, whether it was made before the
// reply's last byte or after it (meterstore.Store.End).
func (s *Set) ended(corr *meterstore.Correction, st *meterstore.Settlement, out meterstore.Settled) {
	if out.AdjustErr != nil && corr != nil {
		s.log.Warn("rate limit: token correction failed", "tenant", corr.Tenant, "err", out.AdjustErr)
	}
	if st != nil {
		s.budget.settled(st.Tenant, out.Crossed, out.SettleErr)
	}
}

// WaitEnds waits for the ends made after the reply's last byte to be
// answered; call it before the Redis client closes.
func (s *Set) WaitEnds() { s.meter.Wait() }

// ModelFacts implements wasmhost.ModelFacter: the request's model's facts
// from its price (nothing known without a Set or a price).
func (c *Session) ModelFacts(r *wasmhost.Request) wasmhost.ModelFacts {
	if c.set == nil {
		return wasmhost.ModelFacts{}
	}
	return c.set.budget.modelFacts(r)
}

// InputKnown tells the session the prompt's true token count (every kind
// of input token) as the upstream reported it before the reply (Anthropic's
// message_start): the budget hold shrinks to what the prompt really costs
// plus the completion it covers, giving the rest back at once.
func (c *Session) InputKnown(r *wasmhost.Request, input int64) {
	if c.set == nil {
		return
	}
	c.set.budget.shrinkToInput(c, r, input)
}

// Counts count the services' decisions; they outlive policy reloads.
type Counts struct {
	// RateLimited counts ratelimit.admit answers "limited", by the limit
	// that was reached: requests, tokens.
	RateLimited [2]atomic.Int64
	// RateUnavailable counts "unavailable" (Redis down, fail_closed).
	RateUnavailable atomic.Int64
	// Budget counts budget.reserve and budget.extend answers by operation
	// (BudgetReserveOp, BudgetExtendOp) and result (BudgetHeld...).
	Budget [2][BudgetResults]atomic.Int64
	// BudgetOverruns counts settlements whose cost was above the
	// request's hold, and BudgetOverrunMicros by how much in all: the
	// hold was not an upper bound.
	BudgetOverruns, BudgetOverrunMicros atomic.Int64
	// Cache counts the response cache's services.
	Cache CacheCounts
	// Ends counts the requests' ends (token correction and settle) made
	// before the reply's last byte and after it, and the copies carried.
	Ends meterstore.EndCounts
	// Shared counts the admissions (0) and the ends made before the last
	// byte (1) that shared a Redis call, and the calls.
	Shared [2]meterstore.SharedCounts
}

// Budget service operations and results, as indices of Counts.Budget.
const (
	BudgetReserveOp = 0
	BudgetExtendOp  = 1

	BudgetHeld         = 0
	BudgetInsufficient = 1
	BudgetUnavailable  = 2
	BudgetResults      = 3
)

var (
	// BudgetOps names Counts.Budget's operations, for metric labels.
	BudgetOps = [2]string{"reserve", "extend"}
	// BudgetResultNames names Counts.Budget's results, for metric labels.
	BudgetResultNames = [BudgetResults]string{"held", "insufficient", "unavailable"}
)

var errBadRequest = wasmhost.ErrBadServiceRequest

// fields splits b on spaces into at most cap(dst) fields.
func fields(dst [][]byte, b []byte) [][]byte {
	dst = dst[:0]
	for len(b) > 0 && len(dst) < cap(dst) {
		i := bytes.IndexByte(b, ' ')
		if i < 0 {
			return append(dst, b)
		}
		if i > 0 {
			dst = append(dst, b[:i])
		}
		b = b[i+1:]
	}
	return dst
}

func atoi(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}
