package balance

import (
	"sync"
	"sync/atomic"
	"time"
)

// Config is one upstream's resilience settings. Zero values turn a feature
// off.
type Config struct {
	// MaxConcurrent caps the attempts in flight to the upstream (a stream
	// counts until it ends); 0 means no cap.
	MaxConcurrent int
	// BreakerFailures is the number of consecutive failed attempts (no
	// reply, or a 5xx) that opens the breaker; 0 means no breaker.
	BreakerFailures int
	// BreakerOpenFor is how long an open breaker refuses requests before it
	// lets one probe through.
	BreakerOpenFor time.Duration
}

// Upstream is the health and load state of one upstream, shared by every
// route that lists it. It is safe for concurrent use.
type Upstream struct {
	name string
	max  int64 // 0: unlimited
	br   breaker

	inflight atomic.Int64

	// Requests waiting for a slot register a channel here; a release
	// wakes them all (they race for the slot, and the losers wait again).
	mu      sync.Mutex
	waiters []chan struct{}
	nwait   atomic.Int32 // len(waiters), read without the mutex

	stats stats
}

type stats struct {
	attempts     [numOutcomes]atomic.Int64
	retries      atomic.Int64
	waits        atomic.Int64
	waitTimeouts atomic.Int64
	skipped      atomic.Int64
}

// NewUpstream returns the state of the upstream called name.
func NewUpstream(name string, c Config) *Upstream {
	u := &Upstream{name: name, max: int64(max(c.MaxConcurrent, 0))}
	u.br.now = unixNano
	if c.BreakerFailures > 0 {
		u.br.threshold = int32(min(c.BreakerFailures, 1<<30))
		u.br.openFor = int64(c.BreakerOpenFor)
	}
	return u
}

// Name is the upstream's name.
func (u *Upstream) Name() string { return u.name }

// simple reports whether u has neither a breaker nor a cap.
func (u *Upstream) simple() bool { return u.max == 0 && u.br.threshold == 0 }

// available reports, without claiming anything, whether u's breaker would
// let a request through now.
func (u *Upstream) available() bool { return u.br.threshold == 0 || u.br.available() }

// full reports whether every slot is taken.
func (u *Upstream) full() bool { return u.max > 0 && u.inflight.Load() >= u.max }

// tryAcquire takes a slot if one is free.
func (u *Upstream) tryAcquire() bool {
	if u.max == 0 {
		u.inflight.Add(1)
		return true
	}
	for {
		n := u.inflight.Load()
		if n >= u.max {
			return false
		}
		if u.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives back a slot and wakes the requests waiting for one.
func (u *Upstream) release() {
	u.inflight.Add(-1)
	if u.nwait.Load() > 0 {
		u.wake()
	}
}

func (u *Upstream) wake() {
	u.mu.Lock()
	for i, ch := range u.waiters {
		select {
		case ch <- struct{}{}:
		default: // already woken by another upstream
		}
		u.waiters[i] = nil
	}
	u.waiters = u.waiters[:0]
	u.nwait.Store(0)
	u.mu.Unlock()
}

func (u *Upstream) addWaiter(ch chan struct{}) {
	u.mu.Lock()
	u.waiters = append(u.waiters, ch)
	u.nwait.Store(int32(len(u.waiters)))
	u.mu.Unlock()
}

func (u *Upstream) removeWaiter(ch chan struct{}) {
	u.mu.Lock()
	for i, w := range u.waiters {
		if w == ch {
			last := len(u.waiters) - 1
			u.waiters[i] = u.waiters[last]
			u.waiters[last] = nil
			u.waiters = u.waiters[:last]
			break
		}
	}
	u.nwait.Store(int32(len(u.waiters)))
	u.mu.Unlock()
}

// Stats is a snapshot of an upstream's counters.
type Stats struct {
	// Attempts counts attempts by outcome (index: Outcome).
	Attempts [numOutcomes]int64
	// Retries counts attempts that repeated a request after an earlier
	// attempt (to this or another upstream) failed.
	Retries int64
	// InFlight is the attempts holding a slot now (streams until they end).
	InFlight int64
	// MaxConcurrent is the cap (0: none).
	MaxConcurrent int64
	// Waits counts requests that found every candidate saturated and waited
	// for a slot while this upstream was one of them; WaitTimeouts those
	// whose wait ran out.
	Waits, WaitTimeouts int64
	// Skipped counts picks that passed this upstream over because its
	// breaker was open.
	Skipped int64
	// Breaker is false without a breaker; the fields below are zero then.
	Breaker bool
	State   BreakerState
	// Transitions counts entries into each state (index: BreakerState).
	Transitions [numStates]int64
}

// Stats returns a snapshot of u's counters.
func (u *Upstream) Stats() Stats {
	s := Stats{
		Retries: u.stats.retries.Load(), InFlight: u.inflight.Load(), MaxConcurrent: u.max,
		Waits: u.stats.waits.Load(), WaitTimeouts: u.stats.waitTimeouts.Load(), Skipped: u.stats.skipped.Load(),
		Breaker: u.br.threshold > 0,
	}
	for i := range s.Attempts {
		s.Attempts[i] = u.stats.attempts[i].Load()
	}
	if s.Breaker {
		s.State = BreakerState(u.br.state.Load())
		for i := range s.Transitions {
			s.Transitions[i] = u.br.transitions[i].Load()
		}
	}
	return s
}

// State is the breaker's state (Closed without a breaker).
func (u *Upstream) State() BreakerState { return BreakerState(u.br.state.Load()) }
