package proxy

import (
	"bytes"
	"context"
	"errors"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// The rate-limit and budget services (sdk/ABI.md, "Services"). Plugins say
// what to limit and hold; the host does the mechanics natively — it reads
// the tenant's limits, formats the x-ratelimit-* headers, prices tokens,
// and settles both at the end of the request with the real usage — so a
// guest callback stays a few microseconds of Go-in-Wasm.

// anonymousTenant is the limiter tenant of a request no plugin resolved a
// tenant for.
const anonymousTenant = "-"

// meter is the per-request state of these services, kept in the exchange.
type meter struct {
	limits   []limiter.Limit // charged at admission, for the end's correction
	tokens   int64           // the token estimate charged
	mode     limiter.FailMode
	replicas int
	tenant   string
	charged  bool // tokens were charged to a TPM limit

	month string // the budget month of the hold; "" without a hold
	hold  []byte // the budget hold's id (see holdID); empty until one is made
}

// needsUsage reports whether settling needs the request's usage: tokens
// were charged to a TPM limit, or a budget hold is open.
func (m *meter) needsUsage() bool { return m.charged || m.month != "" }

func (m *meter) reset() {
	*m = meter{limits: m.limits[:0], hold: m.hold[:0]}
}

// meterOf is the request's meter; nil outside the gateway (plugin tests).
func meterOf(r *wasm.Request) *meter {
	if x, ok := r.Owner.(*exchange); ok {
		return &x.meter
	}
	return nil
}

// holdID is the id the budget counter knows the request by: an id the
// gateway made for it, never the client's X-Request-Id. The counter takes
// a repeated id for the same request (one hold, one settlement), so a
// client sending one id with many requests would otherwise have them all
// share a single hold and pay for one.
func holdID(r *wasm.Request) string {
	x, ok := r.Owner.(*exchange)
	if !ok {
		return string(r.RequestID) // plugin tests: no gateway request
	}
	if len(x.meter.hold) == 0 {
		x.meter.hold = x.s.ids.append(x.meter.hold[:0])
	}
	return string(x.meter.hold)
}

// fields splits b on spaces into at most len(dst) fields.
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

var errBadServiceRequest = wasm.ErrBadServiceRequest

// rateAdmit is ratelimit.admit. The request is a header line
// "MODE REPLICAS TOKENS" and then one line per limit:
//
//	tenant                the plan's rpm/tpm, shared by the tenant's keys
//	key                   the key's own rpm/tpm overrides, on that key alone
//	model PATTERN RPM TPM per tenant, if the model matches PATTERN (the first
//	                      matching model line applies)
//	anon RPM TPM          for a request without a tenant
//
// Lines that do not apply (no tenant, no override, no match) are skipped.
// The host sets x-ratelimit-{limit,remaining,reset}-{requests,tokens} on
// the response (and Retry-After when limited) and, when the request ends,
// corrects the tokens charged with the real usage. The result is
// "allowed", "limited requests|tokens LIMIT RETRY_AFTER_MS", "unlimited"
// (no limit applies) or "unavailable" (Redis down under fail_closed).
func (sv *services) rateAdmit(r *wasm.Request, req []byte) ([]byte, error) {
	head, rest, _ := bytes.Cut(req, []byte{'\n'})
	var buf [5][]byte
	f := fields(buf[:], head)
	if len(f) != 3 {
		return nil, errBadServiceRequest
	}
	var mode limiter.FailMode
	switch string(f[0]) {
	case "fail_open":
		mode = limiter.FailOpen
	case "fail_closed":
		mode = limiter.FailClosed
	default:
		return nil, errBadServiceRequest
	}
	replicas, ok1 := atoi(f[1])
	tokens, ok2 := atoi(f[2])
	if !ok1 || !ok2 || replicas < 0 || replicas > 1000 || tokens < 0 {
		return nil, errBadServiceRequest
	}
	m := meterOf(r)
	var local meter
	if m == nil {
		m = &local
	}
	limits := m.limits[:0]
	t := r.Tenant
	modelDone := false
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		f = fields(buf[:], line)
		if len(f) == 0 {
			continue
		}
		switch string(f[0]) {
		case "tenant":
			if t != nil && (t.PlanRPM > 0 || t.PlanTPM > 0) {
				limits = append(limits, limiter.Limit{Key: "t", RPM: max(t.PlanRPM, 0), TPM: max(t.PlanTPM, 0)})
			}
		case "key":
			if t != nil && (t.KeyRPM > 0 || t.KeyTPM > 0) {
				limits = append(limits, limiter.Limit{Key: "k:" + t.KeyID, RPM: max(t.KeyRPM, 0), TPM: max(t.KeyTPM, 0)})
			}
		case "model", "anon":
			isModel := string(f[0]) == "model"
			n := 3
			if isModel {
				n = 4
			}
			if len(f) != n {
				return nil, errBadServiceRequest
			}
			rpm, ok1 := atoi(f[n-2])
			tpm, ok2 := atoi(f[n-1])
			if !ok1 || !ok2 {
				return nil, errBadServiceRequest
			}
			switch {
			case isModel:
				if t == nil || modelDone {
					continue
				}
				if ok, _ := path.Match(string(f[1]), string(r.Model)); ok {
					modelDone = true
					limits = append(limits, limiter.Limit{Key: "m:" + string(f[1]), RPM: rpm, TPM: tpm})
				}
			case t == nil:
				limits = append(limits, limiter.Limit{Key: "anon", RPM: rpm, TPM: tpm})
			}
		default:
			return nil, errBadServiceRequest
		}
	}
	m.limits = limits
	if len(limits) == 0 {
		return []byte("unlimited"), nil
	}
	tenantID := anonymousTenant
	if t != nil {
		tenantID = t.ID
	}
	lr := limiter.Request{Tenant: tenantID, Limits: limits, Tokens: tokens, OnError: mode, Replicas: int(replicas)}
	d, err := sv.acct.limiter.Admit(context.Background(), &lr)
	if err != nil {
		if errors.Is(err, limiter.ErrUnavailable) {
			sv.acct.counts.rateUnavailable.Add(1)
			return []byte("unavailable"), nil
		}
		if errors.Is(err, limiter.ErrInvalid) {
			return nil, errBadServiceRequest
		}
		return nil, err
	}
	setRateHeaders(r, &d)
	if !d.Allowed {
		retry := max(d.RetryAfter, time.Millisecond)
		kind, limit, k := "requests", d.LimitRequests, 0
		if d.LimitRequests <= 0 || d.RemainingRequests > 0 {
			kind, limit, k = "tokens", d.LimitTokens, 1
		}
		sv.acct.counts.rateLimited[k].Add(1)
		r.AddClientHeader("Retry-After", strconv.AppendInt(nil, int64((retry+time.Second-1)/time.Second), 10))
		out := append(make([]byte, 0, 48), "limited "...)
		out = append(out, kind...)
		out = append(out, ' ')
		out = strconv.AppendInt(out, limit, 10)
		out = append(out, ' ')
		out = strconv.AppendInt(out, ms(retry), 10)
		return out, nil
	}
	for _, l := range limits {
		if l.TPM > 0 && tokens > 0 {
			m.tokens, m.mode, m.replicas, m.tenant, m.charged = tokens, mode, int(replicas), tenantID, true
			break
		}
	}
	return []byte("allowed"), nil
}

