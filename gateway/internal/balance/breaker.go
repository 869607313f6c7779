package balance

import (
	"sync/atomic"
	"time"
)

// BreakerState is where an upstream's circuit breaker stands.
type BreakerState uint32

// Breaker states.
const (
	// Closed lets every request through.
	Closed BreakerState = iota
	// Open lets none through until its open period has passed.
	Open
	// HalfOpen has let exactly one probe through and waits for its result:
	// success closes the breaker, failure opens it again.
	HalfOpen

	numStates
)

var stateNames = [numStates]string{"closed", "open", "half_open"}

// String is the state's metric label.
func (s BreakerState) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "unknown"
}

// BreakerStates lists every state, in metric order.
func BreakerStates() []BreakerState { return []BreakerState{Closed, Open, HalfOpen} }

// breaker opens after threshold consecutive failures, stays open for
// openFor, then lets one probe through. A closed breaker costs one atomic
// load per request; the clock is read only while it is not closed.
type breaker struct {
	threshold int32 // 0: no breaker
	openFor   int64 // nanoseconds
	now       func() int64

	state    atomic.Uint32 // BreakerState
	failures atomic.Int32  // consecutive, while closed
	// until is when an open breaker lets a probe through (Unix ns).
	until atomic.Int64
	// transitions counts entries into each state.
	transitions [numStates]atomic.Int64
}

// available reports, without claiming anything, whether a request could
// pass now.
func (b *breaker) available() bool {
	switch BreakerState(b.state.Load()) {
	case Closed:
		return true
	case Open:
		return b.now() >= b.until.Load()
	}
	return false
}

// claim lets a request through: always while closed; while open and past
// its open period, the one request that wins the switch to half-open (the
// probe). probe is true for that request, which must report its outcome
// with probe set.
func (b *breaker) claim() (probe, ok bool) {
	switch BreakerState(b.state.Load()) {
	case Closed:
		return false, true
	case Open:
		if b.now() < b.until.Load() {
			return false, false
		}
		if b.state.CompareAndSwap(uint32(Open), uint32(HalfOpen)) {
			b.transitions[HalfOpen].Add(1)
			return true, true
		}
	}
	return false, false
}

// unclaim gives back a probe that was never sent: the breaker is open
// again with its period already over, so the next request probes.
func (b *breaker) unclaim() {
	b.state.CompareAndSwap(uint32(HalfOpen), uint32(Open))
}

// record takes an attempt's outcome. Only the probe decides a half-open
// breaker; outcomes of requests sent before the breaker opened are
// ignored while it is not closed.
func (b *breaker) record(o Outcome, probe bool) {
	if o == Cancelled || o == PoolFull { // nothing reached the upstream
		if probe {
			b.unclaim()
		}
		return
	}
	fail := o.failure()
	if probe {
		if fail {
			b.until.Store(b.now() + b.openFor)
			b.state.Store(uint32(Open))
			b.transitions[Open].Add(1)
		} else {
			b.failures.Store(0)
			b.state.Store(uint32(Closed))
			b.transitions[Closed].Add(1)
		}
		return
	}
	if !fail {
		if b.failures.Load() != 0 { // no write (cache-line traffic) while healthy
			b.failures.Store(0)
		}
		return
	}
	if BreakerState(b.state.Load()) != Closed {
		return
	}
	if b.failures.Add(1) >= b.threshold {
		b.until.Store(b.now() + b.openFor)
		if b.state.CompareAndSwap(uint32(Closed), uint32(Open)) {
			b.failures.Store(0)
			b.transitions[Open].Add(1)
		}
	}
}

// retryIn is how long until an open breaker lets a probe through; 0 when
// it is not open or its period is over.
func (b *breaker) retryIn() time.Duration {
	if BreakerState(b.state.Load()) != Open {
		return 0
	}
	return max(0, time.Duration(b.until.Load()-b.now()))
}

func unixNano() int64 { return time.Now().UnixNano() }
