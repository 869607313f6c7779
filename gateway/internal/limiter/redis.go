package limiter

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// DefaultPrefix starts every Redis key unless RedisOptions.Prefix is set.
const DefaultPrefix = "tollgate:rl:"

// RedisOptions configure a Redis limiter. The zero value is usable.
type RedisOptions struct {
	// Prefix starts every key (default DefaultPrefix). It must not contain
	// '{' or '}': the tenant is the keys' hash tag.
	Prefix string
	// Now is the clock of the FailOpen fallback (nil: time.Now). Decisions
	// made by Redis use the Redis server's clock.
	Now func() time.Time
	// Fleet counts the live gateway replicas (package fleet's heartbeat);
	// FailOpen divides the limits by its count when that is above the
	// request's Replicas. nil: Replicas alone.
	Fleet Fleet
}

// Fleet reports the number of live gateway replicas: the count of the
// last heartbeat that reached Redis, 0 before the first. Live must be
// cheap (the fallback reads it on every decision) and safe for
// concurrent use.
type Fleet interface{ Live() int }

// Redis is a Limiter whose state lives in Redis, shared by every replica
// that uses the same Redis and prefix. Safe for concurrent use.
type Redis struct {
	c        *redisx.Client
	prefix   string
	fallback *Memory
	fleet    Fleet     // nil: none
	calls    sync.Pool // *redisCall

	admitted, rejected, fallbacks, errs, invalid atomic.Int64
}

// Stats are counters since NewRedis.
type Stats struct {
	Admitted  int64 // admissions allowed, by Redis or the fallback
	Rejected  int64 // admissions rejected, by Redis or the fallback
	Fallbacks int64 // admissions decided by the fallback because Redis failed
	// Errors counts Admit and Adjust calls that returned an error because of
	// Redis: unavailable under FailClosed, or a reply error in either mode.
	Errors  int64
	Invalid int64 // Admit and Adjust calls that returned ErrInvalid
}

// NewRedis returns a limiter that keeps its cells in c. It panics if
// opts.Prefix contains a brace, which is a programming error.
func NewRedis(c *redisx.Client, opts RedisOptions) *Redis {
	if c == nil {
		panic("limiter: NewRedis with a nil client")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		panic(fmt.Sprintf("limiter: key prefix %q contains a brace", opts.Prefix))
	}
	r := &Redis{c: c, prefix: opts.Prefix, fallback: NewMemory(opts.Now), fleet: opts.Fleet}
	r.calls.New = func() any {
		return &redisCall{
			buf:  make([]byte, 0, 512),
			keys: make([]string, 0, 2*MaxLimits),
			args: make([]string, 0, 4*MaxLimits),
		}
	}
	return r
}

// Stats returns the counters.
func (r *Redis) Stats() Stats {
	return Stats{
		Admitted:  r.admitted.Load(),
		Rejected:  r.rejected.Load(),
		Fallbacks: r.fallbacks.Load(),
		Errors:    r.errs.Load(),
		Invalid:   r.invalid.Load(),
	}
}

// Admit implements Limiter with one script call to Redis (none when no
// limit has an RPM or a TPM).
func (r *Redis) Admit(ctx context.Context, req *Request) (Decision, error) {
	a, err := r.PrepareAdmit(req)
	if err != nil {
		return Decision{}, err
	}
	defer a.Release()
	return r.admitAlone(ctx, a)
}

// Adjust implements Limiter with one script call to Redis, none when delta
// is 0 or no limit has a TPM.
func (r *Redis) Adjust(ctx context.Context, tenant string, limits []Limit, delta int64, mode FailMode, replicas int) error {
	a, err := r.PrepareAdjust(tenant, limits, delta, mode, replicas)
	if err != nil {
		return err
	}
	defer a.Release()
	if len(a.Keys()) == 0 {
		return nil
	}
	if err := r.c.Exec(ctx, adjustScript, a.Keys(), a.Args()).Error(); err != nil {
		return a.Failed(err)
	}
	return nil
}

// AdjustFallback makes Adjust's correction in the in-process fallback
// alone, with no Redis call: the correction of a request the fallback
// admitted (Decision.Fallback), whose tokens Redis never counted.
func (r *Redis) AdjustFallback(tenant string, limits []Limit, delta int64, mode FailMode, replicas int) error {
	a, err := r.PrepareAdjust(tenant, limits, delta, mode, replicas)
	if err != nil {
		return err
	}
	defer a.Release()
	r.fallback.adjust(&a.call.plan, tenant, limits, delta, r.divisor(replicas))
	return nil
}

// failed classifies the error of a script call: nil means decide with the
// fallback (Redis is unavailable and mode is FailOpen); otherwise it is the
// error to return, counted.
func (r *Redis) failed(err error, mode FailMode, tenant string) error {
	if !unavailable(err) {
		r.errs.Add(1)
		return fmt.Errorf("rate limiting tenant %q: %w", tenant, err)
	}
	if mode != FailOpen {
		r.errs.Add(1)
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// divisor is what FailOpen divides the limits by: the live replica count
// (frozen at its last value while Redis is unreachable), at least floor
// (the request's Replicas), at least 1.
func (r *Redis) divisor(floor int) int64 {
	n := int64(floor)
	if r.fleet != nil {
		n = max(n, int64(r.fleet.Live()))
	}
	return max(n, 1)
}

func (r *Redis) count(d Decision) {
	if d.Allowed {
		r.admitted.Add(1)
	} else {
		r.rejected.Add(1)
	}
}

func (r *Redis) put(c *redisCall) {
	clear(c.keys) // drop the references to this call's string
	clear(c.args)
	c.keys, c.args = c.keys[:0], c.args[:0]
	r.calls.Put(c)
}

// unavailable reports whether err means Redis cannot serve right now (no
// connection, a timeout, or a server that is loading, busy with a script,
// or without its master or cluster), as opposed to a reply that is wrong.
func unavailable(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return redisx.IsUnavailable(err)
	}
	msg := re.Error()
	return re.IsLoading() || re.IsClusterDown() || re.IsTryAgain() ||
		strings.HasPrefix(msg, "BUSY ") || strings.HasPrefix(msg, "MASTERDOWN")
}
