// Package budget is the host-side budget counter: per budget scope (a
// tenant, one of its keys, one of its end users) and period (a UTC month
// "2026-11" or day "2026-11-03"), how many USD micros are spent and how
// many are held by requests in flight. A request reserves its maximum cost
// before it is forwarded against every scope it belongs to, and is
// admitted only if spent + reserved + amount ≤ limit in every one of them,
// in one atomic step; at the end it settles its actual cost in all of
// them. Two backends implement Counter: Redis (shared by all replicas) and
// Memory (one process).
//
// # The invariant
//
// For every scope-period, spent + Σ live holds ≤ limit after every
// operation that admits: Reserve and Extend add to holds only after
// checking the sum in every scope of the request, in the same atomic step
// that adds; Shrink and Settle only remove holds; Settle adds the actual
// cost, which the caller bounds by the hold it made (a cost above its hold
// is the caller's to count as an overrun). Correct and a lease that ends
// are the only other changes.
//
// # Redis layout
//
// Every key of a tenant carries the hash tag {<tenant>}, so all its scopes,
// windows and periods live in one slot of a Redis Cluster and one script
// can check and change them together:
//
//	<prefix>{<tenant>}:<kind>:<id>:<period>:spent    string: micros spent in the period
//	<prefix>{<tenant>}:<kind>:<id>:<period>:holds    hash: requestID → micros held;
//	                                                 field "" is the sum of all holds
//	<prefix>{<tenant>}:<kind>:<id>:<period>:leases   zset: requestID → lease end (µs, server clock)
//	<prefix>{<tenant>}:settled:<requestID>           string with a TTL: Settle's idempotency marker
//
// for example tollgate:budget:{acme}:tenant::2026-11:spent (the tenant's
// own scope has an empty id) or tollgate:budget:{acme}:key:k_7:2026-11-03:holds.
// The tag is redisx.TenantTag: the tenant id, or '#' and its SHA-256 when
// the id is empty, has a brace or starts with '#' — the rate limiter's
// tag, so a tenant's rate limits and budgets share a slot. Kind, id and
// period are escaped ('%', '{', '}', ':' become %25, %7B, %7D, %3A), so no
// two scope-periods share a key; kinds are the three known ones, so no
// scope's key is a settled marker. The prefix (default "tollgate:budget:")
// must not contain braces. Keeping the sum of holds in the holds hash makes
// admission O(1) in the number of requests in flight and gives the sum the
// same fate as the holds it adds up (an empty request id is therefore
// rejected). Every operation is one Lua script call (EVALSHA, or EVAL once
// after NOSCRIPT); Correct is one SET. Reserve and Settle are also Lua
// functions (HoldSettleLua) that package meterstore's Redis Functions
// library runs after the rate limiter's admission and token correction in
// the same call (Redis.PrepareReserve, Redis.PrepareSettle). A script's work grows with the
// number of scopes: Reserve and Settle of three scopes take Redis about
// twice the time of one (see BenchmarkRedisReserveSettle).
//
// Monthly keys live KeyTTL (40 days) and daily ones DayKeyTTL (3 days):
// spent from its seed or correction, holds and leases from the last Extend,
// or the last Reserve that made the scope's first hold (the sum of holds
// 0: the leases set, deleted by Redis when it empties, may be new), or one
// Reserve in 64 (by the server clock's microseconds) that renews anyway.
// Renewing only then spares a Reserve two PEXPIREs while holds are
// outstanding, and no hold key is ever left without a TTL (the set is only
// made again with the sum 0; TestRedisHoldKeysNeverWithoutTTL). A period's
// keys are not used after the period, except by late settles, so these
// outlive their use; a key that expires anyway is seeded again.
//
// A request's hold is one field in the holds hash of each of its scopes,
// all made, grown, shrunk and removed by the same script call with the
// same amount and lease end, so the scopes agree on it.
//
// # Leases
//
// A hold carries a lease measured on the Redis server's clock (TIME), so
// replicas' clocks do not matter. Reserve, Extend, Shrink and Status first
// drop the holds whose lease has ended, in the same script, so a replica
// that crashed with requests in flight gives their budget back one lease
// later. Extend renews the lease; a request that outlives its lease
// without extending it loses its hold (Settle still charges its actual
// cost). Memory does the same with its own clock.
//
// Shrink lowers a live hold (a request that learned a lower bound of its
// cost, such as the provider's count of its prompt tokens, gives the rest
// back at once). It never raises a hold, makes one or renews its lease, so
// spent + reserved only falls and admission stays sound; repeating it is
// harmless. It reads neither spent nor the settled marker and never seeds.
//
// # Seeding
//
// The durable spend lives in Postgres. When a scope's spent key is missing
// (first use of a period, a Redis restart, expiry after its key TTL) the
// script changes nothing and answers "seed" with the list of scopes
// missing one; the counter calls the Seeder for each of them (at once,
// and once per scope-period at a time in a process), stores each result
// with SET NX (so when replicas race, the first value wins and the rest
// are ignored), and runs the operation once more. A warm operation is one
// command whatever the number of scopes; a cold one is two script calls
// plus one Seeder call and one SET per missing scope (one command more on
// a server that lost the script), and waits for the slowest Seeder call.
// Holds are not seeded: after a Redis restart, requests in flight are no
// longer counted as reserved, and their Settle still adds their cost.
//
// # Idempotency window
//
// Reserve is idempotent while the hold lives: a second Reserve for the same
// request id reports the hold without adding to it. Settle writes a marker
// for the request id, one per tenant whatever the scopes, that lives
// SettledTTL (default one hour); a second Settle within that window adds
// nothing and reports no crossing, and Reserve or Extend of a settled id
// fail with ErrSettled instead of creating a hold nobody would settle.
// After the window a request id is new again: request ids must be unique
// per request within a tenant, and retries of Settle must come within the
// window. The window costs memory: about 180 bytes of Redis per settled
// request (20,000 markers with 35-byte request ids measured with INFO
// memory on Redis 7.0), so 1,000 requests a second keep about 650 MB with
// the default hour. Lower SettledTTL to what Settle retries need.
//
// # Alerts
//
// A scope may list alert thresholds in percent of its limit. Settle
// reports each threshold its own addition crossed (spent before <
// threshold ≤ spent after), read in the script that adds, so of all the
// settles of a scope-period exactly one reports a given crossing (until a
// Correct lowers spent below it again).
//
// # Failures
//
// When Redis cannot be reached or does not answer within the redisx
// command timeout, or the Seeder fails, an operation returns an error
// wrapping ErrUnavailable (and the cause); it never admits on its own. The
// caller applies its fail_open or fail_closed policy. Other errors
// (ErrInvalid, ErrSettled, a Redis error reply) are not about availability
// and must not be treated as such.
//
// Amounts are int64 micros; exact arithmetic is guaranteed below 2^53 micros
// (about 9 billion dollars) because Redis scripts compute in doubles. Larger
// limits (math.MaxInt64 for "no limit") are accepted and compared as 2^53.
package budget

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults for RedisOptions, also used by Memory.
const (
	DefaultPrefix     = "tollgate:budget:"
	DefaultSettledTTL = time.Hour
	DefaultKeyTTL     = 40 * 24 * time.Hour
	DefaultDayKeyTTL  = 3 * 24 * time.Hour
)

