package limiter

import (
	"math/bits"
	"time"
)

// window is a minute in microseconds, the unit of every TAT.
const window = int64(time.Minute / time.Microsecond)

// maxShift caps one move of a TAT (an impossible token estimate, a huge
// debt) at about 12.7 days, so every number a script handles stays far
// below 2^53, where Lua's doubles stop being exact integers.
const maxShift = int64(1) << 40

// cell is one GCRA cell of a request: the requests or the tokens of one
// limit.
type cell struct {
	limit  uint8 // index in the request's Limits
	tokens bool  // a TPM cell, not an RPM cell
	rate   int64 // RPM or TPM, after division by replicas
	cost   int64 // µs this admission moves the TAT by
	tol    int64 // µs: admitted iff max(TAT, now) + cost − now <= tol
	tat    int64 // µs: max(stored TAT, now) before this admission, set by the store
}

// plan holds the cells of one request. It is built without allocating.
type plan struct {
	n     int
	cells [2 * MaxLimits]cell
}

// build fills p with the cells of limits for an admission of tokens, each
// limit divided by div (>= 1, rounded up).
func (p *plan) build(limits []Limit, tokens, div int64) {
	p.n = 0
	for i := range limits {
		l := &limits[i]
		if l.RPM > 0 {
			rpm := divUp(l.RPM, div)
			t := divUp(window, rpm)
			p.cells[p.n] = cell{limit: uint8(i), rate: rpm, cost: t, tol: rpm * t}
			p.n++
		}
		if l.TPM > 0 {
			tpm := divUp(l.TPM, div)
			p.cells[p.n] = cell{limit: uint8(i), tokens: true, rate: tpm, cost: tokenMicros(tokens, tpm, true), tol: window}
			p.n++
		}
	}
}

// buildAdjust fills p with the TPM cells of limits, each divided by div
// (>= 1, rounded up), and as their cost the shift of their TAT for delta
// tokens (negative for a give-back; 0 cells when delta is 0).
func (p *plan) buildAdjust(limits []Limit, delta, div int64) {
	p.n = 0
	if delta == 0 {
		return
	}
	for i := range limits {
		l := &limits[i]
		if l.TPM > 0 {
			tpm := divUp(l.TPM, div)
			p.cells[p.n] = cell{limit: uint8(i), tokens: true, rate: tpm, cost: shiftMicros(delta, tpm), tol: window}
			p.n++
		}
	}
}

// allowed reports whether every cell admits at now (µs).
func (p *plan) allowed(now int64) bool {
	for i := range p.n {
		c := &p.cells[i]
		if c.tat+c.cost-now > c.tol {
			return false
		}
	}
	return true
}

// decision describes p's cells at now after the admission was allowed (and
// charged) or not.
func (p *plan) decision(now int64, allowed bool) Decision {
	d := Decision{Allowed: allowed}
	var haveR, haveT bool
	var retry int64
	for i := range p.n {
		c := &p.cells[i]
		after := c.tat
		if allowed {
			after += c.cost
		}
		ahead := after - now // >= 0: c.tat >= now
		reset := time.Duration(ahead) * time.Microsecond
		if c.tokens {
			rem := tokensLeft(ahead, c.rate)
			if !haveT || rem < d.RemainingTokens || rem == d.RemainingTokens && reset > d.ResetTokens {
				haveT = true
				d.LimitTokens, d.RemainingTokens, d.ResetTokens = c.rate, rem, reset
			}
		} else {
			rem := min(max((c.tol-ahead)/c.cost, 0), c.rate)
			if !haveR || rem < d.RemainingRequests || rem == d.RemainingRequests && reset > d.ResetRequests {
				haveR = true
				d.LimitRequests, d.RemainingRequests, d.ResetRequests = c.rate, rem, reset
			}
		}
		if !allowed {
			wait := c.tat + c.cost - c.tol - now
			if c.cost > c.tol {
				wait = window // never admitted; come back when the minute is over
			}
			retry = max(retry, wait)
		}
	}
	if !allowed {
		d.RetryAfter = time.Duration(max(retry, 1)) * time.Microsecond
	}
	return d
}

// tokensLeft is ⌊(window − ahead) × tpm / window⌋ clipped to [0, tpm]: the
// tokens a TPM cell whose TAT is ahead µs in the future still admits.
func tokensLeft(ahead, tpm int64) int64 {
	free := window - ahead
	if free <= 0 {
		return 0
	}
	if free >= window {
		return tpm
	}
	hi, lo := bits.Mul64(uint64(free), uint64(tpm))
	q, _ := bits.Div64(hi, lo, uint64(window)) // free < window: no overflow
	return int64(q)
}

// tokenMicros is n tokens of a tpm limit in µs, n × window / tpm, rounded up
// (a charge) or down (a give-back), at most maxShift.
func tokenMicros(n, tpm int64, up bool) int64 {
	if n <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(n), uint64(window))
	if hi >= uint64(tpm) {
		return maxShift // the quotient would not fit 64 bits
	}
	q, r := bits.Div64(hi, lo, uint64(tpm))
	if up && r != 0 {
		q++
	}
	return int64(min(q, uint64(maxShift)))
}

// shiftMicros is how far Adjust moves a TPM cell's TAT for delta tokens:
// debts round up, give-backs round down, both capped at maxShift.
func shiftMicros(delta, tpm int64) int64 {
	if delta < 0 {
		if delta == -1<<63 {
			return -maxShift
		}
		return -tokenMicros(-delta, tpm, false)
	}
	return tokenMicros(delta, tpm, true)
}

// divUp is ⌈a / b⌉ for a, b > 0.
func divUp(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
