package balance

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"time"
)

// MaxMembers caps the upstreams of one route (a pick tracks them in a
// 64-bit mask).
const MaxMembers = 64

// Errors of Wait.
var (
	// ErrSaturated means every candidate stayed at its in-flight cap for the
	// whole wait.
	ErrSaturated = errors.New("every upstream of the route is at its concurrency limit")
	// ErrUnavailable means no candidate's breaker lets a request through.
	ErrUnavailable = errors.New("no upstream of the route is available")
)

// Set is the upstreams of one route and their weights. It is immutable;
// the Upstreams' state is shared with every other Set listing them.
//
// Selection is weighted random rather than smooth weighted round-robin: a
// pick reads the members' state and draws one random number, writing no
// state shared between requests, so picks on many cores never contend. Its
// distribution converges to the weights (within a few percent after a few
// thousand requests); round-robin's exactness would need a shared counter
// or a mutex on every request, and is lost across replicas anyway.
type Set struct {
	members []*Upstream
	weights []uint32
	// single: one member without breaker or cap, the fast path.
	single bool
}

// NewSet returns the Set of members with their weights (each >= 1;
// values below 1 count as 1). It panics with more than MaxMembers members
// or mismatched lengths: config validation rules both out.
func NewSet(members []*Upstream, weights []int) *Set {
	if len(members) == 0 || len(members) > MaxMembers || len(weights) != len(members) {
		panic("balance: NewSet needs 1 to 64 members, one weight each")
	}
	s := &Set{members: members, weights: make([]uint32, len(weights))}
	for i, w := range weights {
		s.weights[i] = uint32(max(1, min(w, 1<<20)))
	}
	s.single = len(members) == 1 && members[0].simple()
	return s
}

// Len is the number of members.
func (s *Set) Len() int { return len(s.members) }

// Member returns member i.
func (s *Set) Member(i int) *Upstream { return s.members[i] }

// Result says how a Pick went.
type Result uint8

// Pick results.
const (
	// Picked: the Ticket holds a slot (and maybe the half-open probe).
	Picked Result = iota
	// Saturated: some candidate's breaker lets requests through but all
	// such candidates are at their cap; Wait for a slot.
	Saturated
	// Unavailable: every member is excluded or its breaker is open.
	Unavailable
)

// Ticket is an admitted attempt: it holds a slot of its upstream and
// possibly the breaker's half-open probe. Report the attempt's outcome with
// Done, then free the slot with Release (for a stream, when it ends); or
// give back an attempt never made with Cancel. The zero Ticket holds
// nothing.
type Ticket struct {
	u     *Upstream
	index int
	probe bool
	held  bool
}

// Upstream is the ticket's upstream (nil for the zero Ticket).
func (t *Ticket) Upstream() *Upstream { return t.u }

// Index is the member of the Set the ticket was picked from.
func (t *Ticket) Index() int { return t.index }

// Probe reports whether the attempt is the breaker's half-open probe.
func (t *Ticket) Probe() bool { return t.probe }

// Done records the attempt's outcome: the attempt counters and, once,
// the breaker. retry marks an attempt that repeats a failed one.
func (t *Ticket) Done(o Outcome, retry bool) {
	u := t.u
	if o >= numOutcomes {
		o = Unreachable
	}
	u.stats.attempts[o].Add(1)
	if retry {
		u.stats.retries.Add(1)
	}
	if u.br.threshold > 0 {
		u.br.record(o, t.probe)
	}
	t.probe = false
}

// Release frees the ticket's slot. It is idempotent.
func (t *Ticket) Release() {
	if t.held {
		t.held = false
		t.u.release()
	}
}

// Cancel gives back a ticket whose attempt was never made: its slot and,
// for a probe, the probe (the next request probes instead).
func (t *Ticket) Cancel() {
	if t.probe {
		t.u.br.unclaim()
		t.probe = false
	}
	t.Release()
}

// Peek chooses a member for a request about to start, weighted among the
// members whose breaker would let it through (all members when none
// would), without claiming anything: Pick(excluded, Peek()) then prefers
// it. It lets earlier phases name the upstream a request will most
// likely go to.
func (s *Set) Peek() int {
	if len(s.members) == 1 {
		return 0
	}
	var total uint32
	var mask uint64
	for i, u := range s.members {
		if u.available() {
			total += s.weights[i]
			mask |= 1 << i
		}
	}
	if total == 0 {
		return 0
	}
	return s.draw(mask, total)
}

