package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// sweepEvery is how often Memory looks for tenant-months unused for
// DefaultKeyTTL, to forget them (the counterpart of Redis key expiry).
const sweepEvery = time.Hour

// Memory is a Counter for a single process (the embedded default). Its
// methods are safe for concurrent use: one mutex guards every tenant-month,
// and the Seeder runs outside it, once per tenant-month. Settle markers live
// DefaultSettledTTL unless WithSettledTTL says otherwise; a tenant-month
// unused for DefaultKeyTTL is forgotten (and seeded again if it is used
// after all).
type Memory struct {
	seed       Seeder
	now        func() time.Time
	settledTTL time.Duration
	flight     singleflight.Group

	mu        sync.Mutex
	months    map[monthKey]*monthState
	nextSweep time.Time
}

type monthKey struct{ tenant, month string }

type monthState struct {
	spent, reserved int64
	holds           map[string]memHold
	// earliest is at or before the earliest lease end in holds, so purge
	// has nothing to do before it (it may be early after a Settle).
	earliest time.Time

	settled  map[string]time.Time // request id → end of its window
	settledQ markQueue            // in the order they were settled

	used time.Time
}

type memHold struct {
	amount  int64
	expires time.Time
}

type settledMark struct {
	id  string
	end time.Time
}

// NewMemory returns an empty Memory. seed may be nil (tenant-months start at
// 0); now may be nil (time.Now).
func NewMemory(seed Seeder, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{seed: seed, now: now, settledTTL: DefaultSettledTTL, months: make(map[monthKey]*monthState)}
}

// WithSettledTTL sets the idempotency window of Settle (see the package
// documentation) and returns m; call it before m is used. A marker costs
// about 150 bytes of the process's memory (and a map entry the garbage
// collector scans), so 1,000 requests a second keep about 540 MB with the
// default hour, 45 MB with five minutes.
func (m *Memory) WithSettledTTL(d time.Duration) *Memory {
	if d > 0 {
		m.settledTTL = d
	}
	return m
}

// Reserve implements Counter.
func (m *Memory) Reserve(ctx context.Context, tenant, month, requestID string, amount, limit int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, amount, lease); err != nil {
		return Reservation{}, err
	}
	s, now, err := m.lock(ctx, tenant, month)
	if err != nil {
		return Reservation{}, err
	}
	defer m.mu.Unlock()
	s.purge(now)
	if s.isSettled(requestID, now) {
		return Reservation{}, settledError(requestID)
	}
	if _, ok := s.holds[requestID]; ok {
		r := s.result(true, limit)
		r.Duplicate = true
		return r, nil
	}
	if amount > remaining(limit, s.spent, s.reserved) {
		return s.result(false, limit), nil
	}
	s.hold(requestID, amount, now.Add(lease))
	return s.result(true, limit), nil
}

// Extend implements Counter.
func (m *Memory) Extend(ctx context.Context, tenant, month, requestID string, more, limit int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, more, lease); err != nil {
		return Reservation{}, err
	}
	s, now, err := m.lock(ctx, tenant, month)
	if err != nil {
		return Reservation{}, err
	}
	defer m.mu.Unlock()
	s.purge(now)
	if s.isSettled(requestID, now) {
		return Reservation{}, settledError(requestID)
	}
	if more > remaining(limit, s.spent, s.reserved) {
		return s.result(false, limit), nil
	}
	_, existed := s.holds[requestID]
	s.hold(requestID, more, now.Add(lease))
	r := s.result(true, limit)
	r.Recreated = !existed
	return r, nil
}

// Shrink implements Counter.
func (m *Memory) Shrink(_ context.Context, tenant, month, requestID string, to int64) error {
	if err := checkShrink(requestID, to); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.months[monthKey{tenant, month}]
	if s == nil {
		return nil
	}
	now := m.now()
	s.used = now
	s.purge(now)
	if h, ok := s.holds[requestID]; ok && h.amount > to {
		s.reserved -= h.amount - to
		h.amount = to
		s.holds[requestID] = h
	}
	return nil
}

// Settle implements Counter.
func (m *Memory) Settle(ctx context.Context, tenant, month, requestID string, actual int64) (int64, error) {
	if err := checkSettle(requestID, actual); err != nil {
		return 0, err
	}
	s, now, err := m.lock(ctx, tenant, month)
	if err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	if h, ok := s.holds[requestID]; ok {
		delete(s.holds, requestID)
		s.reserved -= h.amount
	}
	if s.isSettled(requestID, now) {
		return s.spent, nil
	}
	s.spent += actual
	end := now.Add(m.settledTTL)
	s.settled[requestID] = end
	s.settledQ.push(settledMark{requestID, end})
	return s.spent, nil
}

// Status implements Counter.
func (m *Memory) Status(ctx context.Context, tenant, month string) (spent, reserved int64, err error) {
	s, now, err := m.lock(ctx, tenant, month)
	if err != nil {
		return 0, 0, err
	}
	defer m.mu.Unlock()
	s.purge(now)
	return s.spent, s.reserved, nil
}

// Correct implements Counter. It does not call the Seeder: the corrected
// value replaces whatever the counter had.
func (m *Memory) Correct(_ context.Context, tenant, month string, spent int64) error {
	if err := checkSpent(spent); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := monthKey{tenant, month}
	s := m.months[k]
	if s == nil {
		s = newMonthState()
		m.months[k] = s
	}
	s.spent = spent
	s.used = now
	return nil
}

