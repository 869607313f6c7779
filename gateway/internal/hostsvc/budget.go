package hostsvc

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// PriceReader is what the budget services need: the cache's prices.
type PriceReader interface {
	Price(ctx context.Context, model string) (*tenant.Price, error)
}

// Budget is the budget.reserve and budget.extend services, and the
// settling of their holds.
type Budget struct {
	log     *slog.Logger
	prices  PriceReader // nil: no prices
	counter budget.Counter
	counts  *Counts
	now     func() time.Time
	newID   func(dst []byte) []byte // nil: the request's id
	alerts  AlertSink               // nil: none
	// userHeader names the header that names the end user.
	userHeader []byte

	refuseUnpriced bool
	// unpricedSeen are the models logged as unpriced (up to
	// maxUnpricedLogged, so client-chosen names matching a route's
	// pattern cannot grow it without end).
	unpricedSeen  sync.Map
	unpricedCount atomic.Int64
}

// maxUnpricedLogged bounds the models logged once each as unpriced.
const maxUnpricedLogged = 1000

// noteUnpriced logs, once per model, that model has no price.
func (b *Budget) noteUnpriced(model string) {
	if _, seen := b.unpricedSeen.Load(model); seen || b.unpricedCount.Load() >= maxUnpricedLogged {
		return
	}
	if _, seen := b.unpricedSeen.LoadOrStore(model, struct{}{}); seen {
		return
	}
	b.unpricedCount.Add(1)
	what := "served at no cost (pricing.unpriced: free)"
	if b.refuseUnpriced {
		what = "refused where a budget holds its cost (pricing.unpriced: refuse)"
	}
	b.log.Warn("model has no price: set one (admin API or tenants.prices); its requests are "+what, "model", model)
}

// holdID is the id the budget counter knows the request by: an id the
// gateway made for it, never the client's X-Request-Id. The counter takes
// a repeated id for the same request (one hold, one settlement), so a
// client sending one id with many requests would otherwise have them all
// share a single hold and pay for one.
func (b *Budget) holdID(c *Session, r *wasmhost.Request) string {
	if b.newID == nil {
		return string(r.RequestID) // plugin tests: no gateway request
	}
	m := &c.meter
	if len(m.hold) == 0 {
		m.hold = b.newID(m.hold[:0])
	}
	return string(m.hold)
}

// price is the price of r's model; false when it has none (or the
// lookup failed, which is logged).
func (b *Budget) price(r *wasmhost.Request) (*tenant.Price, bool) {
	if b.prices == nil || string(r.Endpoint) == "mcp" {
		// MCP messages are not priced: no lookup, and no "unpriced"
		// warning per tool (prepareReserve).
		return nil, false
	}
	p, err := b.prices.Price(context.Background(), string(r.Model))
	if err != nil {
		if !errors.Is(err, tenant.ErrNotFound) {
			b.log.Warn("price lookup failed", "model", string(r.Model), "err", err)
		} else if len(r.Model) > 0 {
			r.Unpriced = true
			b.noteUnpriced(string(r.Model))
		}
		return nil, false
	}
	return p, true
}

// Cost prices tokens of r's model, rounding up to the micro.
func (b *Budget) Cost(r *wasmhost.Request, prompt, completion int64) (int64, bool) {
	p, ok := b.price(r)
	if !ok {
		return 0, false
	}
	return tokensCost(prompt, p.InputMicrosPerMTok) + tokensCost(completion, p.OutputMicrosPerMTok), true
}

