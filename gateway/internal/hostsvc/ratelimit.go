package hostsvc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/budget"
	"github.com/tollgate/tollgate/gateway/internal/limiter"
	"github.com/tollgate/tollgate/gateway/internal/meterstore"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// anonymousTenant is the limiter tenant of a request no plugin resolved a
// tenant for.
const anonymousTenant = "-"

// Meter is a request's state in the rate-limit and budget services: what
// was charged and held, settled when the request ends.
type Meter struct {
	limits   []limiter.Limit // charged at admission, for the end's correction
	tokens   int64           // the token estimate charged
	mode     limiter.FailMode
	replicas int
	tenant   string
	charged  bool // tokens were charged to a TPM limit
	// fallback: the in-process fallback admitted the request (Redis
	// failed), so the tokens were charged there and its correction goes
	// there too, not to Redis, which never counted them.
	fallback bool
	// seq is the admission's number (meterstore.Admitted.Seq) when it and
	// the hold were made together (Store.AdmitReserve, which carries a
	// tenant's pending ends), else 0: the request's own end may then be
	// deferred (Store.End).
	seq uint64
	// correct and settlement are the end's requests to the counters,
	// made here so that settling allocates none.
	correct    meterstore.Correction
	settlement meterstore.Settlement

	// The budget hold: open (held) in every scope of scopes, whose
	// periods were fixed by the first reserve; its id (see Budget.holdID),
	// empty until one is made.
	held   bool
	scopes []budget.Scope
	hold   []byte
	// heldCompletion is how many completion tokens the hold covers (the
	// reservation's and every admitted extension's), for shrinkToInput;
	// heldMicros what the hold is, to notice a settled cost above it.
	heldCompletion, heldMicros int64

	// snap is the tenant snapshot tenant.resolve found (nil: none); the
	// request's budgets come from it, with no store read.
	snap *tenant.Snapshot
	// user is the request's end user ("" none), once userDone.
	user     string
	userDone bool
}

// needsUsage reports whether settling needs the request's usage: tokens
// were charged to a TPM limit, or a budget hold is open.
func (m *Meter) needsUsage() bool { return m.charged || m.held }

func (m *Meter) reset() {
	clear(m.scopes) // drop the strings and alerts they share
	*m = Meter{limits: m.limits[:0], scopes: m.scopes[:0], hold: m.hold[:0]}
}

// RateLimits is the ratelimit.admit service.
type RateLimits struct {
	log     *slog.Logger
	limiter limiter.Limiter
	counts  *Counts
}

// Serve is ratelimit.admit. The request is a header line
// "MODE REPLICAS TOKENS" and then one line per limit:
//
//	tenant                the plan's rpm/tpm, shared by the tenant's keys
//	key                   the key's own rpm/tpm overrides, on that key alone
//	model PATTERN RPM TPM per tenant, if the model matches PATTERN (the first
//	                      matching model line applies)
//	anon RPM TPM          for a request without a tenant
//
// REPLICAS (0 to 1000) is the floor under the live replica count that
// fail_open divides the limits by (limiter.Request.Replicas).
// Lines that do not apply (no tenant, no override, no match) are skipped.
// The host sets x-ratelimit-{limit,remaining,reset}-{requests,tokens} on
// the response (and Retry-After when limited) and, when the request ends,
// corrects the tokens charged with the real usage. The result is
// "allowed", "limited requests|tokens LIMIT RETRY_AFTER_MS", "unlimited"
// (no limit applies) or "unavailable" (Redis down under fail_closed).
func (rl *RateLimits) Serve(c *Session, r *wasmhost.Request, req []byte) ([]byte, error) {
	lr, out, err := rl.prepare(c, r, req)
	if out != nil || err != nil {
		return out, err
	}
	c.set.meter.Before(context.Background(), lr.Tenant)
	d, err := rl.limiter.Admit(context.Background(), &lr)
	return rl.answer(c, r, &lr, d, err)
}