// lock returns the state of a tenant-month with m.mu held, seeding it first
// if there is none. On error m.mu is not held.
func (m *Memory) lock(ctx context.Context, tenant, month string) (*monthState, time.Time, error) {
	k := monthKey{tenant, month}
	for {
		m.mu.Lock()
		now := m.now()
		if s := m.months[k]; s != nil {
			s.used = now
			return s, now, nil
		}
		m.mu.Unlock()
		if err := m.seedMonth(ctx, k); err != nil {
			return nil, time.Time{}, err
		}
		// The state exists now, unless a sweep dropped it already (a clock
		// that jumped by DefaultKeyTTL): look again.
	}
}

// seedMonth calls the Seeder without holding m.mu and inserts the state
// unless there is one by then. Concurrent callers for one tenant-month share
// a call, and a caller that comes after the state was inserted calls
// nothing, so the Seeder runs once per tenant-month.
func (m *Memory) seedMonth(ctx context.Context, k monthKey) error {
	_, err, _ := m.flight.Do(k.tenant+"\x00"+k.month, func() (any, error) {
		m.mu.Lock()
		_, ok := m.months[k]
		m.mu.Unlock()
		if ok {
			return nil, nil
		}
		var spent int64
		if m.seed != nil {
			var err error
			if spent, err = m.seed(ctx, k.tenant, k.month); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, seedError(k.tenant, k.month, err))
			}
			if spent < 0 {
				return nil, seedError(k.tenant, k.month, fmt.Errorf("%w: negative spend %d", ErrInvalid, spent))
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.months[k] == nil { // Correct may have set it meanwhile
			now := m.now()
			m.sweep(now)
			s := newMonthState()
			s.spent = spent
			s.used = now
			m.months[k] = s
		}
		return nil, nil
	})
	return err
}

// sweep forgets tenant-months unused for DefaultKeyTTL, at most once per
// sweepEvery. m.mu must be held.
func (m *Memory) sweep(now time.Time) {
	if now.Before(m.nextSweep) {
		return
	}
	m.nextSweep = now.Add(sweepEvery)
	for k, s := range m.months {
		if now.Sub(s.used) >= DefaultKeyTTL {
			delete(m.months, k)
		}
	}
}

func newMonthState() *monthState {
	return &monthState{holds: make(map[string]memHold), settled: make(map[string]time.Time)}
}

func (s *monthState) result(admitted bool, limit int64) Reservation {
	return Reservation{
		Admitted:  admitted,
		Spent:     s.spent,
		Reserved:  s.reserved,
		Remaining: remaining(limit, s.spent, s.reserved),
	}
}

// hold adds amount to the hold of id (making it if needed) and sets its
// lease end.
func (s *monthState) hold(id string, amount int64, expires time.Time) {
	if len(s.holds) == 0 || expires.Before(s.earliest) {
		s.earliest = expires
	}
	h := s.holds[id]
	h.amount += amount
	h.expires = expires
	s.holds[id] = h
	s.reserved += amount
}

// purge drops the holds whose lease ended at or before now.
func (s *monthState) purge(now time.Time) {
	if len(s.holds) == 0 || now.Before(s.earliest) {
		return
	}
	var next time.Time
	for id, h := range s.holds {
		if !h.expires.After(now) {
			delete(s.holds, id)
			s.reserved -= h.amount
			continue
		}
		if next.IsZero() || h.expires.Before(next) {
			next = h.expires
		}
	}
	s.earliest = next
}

// isSettled reports whether id was settled within the window, after
// forgetting the markers whose window ended.
func (s *monthState) isSettled(id string, now time.Time) bool {
	for {
		mk, ok := s.settledQ.peek()
		if !ok || mk.end.After(now) {
			break
		}
		if end, ok := s.settled[mk.id]; ok && end.Equal(mk.end) {
			delete(s.settled, mk.id)
		}
		s.settledQ.pop()
	}
	end, ok := s.settled[id]
	return ok && end.After(now)
}

// markQueue is a FIFO of settle markers in blocks of markBlock: pushing and
// popping never copies more than one marker, so no operation under the
// counter's mutex moves the queue (a compacting slice copied half of it, 6
// MB at 1,000 settles a second over the five-minute window).
type markQueue struct {
	blocks [][]settledMark // the first from head, the others full but the last
	head   int
	spare  []settledMark // one emptied block, reused
}

const markBlock = 1024

func (q *markQueue) push(m settledMark) {
	n := len(q.blocks)
	if n == 0 || len(q.blocks[n-1]) == markBlock {
		b := q.spare
		q.spare = nil
		if b == nil {
			b = make([]settledMark, 0, markBlock)
		}
		q.blocks = append(q.blocks, b)
		n++
	}
	q.blocks[n-1] = append(q.blocks[n-1], m)
}

func (q *markQueue) peek() (settledMark, bool) {
	if len(q.blocks) == 0 {
		return settledMark{}, false
	}
	return q.blocks[0][q.head], true
}

// pop drops the first marker; the queue must not be empty.
func (q *markQueue) pop() {
	b := q.blocks[0]
	b[q.head] = settledMark{} // the id's string is no longer kept alive
	q.head++
	if q.head < len(b) {
		return
	}
	// The first block is used up.
	q.head = 0
	q.blocks[0] = nil
	q.blocks = q.blocks[1:]
	if len(b) == markBlock {
		q.spare = b[:0]
	}
	if len(q.blocks) == 0 {
		q.blocks = nil // let the array of block headers go
	}
}

func settledError(requestID string) error {
	return fmt.Errorf("%w: %q", ErrSettled, requestID)
}
