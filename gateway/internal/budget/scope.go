package budget

import (
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Kinds of budget scope: every request of a tenant is held against the
// tenant's budgets and, where set, its key's and its end user's.
const (
	ScopeTenant = "tenant"
	ScopeKey    = "key"
	ScopeUser   = "user"
)

// Window is the calendar period a budget renews over (UTC).
type Window uint8

// Windows.
const (
	Month Window = iota // calendar month, period "2026-12"
	Day                 // calendar day, period "2026-12-01"
)

// String returns "month" or "day".
func (w Window) String() string {
	if w == Day {
		return "day"
	}
	return "month"
}

// Period names the window holding t: "2026-12" for Month, "2026-12-01"
// for Day (UTC).
func (w Window) Period(t time.Time) string {
	day := t.Unix() / secondsPerDay
	if t.Unix() < 0 && t.Unix()%secondsPerDay != 0 {
		day-- // floor: the UTC day holding t
	}
	i := 0
	if w == Day {
		i = 1
	}
	// Every request names its periods: a period is formatted once a day
	// per window, not once a request.
	if e := periods[i].Load(); e != nil && e.day == day {
		return e.name
	}
	name := t.UTC().Format("2006-01")
	if w == Day {
		name = t.UTC().Format("2006-01-02")
	}
	periods[i].Store(&period{day: day, name: name})
	return name
}

const secondsPerDay = 24 * 60 * 60

// period is a window's period name on one UTC day (days since 1970).
type period struct {
	day  int64
	name string
}

// periods are the last period named per window (Month, Day).
var periods [2]atomic.Pointer[period]

// Scope is one budget a request is held against: a kind, the id within the
// tenant ("" for the tenant itself; the key id; the end-user id), the
// period its window is in when the request was admitted (a request is
// settled in the period it was admitted in), and the limit in USD micros.
type Scope struct {
	Kind   string
	ID     string
	Window Window
	Period string
	Limit  int64
	// Alerts are the thresholds, in percent of Limit, whose crossing is
	// reported (see Crossing); empty: none.
	Alerts []int
}

// Crossing is a budget whose settled spend reached one of its alert
// thresholds: Before < Threshold% of Limit ≤ After. Exactly one Settle
// (across replicas) reports each crossing of a scope-period, since the
// spend only grows between corrections.
type Crossing struct {
	Tenant    string
	Scope     Scope
	Threshold int   // percent
	Before    int64 // spend before the settle, USD micros
	After     int64 // spend after it
	At        time.Time
}

// String names a scope for errors and logs: "tenant 2026-12",
// "key k_1 2026-12-01".
func (s Scope) String() string {
	if s.ID == "" {
		return s.Kind + " " + s.Period
	}
	return s.Kind + " " + s.ID + " " + s.Period
}

// same reports whether a and b are one scope-period (the counter they
// share), whatever their limits and alerts.
func (s Scope) same(o Scope) bool {
	return s.Kind == o.Kind && s.ID == o.ID && s.Period == o.Period
}

// checkScope rejects a scope the counter cannot key: an unknown kind (the
// kind is part of the key, so it must not be free text), an empty period,
// or a negative limit.
func checkScope(s Scope) error {
	switch s.Kind {
	case ScopeTenant, ScopeKey, ScopeUser:
	default:
		return fmt.Errorf("%w: scope kind %q", ErrInvalid, s.Kind)
	}
	if s.Window > Day {
		return fmt.Errorf("%w: scope %s with window %d", ErrInvalid, s, s.Window)
	}
	if s.Period == "" {
		return fmt.Errorf("%w: scope %s without a period", ErrInvalid, s)
	}
	if s.Limit < 0 {
		return fmt.Errorf("%w: scope %s with limit %d", ErrInvalid, s, s.Limit)
	}
	for _, a := range s.Alerts {
		if a <= 0 {
			return fmt.Errorf("%w: scope %s with alert threshold %d%%", ErrInvalid, s, a)
		}
	}
	return nil
}

// checkScopes rejects an empty list, an invalid scope, and a scope listed
// twice (its hold would be counted twice).
func checkScopes(scopes []Scope) error {
	if len(scopes) == 0 {
		return fmt.Errorf("%w: no scopes", ErrInvalid)
	}
	for i, s := range scopes {
		if err := checkScope(s); err != nil {
			return err
		}
		for _, o := range scopes[:i] {
			if s.same(o) {
				return fmt.Errorf("%w: scope %s listed twice", ErrInvalid, s)
			}
		}
	}
	return nil
}

// thresholdMicros is the spend at which pct percent of limit is reached,
// rounded up to the micro and saturating at math.MaxInt64 (no overflow for
// the "no limit" limits).
func thresholdMicros(limit int64, pct int) int64 {
	hi, lo := bits.Mul64(uint64(limit), uint64(pct))
	if hi >= 100 { // the quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 100)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// appendCrossings appends the thresholds of s that a spend going from
// before to after crossed: before < threshold ≤ after.
func appendCrossings(dst []Crossing, tenant string, s Scope, before, after int64, at time.Time) []Crossing {
	for _, pct := range s.Alerts {
		if t := thresholdMicros(s.Limit, pct); before < t && t <= after {
			dst = append(dst, Crossing{Tenant: tenant, Scope: s, Threshold: pct, Before: before, After: after, At: at})
		}
	}
	return dst
}
