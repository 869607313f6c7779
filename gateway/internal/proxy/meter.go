package proxy

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/wasm"
)

// The rate-limit and budget services. Their requests and results are short
// text lines of space-separated fields, documented in sdk/ABI.md
// ("Services") and parsed here without allocation beyond the result.

// anonymousTenant is the limiter and budget tenant of a request no plugin
// resolved a tenant for.
const anonymousTenant = "-"

func tenantOf(r *wasm.Request) string {
	if r.Tenant == nil {
		return anonymousTenant
	}
	return r.Tenant.ID
}

// fields splits b on spaces and newlines into at most len(dst) fields.
func fields(dst [][]byte, b []byte) [][]byte {
	dst = dst[:0]
	for len(b) > 0 {
		i := bytes.IndexAny(b, " \n")
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

// failMode reads "fail_open" / "fail_closed".
func failMode(b []byte) (limiter.FailMode, bool) {
	switch string(b) {
	case "fail_open":
		return limiter.FailOpen, true
	case "fail_closed":
		return limiter.FailClosed, true
	}
	return 0, false
}

// parseLimits reads the header line "MODE REPLICAS N" and then one line
// "KEY RPM TPM" per limit.
func parseLimits(req []byte, limits []limiter.Limit) (mode limiter.FailMode, replicas int, n int64, _ []limiter.Limit, err error) {
	head, rest, _ := bytes.Cut(req, []byte{'\n'})
	var buf [4][]byte
	f := fields(buf[:0], head)
	if len(f) != 3 {
		return 0, 0, 0, nil, errBadServiceRequest
	}
	var ok1, ok2, ok3 bool
	mode, ok1 = failMode(f[0])
	r, ok2 := atoi(f[1])
	n, ok3 = atoi(f[2])
	if !ok1 || !ok2 || !ok3 || r < 0 || r > 1000 {
		return 0, 0, 0, nil, errBadServiceRequest
	}
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte{'\n'})
		f = fields(buf[:0], line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return 0, 0, 0, nil, errBadServiceRequest
		}
		rpm, ok1 := atoi(f[1])
		tpm, ok2 := atoi(f[2])
		if !ok1 || !ok2 {
			return 0, 0, 0, nil, errBadServiceRequest
		}
		limits = append(limits, limiter.Limit{Key: string(f[0]), RPM: rpm, TPM: tpm})
	}
	return mode, int(r), n, limits, nil
}

