package budget

import "time"

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
	if w == Day {
		return t.UTC().Format("2006-01-02")
	}
	return t.UTC().Format("2006-01")
}

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