// draw picks a member of mask, whose weights sum to total, at random.
func (s *Set) draw(mask uint64, total uint32) int {
	r := rand.Uint32N(total)
	last := 0
	for i, w := range s.weights {
		if mask&(1<<i) == 0 {
			continue
		}
		if r < w {
			return i
		}
		r -= w
		last = i
	}
	return last
}

// Pick admits an attempt to a member not in excluded (bit i: member i):
// prefer first when it is >= 0 and admissible, else weighted at random
// among the members whose breaker lets the request through and that have a
// free slot. Only a Picked result carries a Ticket.
func (s *Set) Pick(excluded uint64, prefer int) (Ticket, Result) {
	if s.single {
		if excluded&1 != 0 {
			return Ticket{}, Unavailable
		}
		u := s.members[0]
		u.inflight.Add(1)
		return Ticket{u: u, held: true}, Picked
	}
	if prefer >= 0 && prefer < len(s.members) && excluded&(1<<prefer) == 0 {
		if t, ok := s.claim(prefer); ok {
			return t, Picked
		}
	}
	var full uint64
	for {
		var total uint32
		var mask uint64
		for i, u := range s.members {
			bit := uint64(1) << i
			if (excluded|full)&bit != 0 {
				continue
			}
			if !u.available() {
				u.stats.skipped.Add(1)
				excluded |= bit
				continue
			}
			if u.full() {
				full |= bit
				continue
			}
			total += s.weights[i]
			mask |= bit
		}
		if total == 0 {
			if full != 0 {
				return Ticket{}, Saturated
			}
			return Ticket{}, Unavailable
		}
		i := s.draw(mask, total)
		if t, ok := s.claim(i); ok {
			return t, Picked
		}
		// Lost a race: another request took the probe or the last slot.
		if s.members[i].full() {
			full |= 1 << i
		} else {
			excluded |= 1 << i
		}
	}
}

// claim admits an attempt to member i if its breaker and cap allow.
func (s *Set) claim(i int) (Ticket, bool) {
	u := s.members[i]
	probe := false
	if u.br.threshold > 0 {
		var ok bool
		if probe, ok = u.br.claim(); !ok {
			return Ticket{}, false
		}
	}
	if !u.tryAcquire() {
		if probe {
			u.br.unclaim()
		}
		return Ticket{}, false
	}
	return Ticket{u: u, index: i, probe: probe, held: true}, true
}

// Wait waits up to d for a slot of a member not in excluded, for a request
// whose Pick found them Saturated, and returns its Ticket. It returns
// ErrSaturated when d runs out, ErrUnavailable when every candidate's
// breaker opened meanwhile, and context.Cause(ctx) when ctx ends first.
func (s *Set) Wait(ctx context.Context, excluded uint64, d time.Duration) (Ticket, error) {
	ch := make(chan struct{}, 1)
	timer := time.NewTimer(d)
	defer timer.Stop()
	counted := false
	for {
		// Register before trying again, so a slot released in between
		// wakes this request.
		var reg uint64
		for i, u := range s.members {
			if excluded&(1<<i) == 0 && u.max > 0 && u.available() && u.full() {
				u.addWaiter(ch)
				reg |= 1 << i
				if !counted {
					u.stats.waits.Add(1)
				}
			}
		}
		counted = true
		t, res := s.Pick(excluded, -1)
		switch {
		case res == Picked:
			s.unregister(reg, ch)
			return t, nil
		case res == Unavailable:
			s.unregister(reg, ch)
			return Ticket{}, ErrUnavailable
		case reg == 0:
			// A member filled up between the two looks: look again.
			runtime.Gosched()
			continue
		}
		select {
		case <-ch:
			s.unregister(reg, ch)
		case <-timer.C:
			s.unregister(reg, ch)
			for i, u := range s.members {
				if reg&(1<<i) != 0 {
					u.stats.waitTimeouts.Add(1)
				}
			}
			return Ticket{}, ErrSaturated
		case <-ctx.Done():
			s.unregister(reg, ch)
			return Ticket{}, context.Cause(ctx)
		}
	}
}

func (s *Set) unregister(reg uint64, ch chan struct{}) {
	for i, u := range s.members {
		if reg&(1<<i) != 0 {
			u.removeWaiter(ch)
		}
	}
}

// RetryIn is how long until the first open breaker among the members lets
// a probe through (0 when none is open or one already may).
func (s *Set) RetryIn() time.Duration {
	var least time.Duration = -1
	for _, u := range s.members {
		if u.br.threshold == 0 {
			return 0
		}
		if d := u.br.retryIn(); least < 0 || d < least {
			least = d
		}
	}
	return max(least, 0)
}