// rateAdmit is ratelimit.admit: "MODE REPLICAS TOKENS" then "KEY RPM TPM"
// lines. The result is "allowed" or "limited" followed by LIMIT_REQ
// REMAINING_REQ RESET_REQ_MS LIMIT_TOK REMAINING_TOK RESET_TOK_MS
// RETRY_AFTER_MS FALLBACK(0|1), or "unavailable" (Redis down, fail_closed).
func (sv *services) rateAdmit(r *wasm.Request, req []byte) ([]byte, error) {
	var lbuf [8]limiter.Limit
	mode, replicas, tokens, limits, err := parseLimits(req, lbuf[:0])
	if err != nil || len(limits) == 0 {
		return nil, errBadServiceRequest
	}
	lr := limiter.Request{Tenant: tenantOf(r), Limits: limits, Tokens: tokens, OnError: mode, Replicas: replicas}
	d, err := sv.acct.limiter.Admit(context.Background(), &lr)
	if err != nil {
		if errors.Is(err, limiter.ErrUnavailable) {
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := make([]byte, 0, 96)
	if d.Allowed {
		out = append(out, "allowed"...)
	} else {
		out = append(out, "limited"...)
	}
	for _, v := range [...]int64{d.LimitRequests, d.RemainingRequests, ms(d.ResetRequests),
		d.LimitTokens, d.RemainingTokens, ms(d.ResetTokens), ms(d.RetryAfter), b2i(d.Fallback)} {
		out = append(out, ' ')
		out = strconv.AppendInt(out, v, 10)
	}
	return out, nil
}

// rateAdjust is ratelimit.adjust: "MODE REPLICAS DELTA" then the limits of
// the admission. The result is "ok" or "unavailable".
func (sv *services) rateAdjust(r *wasm.Request, req []byte) ([]byte, error) {
	var lbuf [8]limiter.Limit
	mode, replicas, delta, limits, err := parseLimits(req, lbuf[:0])
	if err != nil {
		return nil, errBadServiceRequest
	}
	if err := sv.acct.limiter.Adjust(context.Background(), tenantOf(r), limits, delta, mode, replicas); err != nil {
		if errors.Is(err, limiter.ErrUnavailable) {
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	return []byte("ok"), nil
}

func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
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
// the amount against the tenant's monthly budget. Results:
//
//	ok MONTH AMOUNT SPENT RESERVED REMAINING
//	insufficient MONTH AMOUNT SPENT RESERVED REMAINING
//	unlimited            the tenant has no budget: nothing reserved
//	noprice              the model has no price: nothing reserved
//	notenant             no tenant is resolved
//	unavailable          the counter (Redis) is down
func (sv *services) budgetReserve(r *wasm.Request, req []byte) ([]byte, error) {
	var buf [4][]byte
	f := fields(buf[:0], req)
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
	res, err := sv.acct.budget.Reserve(context.Background(), r.Tenant.ID, month, string(r.RequestID), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	return budgetResult(res, err, month, amount)
}

// budgetExtend is budget.extend: "MONTH MORE_COMPLETION_TOKENS LEASE_MS",
// to grow the hold of a stream that may run past what was reserved. The
// result is as for budget.reserve.
func (sv *services) budgetExtend(r *wasm.Request, req []byte) ([]byte, error) {
	var buf [4][]byte
	f := fields(buf[:0], req)
	if len(f) != 3 {
		return nil, errBadServiceRequest
	}
	more, ok1 := atoi(f[1])
	leaseMs, ok2 := atoi(f[2])
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
	month := string(f[0])
	res, err := sv.acct.budget.Extend(context.Background(), r.Tenant.ID, month, string(r.RequestID), amount, r.Tenant.BudgetMicros,
		time.Duration(leaseMs)*time.Millisecond)
	return budgetResult(res, err, month, amount)
}

func budgetResult(res budget.Reservation, err error, month string, amount int64) ([]byte, error) {
	if err != nil {
		if errors.Is(err, budget.ErrUnavailable) {
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := make([]byte, 0, 80)
	if res.Admitted {
		out = append(out, "ok "...)
	} else {
		out = append(out, "insufficient "...)
	}
	out = append(out, month...)
	for _, v := range [...]int64{amount, res.Spent, res.Reserved, res.Remaining} {
		out = append(out, ' ')
		out = strconv.AppendInt(out, v, 10)
	}
	return out, nil
}

// budgetSettle is budget.settle: "MONTH PROMPT_TOKENS COMPLETION_TOKENS",
// the usage to charge (normally the upstream's, else the gateway's count).
// The host prices it, releases the hold, adds the cost to the month's
// spend, and records it as the request's cost for the call log. The result
// is "ok COST SPENT", "unavailable" (the call log still records the cost,
// and the reconcile job corrects the counter) or "notenant".
func (sv *services) budgetSettle(r *wasm.Request, req []byte) ([]byte, error) {
	var buf [4][]byte
	f := fields(buf[:0], req)
	if len(f) != 3 {
		return nil, errBadServiceRequest
	}
	prompt, ok1 := atoi(f[1])
	completion, ok2 := atoi(f[2])
	if !ok1 || !ok2 || prompt < 0 || completion < 0 {
		return nil, errBadServiceRequest
	}
	if r.Tenant == nil {
		return []byte("notenant"), nil
	}
	c, _ := sv.cost(r, prompt, completion)
	r.CostMicros, r.CostSettled = c, true
	spent, err := sv.acct.budget.Settle(context.Background(), r.Tenant.ID, string(f[0]), string(r.RequestID), c)
	if err != nil {
		if errors.Is(err, budget.ErrUnavailable) {
			return []byte("unavailable"), nil
		}
		return nil, err
	}
	out := append(make([]byte, 0, 40), "ok "...)
	out = strconv.AppendInt(out, c, 10)
	out = append(out, ' ')
	out = strconv.AppendInt(out, spent, 10)
	return out, nil
}
