// Package budget is the host-side budget counter: per tenant and UTC month
// (named "2026-11"), how many USD micros are spent and how many are held by
// requests in flight. A request reserves its maximum cost before it is
// forwarded and is admitted only if spent + reserved + amount ≤ limit, in one
// atomic step; at the end it settles its actual cost. Two backends implement
// Counter: Redis (shared by all replicas) and Memory (one process).
//
// # Redis layout
//
// All keys of one tenant-month share the hash tag {tenant:month}, so every
// script touches a single slot of a Redis Cluster:
//
//	<prefix>{<tenant>:<month>}:spent              string: micros spent this month
//	<prefix>{<tenant>:<month>}:holds              hash: requestID → micros held;
//	                                              field "" is the sum of all holds
//	<prefix>{<tenant>:<month>}:leases             zset: requestID → lease end (µs, server clock)
//	<prefix>{<tenant>:<month>}:settled:<requestID> string with a TTL: Settle's idempotency marker
//
// Tenant and month are escaped ('%', '{', '}', ':' become %25, %7B, %7D,
// %3A), so a tenant id with braces still yields one hash tag per
// tenant-month and no two tenant-months share a key. The prefix (default
// "tollgate:budget:") must not contain braces. Keeping the sum of holds in
// the holds hash makes admission O(1) in the number of requests in flight
// and gives the sum the same fate as the holds it adds up (an empty request
// id is therefore rejected). Every operation is one Lua script call
// (EVALSHA, or EVAL once after NOSCRIPT); Correct is one SET.
//
// # Leases
//
// A hold carries a lease measured on the Redis server's clock (TIME), so
// replicas' clocks do not matter. Reserve, Extend and Status first drop the
// holds whose lease has ended, in the same script, so a replica that crashed
// with requests in flight gives their budget back one lease later. Extend
// renews the lease; a request that outlives its lease without extending it
// loses its hold (Settle still charges its actual cost). Memory does the same
// with its own clock.
//
// Shrink lowers a live hold (a request that learned a lower bound of its
// cost, such as the provider's count of its prompt tokens, gives the rest
// back at once). It never raises a hold, makes one or renews its lease, so
// spent + reserved only falls and admission stays sound; repeating it is
// harmless. It reads neither spent nor the settled marker and never seeds.
//
// # Seeding
//
// The durable month-to-date spend lives in Postgres. When the spent key is
// missing (first use of a month, a Redis restart, expiry after KeyTTL) the
// script changes nothing and answers "seed"; the counter then calls the
// Seeder (once per tenant-month at a time in a process), stores the result
// with SET NX (so when replicas race, the first value wins and the rest are
// ignored), and runs the operation once more. A warm operation is one
// command; a cold one is three (four on a server that lost the script).
// Holds are not seeded: after a Redis restart, requests in flight are no
// longer counted as reserved, and their Settle still adds their cost.
//
// # Idempotency window
//
// Reserve is idempotent while the hold lives: a second Reserve for the same
// request id reports the hold without adding to it. Settle writes a marker
// for the request id that lives SettledTTL (default one hour); a second
// Settle within that window adds nothing, and Reserve or Extend of a settled
// id fail with ErrSettled instead of creating a hold nobody would settle.
// After the window a request id is new again: request ids must be unique per
// request, and retries of Settle must come within the window. The window
// costs memory: about 180 bytes of Redis per settled request (20,000 markers
// with 35-byte request ids measured with INFO memory on Redis 7.0), so 1,000
// requests a second keep about 650 MB with the default hour. Lower SettledTTL
// to what Settle retries need.
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
	// existed).
	Admitted bool
	// Spent and Reserved are the counter after this call; Reserved includes
	// this request's hold if it was admitted.
	Spent, Reserved int64
	// Remaining is limit − Spent − Reserved; it may be ≤ 0.
	Remaining int64
	// Duplicate reports (Reserve only) that a live hold for the request id
	// already existed: nothing was added and its lease was not renewed.
	Duplicate bool
	// Recreated reports (Extend only) that there was no live hold for the
	// request id, because its lease had ended or it never existed, and a
	// new hold of the extension amount was made. The request's earlier
	// hold is not restored: whatever it used is charged by Settle.
	Recreated bool
}

// Seeder returns the durable month-to-date spend of a tenant (from
// Postgres). A counter calls it when it has no value for the tenant-month;
// an error is returned to the caller of the operation, and the next
// operation calls the Seeder again.
type Seeder func(ctx context.Context, tenant, month string) (spent int64, err error)

// Counter is a budget counter; Memory and Redis implement it.
type Counter interface {
	// Reserve holds amount for requestID if spent + reserved + amount ≤
	// limit. Idempotent per requestID: while the hold lives, a second
	// Reserve reports it (Admitted, Duplicate) without adding or renewing.
	// It fails with ErrSettled if requestID was settled within the window.
	Reserve(ctx context.Context, tenant, month, requestID string, amount, limit int64, lease time.Duration) (Reservation, error)
	// Extend grows the hold of requestID by more if spent + reserved + more
	// ≤ limit, and renews its lease. Admitted=false leaves the hold (amount
	// and lease) unchanged. If there is no live hold (its lease ended) a new
	// one of more is made under the same rule (Recreated). It fails with
	// ErrSettled if requestID was settled within the window.
	Extend(ctx context.Context, tenant, month, requestID string, more, limit int64, lease time.Duration) (Reservation, error)
	// Shrink lowers the live hold of requestID to to, when it is larger;
	// it never raises a hold, makes one, or renews a lease, so it cannot
	// break admission and repeating it changes nothing. A request calls it
	// when it learns that its cost is bounded lower than it reserved (the
	// provider reported the prompt's true token count). No hold (its lease
	// ended, it was settled, it never existed) is not an error. It does not
	// seed: spent is not read.
	Shrink(ctx context.Context, tenant, month, requestID string, to int64) error
	// Settle removes the hold of requestID, if any, and adds actual to
	// spent; it returns spent afterwards. Idempotent per requestID within
	// the window: a second Settle adds nothing. Works after the hold expired.
	Settle(ctx context.Context, tenant, month, requestID string, actual int64) (spent int64, err error)
	// Status returns spent and reserved, after dropping expired holds.
	Status(ctx context.Context, tenant, month string) (spent, reserved int64, err error)
	// Correct sets spent (the reconcile job's correction); holds are kept.
	Correct(ctx context.Context, tenant, month string, spent int64) error
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

func seedError(tenant, month string, err error) error {
	return fmt.Errorf("budget: seeding %q %s: %w", tenant, month, err)
}
