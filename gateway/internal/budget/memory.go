package budget

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// sweepEvery is how often Memory looks for scopes unused for their key TTL,
// to forget them (the counterpart of Redis key expiry).
const sweepEvery = time.Hour

// Memory is a Counter for a single process (the embedded default). Its
// methods are safe for concurrent use: one mutex guards every scope, and
// the Seeder runs outside it, once per scope-period. Settle markers live
// DefaultSettledTTL unless WithSettledTTL says otherwise; a monthly scope
// unused for DefaultKeyTTL (a daily one for DefaultDayKeyTTL) is forgotten
// (and seeded again if it is used after all).
type Memory struct {
	seed       Seeder
	now        func() time.Time
	settledTTL time.Duration
	flight     singleflight.Group

	mu        sync.Mutex
	scopes    map[scopeKey]*scopeState
	tenants   map[string]*tenantState
	nextSweep time.Time
}

type scopeKey struct{ tenant, kind, id, period string }

func keyOf(tenant string, s Scope) scopeKey { return scopeKey{tenant, s.Kind, s.ID, s.Period} }

// scopeState is the counter of one scope-period.
type scopeState struct {
	spent, reserved int64
	holds           map[string]memHold
	// earliest is at or before the earliest lease end in holds, so purge
	// has nothing to do before it (it may be early after a Settle).
	earliest time.Time

	used time.Time
	ttl  time.Duration // forgotten when unused for this long
}

// tenantState holds a tenant's settle markers: one per request, whatever
// its scopes.
type tenantState struct {
	settled  map[markKey]int64 // request id's key → end of its window (stamp)
	settledQ markQueue         // in the order they were settled
}

// markKey stands for a request id in the settle markers: two 64-bit hashes
// of it with seeds of this process's own. A marker then holds no pointer —
// the garbage collector does not scan the markers, which at a gateway's
// rates are most of its heap — and costs ~80 bytes, map and queue, instead
// of ~155 with the id kept as a string (BenchmarkMemorySettleMarkers: the
// collector's CPU a Reserve and Settle with a million markers kept went
// from ~300 ns to under 5). Two ids share a key with a chance of about
// 2^-128 a pair (a shared key would take a request for one already
// settled), and the seeds are random and never leave the process, so no
// client can choose ids that collide: a tenant at 10,000 requests a second
// with the hour's window meets one with a chance of about 3·10^-20 a year.
type markKey [2]uint64

var markSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func markOf(id string) markKey {
	return markKey{maphash.String(markSeeds[0], id), maphash.String(markSeeds[1], id)}
}

// markEpoch is what stamp counts from.
var markEpoch = time.Now()

// stamp is t as the markers keep it: nanoseconds since markEpoch, on the
// monotonic clock when t has a reading of it (as time.Time's own
// comparisons are), so a step of the wall clock does not move windows.
func stamp(t time.Time) int64 { return int64(t.Sub(markEpoch)) }

type memHold struct {
	amount  int64
	expires time.Time
}

// NewMemory returns an empty Memory. seed may be nil (scopes start at 0);
// now may be nil (time.Now).
func NewMemory(seed Seeder, now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{
		seed: seed, now: now, settledTTL: DefaultSettledTTL,
		scopes: make(map[scopeKey]*scopeState), tenants: make(map[string]*tenantState),
	}
}

// WithSettledTTL sets the idempotency window of Settle (see the package
// documentation) and returns m; call it before m is used. A marker costs
// about 80 bytes of the process's memory (see markKey), so 1,000 requests
// a second keep about 290 MB with the default hour, 24 MB with five
// minutes.
func (m *Memory) WithSettledTTL(d time.Duration) *Memory {
	if d > 0 {
		m.settledTTL = d
	}
	return m
}

// Reserve implements Counter.
func (m *Memory) Reserve(ctx context.Context, tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, amount, lease); err != nil {
		return Reservation{}, err
	}
	st, now, err := m.lock(ctx, tenant, scopes)
	if err != nil {
		return Reservation{}, err
	}
	defer m.mu.Unlock()
	for _, s := range st {
		s.purge(now)
	}
	if m.isSettled(tenant, markOf(requestID), now) {
		return Reservation{}, settledError(requestID)
	}
	refused, missing := -1, false
	var room int64
	for j, s := range st {
		if _, ok := s.holds[requestID]; ok {
			continue
		}
		missing = true
		left := remaining(scopes[j].Limit, s.spent, s.reserved)
		if amount > left && (refused < 0 || left < room) {
			refused, room = j, left
		}
	}
	switch {
	case !missing:
		res := memResult(scopes, st, true, -1)
		res.Duplicate = true
		return res, nil
	case refused >= 0:
		return memResult(scopes, st, false, refused), nil
	}
	for _, s := range st {
		if _, ok := s.holds[requestID]; !ok {
			s.hold(requestID, amount, now.Add(lease))
		}
	}
	return memResult(scopes, st, true, -1), nil
}