// setRateHeaders sets OpenAI's rate-limit headers for the most restrictive
// limit of each kind.
func setRateHeaders(r *wasm.Request, d *limiter.Decision) {
	var b [32]byte
	if d.LimitRequests > 0 {
		r.AddClientHeader("x-ratelimit-limit-requests", strconv.AppendInt(b[:0], d.LimitRequests, 10))
		r.AddClientHeader("x-ratelimit-remaining-requests", strconv.AppendInt(b[:0], d.RemainingRequests, 10))
		r.AddClientHeader("x-ratelimit-reset-requests", appendReset(b[:0], d.ResetRequests))
	}
	if d.LimitTokens > 0 {
		r.AddClientHeader("x-ratelimit-limit-tokens", strconv.AppendInt(b[:0], d.LimitTokens, 10))
		r.AddClientHeader("x-ratelimit-remaining-tokens", strconv.AppendInt(b[:0], d.RemainingTokens, 10))
		r.AddClientHeader("x-ratelimit-reset-tokens", appendReset(b[:0], d.ResetTokens))
	}
}

// appendReset formats a reset time as OpenAI does: "20ms", "1.5s", "6m0s".
func appendReset(dst []byte, d time.Duration) []byte {
	return append(dst, max(d, 0).Round(time.Millisecond).String()...)
}

func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// settleRate corrects the tokens charged at admission with the real usage.
func (sv *services) settleRate(m *meter, actual int64) {
	if !m.charged {
		return
	}
	m.charged = false
	delta := actual - m.tokens
	if delta == 0 {
		return
	}
	if err := sv.acct.limiter.Adjust(context.Background(), m.tenant, m.limits, delta, m.mode, m.replicas); err != nil {
		sv.log.Warn("rate limit: token correction failed", "tenant", m.tenant, "err", err)
	}
}

// cost prices tokens of r's model, rounding up to the micro.
func (sv *services) cost(r *wasm.Request, prompt, completion int64) (int64, bool) {
	if sv.prices == nil {
		return 0, false
	}
	p, err := sv.prices.Price(context.Background(), string(r.Model))
	if err != nil {
		if !errors.Is(err, tenant.ErrNotFound) {
			sv.log.Warn("price lookup failed", "model", string(r.Model), "err", err)
		}
		return 0, false
	}
	return tokensCost(prompt, p.InputMicrosPerMTok) + tokensCost(completion, p.OutputMicrosPerMTok), true
}

