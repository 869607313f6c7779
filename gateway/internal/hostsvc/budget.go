package hostsvc

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
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

// price is the price of r's model; false when it has none.
func (b *Budget) price(r *wasmhost.Request) (*tenant.Price, bool) {
	if b.prices == nil {
		return nil, false
	}
	p, err := b.prices.Price(context.Background(), string(r.Model))
	if err != nil {
		if !errors.Is(err, tenant.ErrNotFound) {
			b.log.Warn("price lookup failed", "model", string(r.Model), "err", err)
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

// budgetMonth is the UTC month a reservation is charged to.
func budgetMonth(now time.Time) string { return now.UTC().Format("2006-01") }

// Reserve is budget.reserve: "PROMPT_TOKENS COMPLETION_TOKENS
// LEASE_MS". The host prices the tokens for the request's model, each at
// the highest rate of its side (tenant.Price.BoundCost), and holds
// the amount against the tenant's monthly budget; when the request ends it
// settles the real cost (and releases the hold) by itself. Results:
//
//	ok AMOUNT REMAINING             held
//	insufficient AMOUNT REMAINING   refused
//	unlimited                       the tenant has no budget: nothing held
//	noprice                         the model has no price: nothing held
//	notenant                        no tenant is resolved
//	unavailable                     the counter (Redis) is down
func (b *Budget) Reserve(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
	var buf [4][]byte
	f := fields(buf[:], req)
	if len(f) != 3 {
		return nil, errBadRequest
	}
	prompt, ok1 := atoi(f[0])
	completion, ok2 := atoi(f[1])
	leaseMs, ok3 := atoi(f[2])
	if !ok1 || !ok2 || !ok3 || prompt < 0 || completion < 0 || leaseMs <= 0 {
		return nil, errBadRequest
	}
	if r.Tenant == nil {
		return []byte("notenant"), nil
	}
	if r.Tenant.BudgetMicros <= 0 {
		return []byte("unlimited"), nil
	}
	amount, ok := b.boundCost(r, prompt, completion)
	if !ok {
		return []byte("noprice"), nil
	}
	month := budgetMonth(b.now())
	res, err := b.counter.Reserve(context.Background(), r.Tenant.ID, month, b.holdID(c, r), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	if err == nil && res.Admitted {
		c.meter.month = month
		if !res.Duplicate {
			c.meter.heldCompletion, c.meter.heldMicros = completion, amount
		}
	}
	return budgetResult(res, err, amount, &b.counts.Budget[BudgetReserveOp])
}

// Extend is budget.extend: "MORE_COMPLETION_TOKENS LEASE_MS", to grow
// the hold of a stream that may run past what was reserved, and renew its
// lease. The result is as for budget.reserve.
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
	if r.Tenant.BudgetMicros <= 0 {
		return []byte("unlimited"), nil
	}
	amount, ok := b.boundCost(r, 0, more)
	if !ok {
		return []byte("noprice"), nil
	}
	month := budgetMonth(b.now())
	m := &c.meter
	if m.month != "" {
		month = m.month
	}
	res, err := b.counter.Extend(context.Background(), r.Tenant.ID, month, b.holdID(c, r), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	if err == nil && res.Admitted {
		m.month = month
		if res.Recreated {
			m.heldCompletion, m.heldMicros = 0, 0 // the earlier hold is gone
		}
		m.heldCompletion += more
		m.heldMicros += amount
	}
	return budgetResult(res, err, amount, &b.counts.Budget[BudgetExtendOp])
}

// budgetResult renders a hold's result and counts it in counts.
func budgetResult(res budget.Reservation, err error, amount int64, counts *[BudgetResults]atomic.Int64) ([]byte, error) {
	if err != nil {
		if errors.Is(err, budget.ErrUnavailable) {
			counts[BudgetUnavailable].Add(1)
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := make([]byte, 0, 48)
	if res.Admitted {
		counts[BudgetHeld].Add(1)
		out = append(out, "ok "...)
	} else {
		counts[BudgetInsufficient].Add(1)
		out = append(out, "insufficient "...)
	}
	out = strconv.AppendInt(out, amount, 10)
	out = append(out, ' ')
	return strconv.AppendInt(out, res.Remaining, 10), nil
}

// settle releases the request's hold and charges its real cost, and
// records the cost for the call log.
func (b *Budget) settle(c *Session, r *wasmhost.Request, prompt, completion int64) {
	m := &c.meter
	if m.month == "" || r.Tenant == nil {
		return
	}
	month := m.month
	m.month = ""
	cost, _ := b.Cost(r, prompt, completion)
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
	if _, err := b.counter.Settle(context.Background(), r.Tenant.ID, month, b.holdID(c, r), cost); err != nil {
		// The call log still records the cost; reconcile corrects the
		// counter, and the hold expires with its lease.
		b.log.Warn("budget: settle failed", "tenant", r.Tenant.ID, "err", err)
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
	if m.month == "" || r.Tenant == nil || input < 0 || r.Bound.Unbounded > 0 {
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
	if err := b.counter.Shrink(context.Background(), r.Tenant.ID, m.month, b.holdID(c, r), to); err != nil {
		// The hold stays as it was: only budget is kept back, not lost.
		b.log.Warn("budget: shrink failed", "tenant", r.Tenant.ID, "err", err)
	}
}