// Extend implements Counter.
func (m *Memory) Extend(ctx context.Context, tenant, requestID string, scopes []Scope, more int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, more, lease); err != nil {
		return Reservation{}, err
	}
	st, now, err := m.lock(ctx, tenant, scopes)
	if err != nil {
		return Reservation{}, err
	}
	defer m.mu.Unlock()
	for _, s := range st {
		s.purge(now)
	}
	if m.isSettled(tenant, markOf(requestID), now) {
		return Reservation{}, settledError(requestID)
	}
	refused := -1
	var room int64
	for j, s := range st {
		left := remaining(scopes[j].Limit, s.spent, s.reserved)
		if more > left && (refused < 0 || left < room) {
			refused, room = j, left
		}
	}
	if refused >= 0 {
		return memResult(scopes, st, false, refused), nil
	}
	recreated := false
	for _, s := range st {
		if _, ok := s.holds[requestID]; !ok {
			recreated = true
		}
		s.hold(requestID, more, now.Add(lease))
	}
	res := memResult(scopes, st, true, -1)
	res.Recreated = recreated
	return res, nil
}

// Shrink implements Counter. It seeds nothing: a scope without a counter
// holds nothing to lower.
func (m *Memory) Shrink(_ context.Context, tenant, requestID string, scopes []Scope, to int64) error {
	if err := checkShrink(requestID, to); err != nil {
		return err
	}
	if err := checkScopes(scopes); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for _, sc := range scopes {
		s := m.scopes[keyOf(tenant, sc)]
		if s == nil {
			continue
		}
		s.used = now
		s.purge(now)
		if h, ok := s.holds[requestID]; ok && h.amount > to {
			s.reserved -= h.amount - to
			h.amount = to
			s.holds[requestID] = h
		}
	}
	return nil
}

// Settle implements Counter.
func (m *Memory) Settle(ctx context.Context, tenant, requestID string, scopes []Scope, actual int64) ([]Crossing, error) {
	if err := checkSettle(requestID, actual); err != nil {
		return nil, err
	}
	st, now, err := m.lock(ctx, tenant, scopes)
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	for _, s := range st {
		if h, ok := s.holds[requestID]; ok {
			delete(s.holds, requestID)
			s.reserved -= h.amount
		}
	}
	key := markOf(requestID)
	if m.isSettled(tenant, key, now) {
		return nil, nil
	}
	t := m.tenants[tenant]
	if t == nil {
		t = &tenantState{settled: make(map[markKey]int64)}
		m.tenants[tenant] = t
	}
	end := stamp(now.Add(m.settledTTL))
	t.settled[key] = end
	t.settledQ.push(settledMark{key, end})
	var out []Crossing
	for j, s := range st {
		before := s.spent
		s.spent += actual
		out = appendCrossings(out, tenant, scopes[j], before, s.spent, now)
	}
	return out, nil
}

// Status implements Counter.
func (m *Memory) Status(ctx context.Context, tenant string, s Scope) (spent, reserved int64, err error) {
	st, now, err := m.lock(ctx, tenant, []Scope{s})
	if err != nil {
		return 0, 0, err
	}
	defer m.mu.Unlock()
	st[0].purge(now)
	return st[0].spent, st[0].reserved, nil
}

// Correct implements Counter. It does not call the Seeder: the corrected
// value replaces whatever the counter had.
func (m *Memory) Correct(_ context.Context, tenant string, s Scope, spent int64) error {
	if err := checkSpent(spent); err != nil {
		return err
	}
	if err := checkScope(s); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	k := keyOf(tenant, s)
	st := m.scopes[k]
	if st == nil {
		st = newScopeState(s.Window)
		m.scopes[k] = st
	}
	st.spent = spent
	st.used = now
	return nil
}