func tokensCost(tokens, microsPerMTok int64) int64 {
	if tokens <= 0 || microsPerMTok <= 0 {
		return 0
	}
	return (tokens*microsPerMTok + 999_999) / 1_000_000
}

// budgetMonth is the UTC month a reservation is charged to.
func budgetMonth(now time.Time) string { return now.UTC().Format("2006-01") }

// budgetReserve is budget.reserve: "PROMPT_TOKENS COMPLETION_TOKENS
// LEASE_MS". The host prices the tokens for the request's model and holds
// the amount against the tenant's monthly budget; when the request ends it
// settles the real cost (and releases the hold) by itself. Results:
//
//	ok AMOUNT REMAINING             held
//	insufficient AMOUNT REMAINING   refused
//	unlimited                       the tenant has no budget: nothing held
//	noprice                         the model has no price: nothing held
//	notenant                        no tenant is resolved
//	unavailable                     the counter (Redis) is down
func (sv *services) budgetReserve(r *wasm.Request, req []byte) ([]byte, error) {
	var buf [4][]byte
	f := fields(buf[:], req)
	if len(f) != 3 {
		return nil, errBadServiceRequest
	}
	prompt, ok1 := atoi(f[0])
	completion, ok2 := atoi(f[1])
	leaseMs, ok3 := atoi(f[2])
	if !ok1 || !ok2 || !ok3 || prompt < 0 || completion < 0 || leaseMs <= 0 {
		return nil, errBadServiceRequest
	}
	if r.Tenant == nil {
		return []byte("notenant"), nil
	}
	if r.Tenant.BudgetMicros <= 0 {
		return []byte("unlimited"), nil
	}
	amount, ok := sv.cost(r, prompt, completion)
	if !ok {
		return []byte("noprice"), nil
	}
	month := budgetMonth(sv.now())
	res, err := sv.acct.budget.Reserve(context.Background(), r.Tenant.ID, month, holdID(r), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	if err == nil && res.Admitted {
		if m := meterOf(r); m != nil {
			m.month = month
		}
	}
	return budgetResult(res, err, amount, &sv.acct.counts.budget[budgetReserveOp])
}

// budgetExtend is budget.extend: "MORE_COMPLETION_TOKENS LEASE_MS", to grow
// the hold of a stream that may run past what was reserved, and renew its
// lease. The result is as for budget.reserve.
func (sv *services) budgetExtend(r *wasm.Request, req []byte) ([]byte, error) {
	var buf [3][]byte
	f := fields(buf[:], req)
	if len(f) != 2 {
		return nil, errBadServiceRequest
	}
	more, ok1 := atoi(f[0])
	leaseMs, ok2 := atoi(f[1])
	if !ok1 || !ok2 || more < 0 || leaseMs <= 0 {
		return nil, errBadServiceRequest
	}
	if r.Tenant == nil {
		return []byte("notenant"), nil
	}
	if r.Tenant.BudgetMicros <= 0 {
		return []byte("unlimited"), nil
	}
	amount, ok := sv.cost(r, 0, more)
	if !ok {
		return []byte("noprice"), nil
	}
	month := budgetMonth(sv.now())
	m := meterOf(r)
	if m != nil && m.month != "" {
		month = m.month
	}
	res, err := sv.acct.budget.Extend(context.Background(), r.Tenant.ID, month, holdID(r), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	if err == nil && res.Admitted && m != nil {
		m.month = month
	}
	return budgetResult(res, err, amount, &sv.acct.counts.budget[budgetExtendOp])
}

// budgetResult renders a hold's result and counts it in counts.
func budgetResult(res budget.Reservation, err error, amount int64, counts *[budgetResults]atomic.Int64) ([]byte, error) {
	if err != nil {
		if errors.Is(err, budget.ErrUnavailable) {
			counts[budgetUnavailable].Add(1)
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := make([]byte, 0, 48)
	if res.Admitted {
		counts[budgetHeld].Add(1)
		out = append(out, "ok "...)
	} else {
		counts[budgetInsufficient].Add(1)
		out = append(out, "insufficient "...)
	}
	out = strconv.AppendInt(out, amount, 10)
	out = append(out, ' ')
	return strconv.AppendInt(out, res.Remaining, 10), nil
}

// settleBudget releases the request's hold and charges its real cost, and
// records the cost for the call log.
func (sv *services) settleBudget(r *wasm.Request, m *meter, prompt, completion int64) {
	if m.month == "" || r.Tenant == nil {
		return
	}
	month := m.month
	m.month = ""
	c, _ := sv.cost(r, prompt, completion)
	r.CostMicros, r.CostSettled = c, true
	if _, err := sv.acct.budget.Settle(context.Background(), r.Tenant.ID, month, holdID(r), c); err != nil {
		// The call log still records the cost; reconcile corrects the
		// counter, and the hold expires with its lease.
		sv.log.Warn("budget: settle failed", "tenant", r.Tenant.ID, "err", err)
	}
}