// prepare reads a ratelimit.admit request into the admission to make: the
// limits (kept in c's meter) of r's tenant. out (or err) is the answer
// when no admission is needed.
func (rl *RateLimits) prepare(c *Session, r *wasmhost.Request, req []byte) (lr limiter.Request, out []byte, err error) {
	head, rest, _ := bytes.Cut(req, []byte{'\n'})
	var buf [5][]byte
	f := fields(buf[:], head)
	if len(f) != 3 {
		return lr, nil, errBadRequest
	}
	var mode limiter.FailMode
	switch string(f[0]) {
	case "fail_open":
		mode = limiter.FailOpen
	case "fail_closed":
		mode = limiter.FailClosed
	default:
		return lr, nil, errBadRequest
	}
	replicas, ok1 := atoi(f[1])
	tokens, ok2 := atoi(f[2])
	if !ok1 || !ok2 || replicas < 0 || replicas > 1000 || tokens < 0 {
		return lr, nil, errBadRequest
	}
	m := &c.meter
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
				return lr, nil, errBadRequest
			}
			rpm, ok1 := atoi(f[n-2])
			tpm, ok2 := atoi(f[n-1])
			if !ok1 || !ok2 {
				return lr, nil, errBadRequest
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
			return lr, nil, errBadRequest
		}
	}
	m.limits = limits
	if len(limits) == 0 {
		return lr, []byte("unlimited"), nil
	}
	tenantID := anonymousTenant
	if t != nil {
		tenantID = t.ID
	}
	return limiter.Request{Tenant: tenantID, Limits: limits, Tokens: tokens, OnError: mode, Replicas: int(replicas)}, nil, nil
}

// answer renders the admission lr's decision d (or error) as
// ratelimit.admit's answer, sets the rate-limit headers on r and notes in
// c's meter what a correction needs.
func (rl *RateLimits) answer(c *Session, r *wasmhost.Request, lr *limiter.Request, d limiter.Decision, err error) ([]byte, error) {
	if err != nil {
		if errors.Is(err, limiter.ErrUnavailable) {
			rl.counts.RateUnavailable.Add(1)
			return []byte("unavailable"), nil
		}
		if errors.Is(err, limiter.ErrInvalid) {
			return nil, errBadRequest
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
		rl.counts.RateLimited[k].Add(1)
		r.AddClientHeader("Retry-After", strconv.AppendInt(nil, int64((retry+time.Second-1)/time.Second), 10))
		out := append(make([]byte, 0, 48), "limited "...)
		out = append(out, kind...)
		out = append(out, ' ')
		out = strconv.AppendInt(out, limit, 10)
		out = append(out, ' ')
		out = strconv.AppendInt(out, ms(retry), 10)
		return out, nil
	}
	m := &c.meter
	for _, l := range lr.Limits {
		if l.TPM > 0 && lr.Tokens > 0 {
			m.tokens, m.mode, m.replicas, m.tenant, m.charged = lr.Tokens, lr.OnError, lr.Replicas, lr.Tenant, true
			m.fallback = d.Fallback
			break
		}
	}
	return []byte("allowed"), nil
}

// setRateHeaders sets OpenAI's rate-limit headers for the most restrictive
// limit of each kind.
func setRateHeaders(r *wasmhost.Request, d *limiter.Decision) {
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

// correction is the correction of the tokens charged at admission with
// the real usage (actual), made in m; nil when there is none to make.
func (rl *RateLimits) correction(m *Meter, actual int64) *meterstore.Correction {
	if !m.charged {
		return nil
	}
	m.charged = false
	delta := actual - m.tokens
	if delta == 0 {
		return nil
	}
	m.correct = meterstore.Correction{Tenant: m.tenant, Limits: m.limits, Delta: delta, Mode: m.mode, Replicas: m.replicas, Fallback: m.fallback}
	return &m.correct
}