// maxExact is the largest amount Lua's doubles hold exactly; limits above it
// are compared as maxExact.
const maxExact = 1 << 53

var (
	// ErrUnavailable is wrapped by the errors of a counter that could not
	// reach its store (Redis down or not answering in time) or whose Seeder
	// failed. The caller applies its fail_open or fail_closed policy; the
	// counter never admits on its own.
	ErrUnavailable = errors.New("budget counter unavailable")
	// ErrSettled is returned by Reserve and Extend for a request id that was
	// settled within the idempotency window.
	ErrSettled = errors.New("budget: request already settled")
	// ErrInvalid is wrapped by the errors for arguments that are out of
	// range: a negative amount, an empty request id, a lease ≤ 0.
	ErrInvalid = errors.New("budget: invalid argument")
)

// Reservation is the outcome of Reserve or Extend.
type Reservation struct {
	// Admitted reports whether the hold was made (or grown, or already
	// existed) in every scope.
	Admitted bool
	// Spent and Reserved are the counters, after this call, of the
	// tightest scope: the one with the least Remaining. Reserved includes
	// this request's hold if it was admitted.
	Spent, Reserved int64
	// Remaining is the least, over the scopes, of limit − spent − reserved;
	// it may be ≤ 0.
	Remaining int64
	// Refused is, when Admitted is false, the scope that refused: of the
	// scopes the amount did not fit in, the one with the least room. It
	// is a copy of one of the scopes passed in; nil when admitted.
	Refused *Scope
	// Duplicate reports (Reserve only) that a live hold for the request id
	// already existed in every scope: nothing was added and no lease was
	// renewed.
	Duplicate bool
	// Recreated reports (Extend only) that in some scope there was no live
	// hold for the request id, because its lease had ended or it never
	// existed, and a new hold of the extension amount was made there. The
	// request's earlier hold is not restored: whatever it used is charged
	// by Settle.
	Recreated bool
}

// Seeder returns the durable spend of one scope in its period (from
// Postgres: the month-to-date spend of a tenant, the day's spend of a key).
// A counter calls it when it has no value for the scope-period; an error is
// returned to the caller of the operation, and the next operation calls
// the Seeder again. Only s.Kind, s.ID, s.Window and s.Period are meaningful.
type Seeder func(ctx context.Context, tenant string, s Scope) (spent int64, err error)

