package limiter

import (
	"context"
	"sync"
	"time"
)

// Memory is an in-process Limiter: exact for one process, unaware of other
// replicas. Redis uses one as its FailOpen fallback. Safe for concurrent
// use; one mutex guards all cells and nothing under it does I/O.
//
// Memory ignores Request.OnError and Request.Replicas: it never fails and
// does not divide limits.
type Memory struct {
	now   func() time.Time
	epoch time.Time // TATs are µs since epoch (monotonic with time.Now)

	mu        sync.Mutex
	cells     map[cellKey]*tats
	nextSweep int64 // µs; see sweep
}

type cellKey struct{ tenant, key string }

// tats are the TATs of one limit, µs since the epoch; a TAT at or before
// now is a full cell.
type tats struct{ req, tok int64 }

// NewMemory returns an empty Memory reading time from now (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	// An hour back, so that a test clock set a little into the past still
	// reads after every zero (full) TAT.
	return &Memory{now: now, epoch: now().Add(-time.Hour), cells: make(map[cellKey]*tats)}
}

func (m *Memory) clock() int64 { return m.now().Sub(m.epoch).Microseconds() }

// Admit implements Limiter.
func (m *Memory) Admit(_ context.Context, r *Request) (Decision, error) {
	if err := validate(r); err != nil {
		return Decision{}, err
	}
	var p plan
	return m.admit(&p, r.Tenant, r.Limits, r.Tokens, 1), nil
}

// admit decides a valid admission with every limit divided by div.
func (m *Memory) admit(p *plan, tenant string, limits []Limit, tokens, div int64) Decision {
	p.build(limits, tokens, div)
	if p.n == 0 {
		return Decision{Allowed: true}
	}
	now := m.clock()
	var ts [MaxLimits]*tats

	m.mu.Lock()
	for i := range p.n {
		c := &p.cells[i]
		t := ts[c.limit]
		if t == nil {
			t = m.cells[cellKey{tenant, limits[c.limit].Key}]
			ts[c.limit] = t
		}
		c.tat = now
		if t != nil {
			c.tat = max(now, t.get(c.tokens))
		}
	}
	ok := p.allowed(now)
	if ok {
		for i := range p.n {
			c := &p.cells[i]
			t := ts[c.limit]
			if t == nil {
				t = &tats{}
				m.cells[cellKey{tenant, limits[c.limit].Key}] = t
				ts[c.limit] = t
			}
			t.set(c.tokens, c.tat+c.cost)
		}
	}
	m.sweep(now)
	m.mu.Unlock()

	return p.decision(now, ok)
}

// Adjust implements Limiter.
func (m *Memory) Adjust(_ context.Context, tenant string, limits []Limit, delta int64, mode FailMode, replicas int) error {
	if err := validateMode(mode, replicas); err != nil {
		return err
	}
	if err := validateLimits(tenant, limits); err != nil {
		return err
	}
	var p plan
	m.adjust(&p, tenant, limits, delta, 1)
	return nil
}

// adjust moves the token TATs of valid limits, each divided by div.
func (m *Memory) adjust(p *plan, tenant string, limits []Limit, delta, div int64) {
	p.buildAdjust(limits, delta, div)
	if p.n == 0 {
		return
	}
	now := m.clock()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range p.n {
		c := &p.cells[i]
		k := cellKey{tenant, limits[c.limit].Key}
		t := m.cells[k]
		if t == nil {
			if c.cost <= 0 {
				continue // nothing to give back to a full cell
			}
			t = &tats{}
			m.cells[k] = t
		}
		t.tok = max(max(t.tok, now)+c.cost, now)
	}
}

// sweep drops full cells once a minute (of the clock), so idle limits do
// not pile up. It walks every cell under the mutex: 13ms per 100k limits
// (BenchmarkMemorySweep), once a minute. Memory is the fallback and the
// single-process limiter; a deployment with that many live limits should
// rely on Redis, where idle keys expire by themselves.
func (m *Memory) sweep(now int64) {
	if now < m.nextSweep {
		return
	}
	m.nextSweep = now + window
	for k, t := range m.cells {
		if t.req <= now && t.tok <= now {
			delete(m.cells, k)
		}
	}
}

// Len is the number of limits Memory holds state for.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cells)
}

func (t *tats) get(tokens bool) int64 {
	if tokens {
		return t.tok
	}
	return t.req
}

func (t *tats) set(tokens bool, v int64) {
	if tokens {
		t.tok = v
	} else {
		t.req = v
	}
}
