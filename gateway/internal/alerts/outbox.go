package alerts

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// Outbox stores alerts until they are delivered. Implementations are safe
// for concurrent use, and for use by several gateways where they share the
// store (Postgres).
type Outbox interface {
	// Add stores alerts; one whose unique key (tenant, scope kind, scope
	// id, period, threshold) is stored already is skipped. It returns the
	// alerts it stored. On error, none of them is stored; an error
	// wrapping ErrRejected means the store will never take them as they
	// are (bad data), any other may pass on a retry.
	Add(ctx context.Context, alerts []Alert) ([]Alert, error)
	// Claim leases up to n due alerts for lease (no other Claim returns
	// them meanwhile) and returns them.
	Claim(ctx context.Context, n int, lease time.Duration) ([]Claimed, error)
	// Delivered marks an alert delivered: it is never claimed again.
	Delivered(ctx context.Context, id string) error
	// Failed records a failed attempt with its reason: the alert is due
	// again after retryIn, unless it is older than maxAge, in which case it
	// is given up (and Failed reports true).
	Failed(ctx context.Context, id, reason string, retryIn, maxAge time.Duration) (gaveUp bool, err error)
	// Pending counts the alerts neither delivered nor given up.
	Pending(ctx context.Context) (int64, error)
}

// Pruner is an Outbox that can forget finished alerts (delivered or given
// up) stored before a time; the delivery worker calls it now and then.
type Pruner interface {
	Prune(ctx context.Context, before time.Duration) (int64, error)
}

// Retention is how long a finished alert is kept: longer than the longest
// budget window (a month), so a repeat of it is still a no-op while its
// period lasts, with room for inspection.
const Retention = 45 * 24 * time.Hour

// Claimed is an alert leased for delivery.
type Claimed struct {
	Alert
	Attempt int           // 1 for the first attempt
	Age     time.Duration // since the alert was stored
}

// ErrOutboxFull is the memory outbox refusing alerts beyond its capacity;
// the dispatcher keeps them queued and retries, so a full outbox slows
// the settles that cross thresholds instead of losing alerts.
var ErrOutboxFull = errors.New("alerts: the memory outbox is full")

// ErrRejected is an outbox refusing alerts as bad data (Postgres: a data
// exception or a constraint violation), which no retry would change.
var ErrRejected = errors.New("alerts: the outbox rejected the data")

// DefaultMemoryCapacity bounds a memory outbox's pending alerts.
const DefaultMemoryCapacity = 10000

// Memory is an Outbox in the process's memory, for the memory store: it
// does not survive a restart (pending alerts are lost with the process) and
// it is not shared between gateways. It holds at most its capacity of
// pending alerts.
type Memory struct {
	capacity int
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]*memEntry
	pending int
}

type memEntry struct {
	a                 Alert
	created, next     time.Time
	attempts          int
	delivered, gaveUp bool
}

var _ Outbox = (*Memory)(nil)

// NewMemory returns an empty memory outbox holding at most capacity
// pending alerts (≤ 0: DefaultMemoryCapacity); now is its clock (nil:
// time.Now).
func NewMemory(capacity int, now func() time.Time) *Memory {
	if capacity <= 0 {
		capacity = DefaultMemoryCapacity
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{capacity: capacity, now: now, entries: make(map[string]*memEntry)}
}

// Add implements Outbox; it refuses the whole batch with ErrOutboxFull
// when its new alerts do not fit.
func (m *Memory) Add(_ context.Context, alerts []Alert) ([]Alert, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	m.forget(now)
	var added []Alert
	seen := make(map[string]bool, len(alerts))
	for _, a := range alerts {
		if m.entries[a.ID] == nil && !seen[a.ID] {
			seen[a.ID] = true
			added = append(added, a)
		}
	}
	if m.pending+len(added) > m.capacity {
		return nil, ErrOutboxFull
	}
	for _, a := range added {
		m.entries[a.ID] = &memEntry{a: a, created: now, next: now}
	}
	m.pending += len(added)
	return added, nil
}

// forget drops finished entries older than Retention.
func (m *Memory) forget(now time.Time) {
	for id, e := range m.entries {
		if (e.delivered || e.gaveUp) && now.Sub(e.created) > Retention {
			delete(m.entries, id)
		}
	}
}

// Claim implements Outbox, oldest due first.
func (m *Memory) Claim(_ context.Context, n int, lease time.Duration) ([]Claimed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var due []*memEntry
	for _, e := range m.entries {
		if !e.delivered && !e.gaveUp && !e.next.After(now) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].next.Before(due[j].next) })
	if len(due) > n {
		due = due[:n]
	}
	out := make([]Claimed, len(due))
	for i, e := range due {
		e.attempts++
		e.next = now.Add(lease)
		out[i] = Claimed{Alert: e.a, Attempt: e.attempts, Age: now.Sub(e.created)}
	}
	return out, nil
}

// Delivered implements Outbox.
func (m *Memory) Delivered(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.entries[id]; e != nil && !e.delivered && !e.gaveUp {
		e.delivered = true
		m.pending--
	}
	return nil
}

// Failed implements Outbox.
func (m *Memory) Failed(_ context.Context, id, _ string, retryIn, maxAge time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[id]
	if e == nil || e.delivered || e.gaveUp {
		return false, nil
	}
	now := m.now()
	if now.Sub(e.created) >= maxAge {
		e.gaveUp = true
		m.pending--
		return true, nil
	}
	e.next = now.Add(retryIn)
	return false, nil
}

// Pending implements Outbox.
func (m *Memory) Pending(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(m.pending), nil
}
