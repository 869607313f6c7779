package obs

import (
	"sync"
	"sync/atomic"
)

// OtherLabel is the label value of everything past a LabelCap's limit.
const OtherLabel = "other"

// LabelCap bounds the values one label takes (a metric's tenant label):
// the first Max distinct values seen each get their own T, made once by
// the build function; every later value shares the T made for OtherLabel.
// A scrape so has at most Max+1 series per label, however many tenants
// call, and a request's counts always land in exactly one of them, so the
// series still add up to the total (docs/adr/0023-closed-metrics.md).
//
// Get is the hot path: one atomic load and one map lookup, no lock and no
// allocation once a value is admitted or the cap is full. Admitting a
// value copies the map of admitted values under a lock, so admissions cost
// O(Max) each and happen at most Max times in a process's life.
//
// First come, first served: the set is not re-ranked by traffic, so a
// tenant that first calls after Max others is counted as other until the
// process restarts. A LabelCap must not be copied.
type LabelCap[T any] struct {
	max   int
	build func(value string) T
	other T

	seen atomic.Pointer[map[string]T] // immutable once published
	full atomic.Bool

	mu sync.Mutex // serializes admissions (copy and publish)
}

// NewLabelCap returns a LabelCap admitting up to max values (max ≤ 0: none,
// every value is other). build makes a value's T; it is called once per
// admitted value and once for OtherLabel, never concurrently.
func NewLabelCap[T any](max int, build func(value string) T) *LabelCap[T] {
	c := &LabelCap[T]{max: max, build: build, other: build(OtherLabel)}
	m := map[string]T{}
	c.seen.Store(&m)
	c.full.Store(max <= 0)
	return c
}

// Get returns value's T, admitting value if the cap has room. The value
// "other" itself is other's T (a tenant named other shares that series).
func (c *LabelCap[T]) Get(value string) T {
	if t, ok := (*c.seen.Load())[value]; ok {
		return t
	}
	if c.full.Load() || value == OtherLabel {
		return c.other
	}
	return c.admit(value)
}

// admit is Get's slow path: at most max values ever pass through it,
// plus those that race with the last admission.
func (c *LabelCap[T]) admit(value string) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.seen.Load()
	if t, ok := old[value]; ok {
		return t
	}
	if len(old) >= c.max {
		c.full.Store(true)
		return c.other
	}
	m := make(map[string]T, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	t := c.build(value)
	m[value] = t
	c.seen.Store(&m)
	if len(m) >= c.max {
		c.full.Store(true)
	}
	return t
}

// Len is the number of values admitted so far (other not counted).
func (c *LabelCap[T]) Len() int { return len(*c.seen.Load()) }