// Counter is a budget counter; Memory and Redis implement it.
//
// A request is held against a list of scopes (its tenant's budgets, its
// key's, its end user's), each with its own limit and period. Admission is
// all or nothing: the hold is made in every scope, in one atomic step, or
// in none. The caller passes the same scopes (periods included) for one
// request id from Reserve to Settle; a scope may appear once in a list.
type Counter interface {
	// Reserve holds amount for requestID in every scope if, in each,
	// spent + reserved + amount ≤ limit. Idempotent per requestID: while
	// the hold lives in every scope, a second Reserve reports it
	// (Admitted, Duplicate) without adding or renewing; a scope that has
	// no live hold for requestID (a list that grew) gets one under the
	// same rule, or the call is refused and changes nothing. It fails with
	// ErrSettled if requestID was settled within the window.
	Reserve(ctx context.Context, tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (Reservation, error)
	// Extend grows the hold of requestID by more in every scope if, in
	// each, spent + reserved + more ≤ limit, and renews its lease.
	// Admitted=false leaves the holds (amounts and leases) unchanged. In a
	// scope with no live hold (its lease ended) a new one of more is made
	// under the same rule (Recreated). It fails with ErrSettled if
	// requestID was settled within the window.
	Extend(ctx context.Context, tenant, requestID string, scopes []Scope, more int64, lease time.Duration) (Reservation, error)
	// Shrink lowers the live hold of requestID to to in every scope where
	// it is larger; it never raises a hold, makes one, or renews a lease,
	// so it cannot break admission and repeating it changes nothing. A
	// request calls it when it learns that its cost is bounded lower than
	// it reserved (the provider reported the prompt's true token count).
	// No hold (its lease ended, it was settled, it never existed) is not
	// an error. It does not seed: spent is not read.
	Shrink(ctx context.Context, tenant, requestID string, scopes []Scope, to int64) error
	// Settle removes the hold of requestID from every scope, if any, and
	// adds actual to each scope's spent. It returns the alert thresholds
	// this settle crossed (see Crossing), in the order of scopes and
	// thresholds. Idempotent per requestID within the window: a second
	// Settle adds nothing and reports no crossing. Works after the hold
	// expired.
	Settle(ctx context.Context, tenant, requestID string, scopes []Scope, actual int64) ([]Crossing, error)
	// Status returns a scope's spent and reserved, after dropping expired
	// holds.
	Status(ctx context.Context, tenant string, s Scope) (spent, reserved int64, err error)
	// Correct sets a scope's spent (the reconcile job's correction); holds
	// are kept.
	Correct(ctx context.Context, tenant string, s Scope, spent int64) error
}

var (
	_ Counter = (*Memory)(nil)
	_ Counter = (*Redis)(nil)
)

func checkHold(requestID string, amount int64, lease time.Duration) error {
	if requestID == "" {
		return fmt.Errorf("%w: empty request id", ErrInvalid)
	}
	if amount < 0 {
		return fmt.Errorf("%w: negative amount %d", ErrInvalid, amount)
	}
	if lease <= 0 {
		return fmt.Errorf("%w: lease %v", ErrInvalid, lease)
	}
	return nil
}

func checkSettle(requestID string, actual int64) error {
	if requestID == "" {
		return fmt.Errorf("%w: empty request id", ErrInvalid)
	}
	if actual < 0 {
		return fmt.Errorf("%w: negative cost %d", ErrInvalid, actual)
	}
	return nil
}

func checkShrink(requestID string, to int64) error {
	if requestID == "" {
		return fmt.Errorf("%w: empty request id", ErrInvalid)
	}
	if to < 0 {
		return fmt.Errorf("%w: negative hold %d", ErrInvalid, to)
	}
	return nil
}

func checkSpent(spent int64) error {
	if spent < 0 {
		return fmt.Errorf("%w: negative spend %d", ErrInvalid, spent)
	}
	return nil
}

// remaining is limit − spent − reserved for spent, reserved ≥ 0, saturating
// at math.MinInt64 instead of wrapping.
func remaining(limit, spent, reserved int64) int64 {
	r := limit - spent - reserved
	if r > limit {
		return math.MinInt64
	}
	return r
}

// result makes a Reservation from the counters of every scope after the
// call (counts(j) is scope j's spent and reserved); refused is the index of
// the scope that refused, or -1.
func result(scopes []Scope, admitted bool, refused int, counts func(j int) (spent, reserved int64)) Reservation {
	var res Reservation
	for j, s := range scopes {
		spent, reserved := counts(j)
		left := remaining(s.Limit, spent, reserved)
		if j == 0 || left < res.Remaining {
			res.Spent, res.Reserved, res.Remaining = spent, reserved, left
		}
	}
	res.Admitted = admitted
	if refused >= 0 {
		s := scopes[refused]
		res.Refused = &s
	}
	return res
}

func seedError(tenant string, s Scope, err error) error {
	return fmt.Errorf("budget: seeding %q %s: %w", tenant, s, err)
}
