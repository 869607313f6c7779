// Package balance holds the gateway's per-upstream health state — a
// circuit breaker, an in-flight limit, attempt counters — and chooses which
// upstream of a route serves an attempt: weighted at random among the
// upstreams whose breaker lets a request through and that have a free slot.
//
// Everything read on the request path is an atomic; a mutex is taken only
// by a request that must wait for a slot (every candidate saturated) and by
// a slot's release while such a request waits. A route with one upstream,
// no breaker and no limit costs three atomic adds per attempt. The choices
// are recorded in docs/adr/0005-upstream-routing.md.
package balance

// Outcome classifies one attempt by what the upstream answered.
type Outcome uint8

// Outcomes of an attempt.
const (
	// Success is a 1xx–3xx reply.
	Success Outcome = iota
	// ClientError is a 4xx reply other than 429: the request itself is
	// refused, so it is passed through and never retried.
	ClientError
	// RateLimited is a 429 reply.
	RateLimited
	// ServerError is a 5xx reply.
	ServerError
	// Timeout means no response headers arrived in time (connect or first
	// byte).
	Timeout
	// Unreachable means no connection could be made, or it broke before a
	// response.
	Unreachable
	// Cancelled means the caller gave up (client gone, cancel API,
	// shutdown); it says nothing about the upstream's health.
	Cancelled
	// PoolFull means nothing was sent: every connection the gateway may
	// open to the upstream (max_connections) stayed busy. The gateway's
	// own limit, not the upstream's health; another upstream may serve.
	PoolFull

	numOutcomes
)

var outcomeNames = [numOutcomes]string{"success", "client_error", "rate_limited", "server_error", "timeout", "unreachable", "cancelled", "pool_full"}

// String is the outcome's metric label.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "unknown"
}

// Outcomes lists every outcome, in metric order.
func Outcomes() []Outcome {
	out := make([]Outcome, numOutcomes)
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// StatusOutcome classifies an HTTP status the upstream replied with.
func StatusOutcome(status int) Outcome {
	switch {
	case status == 429:
		return RateLimited
	case status >= 500:
		return ServerError
	case status >= 400:
		return ClientError
	}
	return Success
}

// Retryable reports whether another attempt may be made after o: the
// upstream failed or shed load before anything was sent to the client.
func (o Outcome) Retryable() bool {
	return o == RateLimited || o == ServerError || o == Timeout || o == Unreachable || o == PoolFull
}

// failure reports whether o counts against the upstream's breaker: no
// reply, or a 5xx. A 429 shows the upstream up (it sheds load; Retry-After
// says for how long) and a 4xx is the request's own fault.
func (o Outcome) failure() bool {
	return o == ServerError || o == Timeout || o == Unreachable
}