// lock returns the states of scopes with m.mu held, seeding those that
// have none first. On error m.mu is not held.
func (m *Memory) lock(ctx context.Context, tenant string, scopes []Scope) ([]*scopeState, time.Time, error) {
	if err := checkScopes(scopes); err != nil {
		return nil, time.Time{}, err
	}
	st := make([]*scopeState, len(scopes))
	for {
		m.mu.Lock()
		now := m.now()
		var missing []Scope
		for j, sc := range scopes {
			if st[j] = m.scopes[keyOf(tenant, sc)]; st[j] == nil {
				missing = append(missing, sc)
			} else {
				st[j].used = now
			}
		}
		if missing == nil {
			return st, now, nil
		}
		m.mu.Unlock()
		if err := m.seedScopes(ctx, tenant, missing); err != nil {
			return nil, time.Time{}, err
		}
		// The states exist now, unless a sweep dropped one already (a
		// clock that jumped by a key TTL): look again.
	}
}

// seedScopes seeds several scopes at once, as Redis does.
func (m *Memory) seedScopes(ctx context.Context, tenant string, scopes []Scope) error {
	if len(scopes) == 1 {
		return m.seedScope(ctx, tenant, scopes[0])
	}
	errs := make([]error, len(scopes))
	var wg sync.WaitGroup
	for j, sc := range scopes {
		wg.Go(func() { errs[j] = m.seedScope(ctx, tenant, sc) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seedScope calls the Seeder without holding m.mu and inserts the state
// unless there is one by then. Concurrent callers for one scope-period
// share a call, and a caller that comes after the state was inserted calls
// nothing, so the Seeder runs once per scope-period.
func (m *Memory) seedScope(ctx context.Context, tenant string, sc Scope) error {
	k := keyOf(tenant, sc)
	_, err, _ := m.flight.Do(flightKey(k), func() (any, error) {
		m.mu.Lock()
		_, ok := m.scopes[k]
		m.mu.Unlock()
		if ok {
			return nil, nil
		}
		var spent int64
		if m.seed != nil {
			var err error
			if spent, err = m.seed(ctx, tenant, sc); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, seedError(tenant, sc, err))
			}
			if spent < 0 {
				return nil, seedError(tenant, sc, fmt.Errorf("%w: negative spend %d", ErrInvalid, spent))
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.scopes[k] == nil { // Correct may have set it meanwhile
			now := m.now()
			m.sweep(now)
			s := newScopeState(sc.Window)
			s.spent = spent
			s.used = now
			m.scopes[k] = s
		}
		return nil, nil
	})
	return err
}

// flightKey joins a scope key's fields with NUL, which ids do not contain
// in practice; a collision would only share a Seeder call's wait.
func flightKey(k scopeKey) string {
	return k.tenant + "\x00" + k.kind + "\x00" + k.id + "\x00" + k.period
}

// sweep forgets scopes unused for their key TTL, and tenants' settle
// markers whose window ended, at most once per sweepEvery. m.mu must be
// held.
func (m *Memory) sweep(now time.Time) {
	if now.Before(m.nextSweep) {
		return
	}
	m.nextSweep = now.Add(sweepEvery)
	for k, s := range m.scopes {
		if now.Sub(s.used) >= s.ttl {
			delete(m.scopes, k)
		}
	}
	for id, t := range m.tenants {
		t.expire(now)
		if len(t.settled) == 0 {
			delete(m.tenants, id)
		}
	}
}

func newScopeState(w Window) *scopeState {
	ttl := DefaultKeyTTL
	if w == Day {
		ttl = DefaultDayKeyTTL
	}
	return &scopeState{holds: make(map[string]memHold), ttl: ttl}
}

// memResult is result over Memory's states.
func memResult(scopes []Scope, st []*scopeState, admitted bool, refused int) Reservation {
	return result(scopes, admitted, refused, func(j int) (int64, int64) { return st[j].spent, st[j].reserved })
}

// hold adds amount to the hold of id (making it if needed) and sets its
// lease end.
func (s *scopeState) hold(id string, amount int64, expires time.Time) {
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
func (s *scopeState) purge(now time.Time) {
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

// isSettled reports whether the tenant's request id, by its key (markOf),
// was settled within the window. m.mu must be held.
func (m *Memory) isSettled(tenant string, key markKey, now time.Time) bool {
	t := m.tenants[tenant]
	if t == nil {
		return false
	}
	t.expire(now)
	end, ok := t.settled[key]
	return ok && end > stamp(now)
}

// expire forgets the markers whose window ended.
func (t *tenantState) expire(now time.Time) {
	at := stamp(now)
	for {
		mk, ok := t.settledQ.peek()
		if !ok || mk.end > at {
			return
		}
		if end, ok := t.settled[mk.key]; ok && end == mk.end {
			delete(t.settled, mk.key)
		}
		t.settledQ.pop()
	}
}

func settledError(requestID string) error {
	return fmt.Errorf("%w: %q", ErrSettled, requestID)
}