// UsageCost prices what r used, each kind of token at its own rate
// (tenant.Price.Cost); false when r's model has no price.
func (b *Budget) UsageCost(r *wasmhost.Request, u tenant.TokenUsage) (int64, bool) {
	p, ok := b.price(r)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// TokenUsage is a request's usage as it is priced: prompt and completion
// tokens, and the parts of them the upstream reported by kind.
func TokenUsage(prompt, completion int64, kinds wasmhost.TokenKinds) tenant.TokenUsage {
	return tenant.TokenUsage{Prompt: prompt, Completion: completion,
		CachedInput: kinds.CachedInput, CacheWrite: kinds.CacheWrite,
		AudioInput: kinds.AudioInput, ImageInput: kinds.ImageInput,
		Reasoning: kinds.Reasoning, AudioOutput: kinds.AudioOutput, ImageOutput: kinds.ImageOutput}
}

// boundCost is the most prompt and completion tokens of r's model can
// cost: every token at its side's highest rate (tenant.Price.BoundCost),
// so that a hold covers whatever kinds of token the reply reports.
func (b *Budget) boundCost(r *wasmhost.Request, prompt, completion int64) (int64, bool) {
	p, ok := b.price(r)
	if !ok {
		return 0, false
	}
	return p.BoundCost(prompt, completion), true
}

// modelFacts are r's model's facts from its price.
func (b *Budget) modelFacts(r *wasmhost.Request) wasmhost.ModelFacts {
	p, ok := b.price(r)
	if !ok {
		return wasmhost.ModelFacts{}
	}
	return wasmhost.ModelFacts{ContextWindow: p.ContextWindow, MaxOutputTokens: p.MaxOutputTokens,
		ImageTokens: p.ImageTokens, Reasoning: p.Reasoning, Known: true}
}

func tokensCost(tokens, microsPerMTok int64) int64 {
	if tokens <= 0 || microsPerMTok <= 0 {
		return 0
	}
	return (tokens*microsPerMTok + 999_999) / 1_000_000
}

// scopes returns the request's budget scopes: those fixed by its first
// hold (periods included, so a request is settled in the period it was
// admitted in), else built now from its tenant's snapshot.
func (b *Budget) scopes(c *Session, r *wasmhost.Request) []budget.Scope {
	m := &c.meter
	if m.held {
		return m.scopes
	}
	m.scopes = appendScopes(m.scopes[:0], m.snap, r, c.endUser(r, b.userHeader), b.now())
	return m.scopes
}

// Reserve is budget.reserve: "PROMPT_TOKENS COMPLETION_TOKENS
// LEASE_MS". The host prices the tokens for the request's model, each at
// the highest rate of its side (tenant.Price.BoundCost), and holds the
// amount against every budget of the request — its tenant's, its key's,
// its end user's, per month or day as the plan says — all or none; when
// the request ends it settles the real cost (and releases the holds) by
// itself. Results:
//
//	ok AMOUNT REMAINING                   held (REMAINING: the least left of any budget)
//	insufficient AMOUNT REMAINING SCOPE   refused by the budget SCOPE ("key:day",
//	                                      "tenant:month", "user:day"...), the tightest
//	unlimited                             the request has no budget: nothing held
//	noprice                               the model has no price: nothing held
//	noprice refuse                        the model has no price and the policy
//	                                      refuses such models (pricing.unpriced)
//	notenant                              no tenant is resolved
//	unavailable                           the counter (Redis) is down
func (b *Budget) Reserve(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
	h, completion, out, err := b.prepareReserve(c, r, req)
	if out != nil || err != nil {
		return out, err
	}
	c.set.meter.Before(context.Background(), h.Tenant)
	res, err := b.counter.Reserve(context.Background(), h.Tenant, h.RequestID, h.Scopes, h.Amount, h.Lease)
	return b.reserved(c, r, &h, completion, res, err)
}

// prepareReserve reads a budget.reserve request into the hold to make (its
// scopes and id kept in c's meter) and the completion tokens it covers.
// out (or err) is the answer when no hold is needed.
func (b *Budget) prepareReserve(c *Session, r *wasmhost.Request, req []byte) (h meterstore.Hold, completion int64, out []byte, err error) {
	var buf [4][]byte
	f := fields(buf[:], req)
	if len(f) != 3 {
		return h, 0, nil, errBadRequest
	}
	prompt, ok1 := atoi(f[0])
	completion, ok2 := atoi(f[1])
	leaseMs, ok3 := atoi(f[2])
	if !ok1 || !ok2 || !ok3 || prompt < 0 || completion < 0 || leaseMs <= 0 {
		return h, 0, nil, errBadRequest
	}
	if r.Tenant == nil {
		return h, 0, []byte("notenant"), nil
	}
	if string(r.Endpoint) == "mcp" {
		// An MCP message (a tool call) has no price and reports no
		// usage: it costs nothing unless a plugin charges it, and is
		// never refused for want of a price (docs/POLICY.md, "MCP
		// servers").
		return h, 0, []byte("noprice"), nil
	}
	if b.refuseUnpriced && len(r.Model) > 0 {
		if _, ok := b.price(r); !ok {
			return h, 0, []byte("noprice refuse"), nil
		}
	}
	scopes := b.scopes(c, r)
	if len(scopes) == 0 {
		return h, 0, []byte("unlimited"), nil
	}
	amount, ok := b.boundCost(r, prompt, completion)
	if !ok {
		return h, 0, b.noPrice(), nil
	}
	return meterstore.Hold{Tenant: r.Tenant.ID, RequestID: b.holdID(c, r), Scopes: scopes, Amount: amount,
		Lease: time.Duration(leaseMs) * time.Millisecond}, completion, nil, nil
}

// reserved renders the hold h's result (or error) as budget.reserve's
// answer and notes an admitted hold in c's meter.
func (b *Budget) reserved(c *Session, r *wasmhost.Request, h *meterstore.Hold, completion int64, res budget.Reservation, err error) ([]byte, error) {
	if err == nil && res.Admitted {
		c.meter.held = true
		if !res.Duplicate {
			c.meter.heldCompletion, c.meter.heldMicros = completion, h.Amount
		}
	}
	return b.result(r, res, err, h.Amount, &b.counts.Budget[BudgetReserveOp])
}

// Extend is budget.extend: "MORE_COMPLETION_TOKENS LEASE_MS", to grow
// the hold of a stream that may run past what was reserved, and renew its
// lease, in every budget the request was held against. The result is as
// for budget.reserve.
func (b *Budget) Extend(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
	var buf [3][]byte
	f := fields(buf[:], req)
	if len(f) != 2 {
		return nil, errBadRequest
	}
	more, ok1 := atoi(f[0])
	leaseMs, ok2 := atoi(f[1])
	if !ok1 || !ok2 || more < 0 || leaseMs <= 0 {
		return nil, errBadRequest
	}
	if r.Tenant == nil {
		return []byte("notenant"), nil
	}
	scopes := b.scopes(c, r)
	if len(scopes) == 0 {
		return []byte("unlimited"), nil
	}
	amount, ok := b.boundCost(r, 0, more)
	if !ok {
		return []byte("noprice"), nil
	}
	c.set.meter.Before(context.Background(), r.Tenant.ID)
	res, err := b.counter.Extend(context.Background(), r.Tenant.ID, b.holdID(c, r), scopes, amount,
		time.Duration(leaseMs)*time.Millisecond)
	if err == nil && res.Admitted {
		m := &c.meter
		m.held = true
		if res.Recreated {
			m.heldCompletion, m.heldMicros = 0, 0 // the earlier hold is gone
		}
		m.heldCompletion += more
		m.heldMicros += amount
	}
	return b.result(r, res, err, amount, &b.counts.Budget[BudgetExtendOp])
}

// noPrice is the answer for a model without a price.
func (b *Budget) noPrice() []byte {
	if b.refuseUnpriced {
		return []byte("noprice refuse")
	}
	return []byte("noprice")
}

// result renders a hold's result, counts it in counts and reports a
// refusal to the alert sink.
func (b *Budget) result(r *wasmhost.Request, res budget.Reservation, err error, amount int64, counts *[BudgetResults]atomic.Int64) ([]byte, error) {
	if err != nil {
		if errors.Is(err, budget.ErrUnavailable) {
			counts[BudgetUnavailable].Add(1)
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := make([]byte, 0, 56)
	if res.Admitted {
		counts[BudgetHeld].Add(1)
		out = append(out, "ok "...)
	} else {
		counts[BudgetInsufficient].Add(1)
		out = append(out, "insufficient "...)
	}
	out = strconv.AppendInt(out, amount, 10)
	out = append(out, ' ')
	out = strconv.AppendInt(out, res.Remaining, 10)
	if s := res.Refused; s != nil {
		out = appendScopeName(append(out, ' '), s)
		if b.alerts != nil {
			b.alerts.Exhausted(context.Background(), r.Tenant.ID, *s, res.Spent)
		}
	}
	return out, nil
}

// settlement releases the request's holds and prices its real cost, to
// be charged in each of its budgets: it records the cost in r for the call
// log and counts an overrun of the hold. The settle to make is returned
// (made in c's meter), nil when there is none; settled finishes it.
func (b *Budget) settlement(c *Session, r *wasmhost.Request, prompt, completion int64) *meterstore.Settlement {
	m := &c.meter
	if !m.held || r.Tenant == nil {
		return nil
	}
	m.held = false
	cost, _ := b.UsageCost(r, TokenUsage(prompt, completion, r.TokenKindsUsed))
	r.CostMicros, r.CostSettled = cost, true
	if over := cost - m.heldMicros; over > 0 {
		// The hold was not an upper bound (a wrong price bound, an
		// unbounded part, default_max_tokens below the reply): charged
		// all the same, and counted.
		b.counts.BudgetOverruns.Add(1)
		b.counts.BudgetOverrunMicros.Add(over)
		b.log.Warn("budget: settled cost above the hold", "tenant", r.Tenant.ID, "model", string(r.Model),
			"cost_micros", cost, "held_micros", m.heldMicros)
	}
	m.settlement = meterstore.Settlement{Tenant: r.Tenant.ID, RequestID: b.holdID(c, r), Scopes: m.scopes, Actual: cost}
	return &m.settlement
}

// settled passes the alert thresholds a settle crossed to the alert sink,
// or logs its failure.
func (b *Budget) settled(tenant string, crossed []budget.Crossing, err error) {
	if err != nil {
		// The call log still records the cost; reconcile corrects the
		// counters, and the holds expire with their lease.
		b.log.Warn("budget: settle failed", "tenant", tenant, "err", err)
		return
	}
	if len(crossed) > 0 && b.alerts != nil {
		b.alerts.Crossed(context.Background(), crossed)
	}
}

// shrinkToInput lowers the request's hold once the upstream has reported
// the prompt's true token count (input, every kind included) before the
// reply: to the bound cost of those tokens and of the completion tokens
// the hold covers. The counter never raises a hold, so a count above the
// reserved bound changes nothing. A request with parts the body could not
// bound keeps its hold: server-side tools may add input as the reply goes.
func (b *Budget) shrinkToInput(c *Session, r *wasmhost.Request, input int64) {
	m := &c.meter
	if !m.held || r.Tenant == nil || input < 0 || r.Bound.Unbounded > 0 {
		return
	}
	to, ok := b.boundCost(r, input, m.heldCompletion)
	if !ok {
		return
	}
	if to >= m.heldMicros {
		return
	}
	m.heldMicros = to
	if err := b.counter.Shrink(context.Background(), r.Tenant.ID, b.holdID(c, r), m.scopes, to); err != nil {
		// The hold stays as it was: only budget is kept back, not lost.
		b.log.Warn("budget: shrink failed", "tenant", r.Tenant.ID, "err", err)
	}
}
