package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// RedisOptions configure a Redis counter. Zero fields take their defaults.
type RedisOptions struct {
	// Prefix starts every key (default DefaultPrefix, "tollgate:budget:").
	// It must not contain '{' or '}': the hash tag is the counter's.
	Prefix string
	// SettledTTL is how long a Settle marker lives, the idempotency window
	// of Settle (default DefaultSettledTTL, 1h). Rounded down to ms.
	SettledTTL time.Duration
	// KeyTTL is how long a tenant-month's keys live: spent from when it is
	// seeded or corrected, holds and leases from the last Reserve or Extend
	// (default DefaultKeyTTL, 40 days, longer than any month). Rounded
	// down to ms.
	KeyTTL time.Duration
}

// Redis is a Counter shared by every replica that uses the same Redis.
// Its methods are safe for concurrent use. It holds no state of its own
// beyond options, so it keeps working across Redis restarts (re-seeding the
// counters the restart lost).
type Redis struct {
	c      *redisx.Client
	seed   Seeder
	prefix string
	keyTTL time.Duration

	settledTTLArg string // SettledTTL in ms, formatted once
	keyTTLArg     string // KeyTTL in ms, formatted once

	flight singleflight.Group // one Seeder call per spent key at a time
}

// NewRedis returns a Redis counter on c. seed may be nil (counters start at
// 0). It panics if opts.Prefix contains '{' or '}', a programming error
// that would split a tenant-month across Redis Cluster slots.
func NewRedis(c *redisx.Client, seed Seeder, opts RedisOptions) *Redis {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		panic(fmt.Sprintf("budget: key prefix %q contains a brace", opts.Prefix))
	}
	if opts.SettledTTL < time.Millisecond {
		opts.SettledTTL = DefaultSettledTTL
	}
	if opts.KeyTTL < time.Millisecond {
		opts.KeyTTL = DefaultKeyTTL
	}
	return &Redis{
		c:             c,
		seed:          seed,
		prefix:        opts.Prefix,
		keyTTL:        opts.KeyTTL,
		settledTTLArg: strconv.FormatInt(opts.SettledTTL.Milliseconds(), 10),
		keyTTLArg:     strconv.FormatInt(opts.KeyTTL.Milliseconds(), 10),
	}
}

// Reserve implements Counter with one script call when warm.
func (r *Redis) Reserve(ctx context.Context, tenant, month, requestID string, amount, limit int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, amount, lease); err != nil {
		return Reservation{}, err
	}
	return r.hold(ctx, "reserve", reserveScript, tenant, month, requestID, amount, limit, lease)
}

// Extend implements Counter with one script call when warm.
func (r *Redis) Extend(ctx context.Context, tenant, month, requestID string, more, limit int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, more, lease); err != nil {
		return Reservation{}, err
	}
	return r.hold(ctx, "extend", extendScript, tenant, month, requestID, more, limit, lease)
}

func (r *Redis) hold(ctx context.Context, op string, s *rueidis.Lua, tenant, month, requestID string, amount, limit int64, lease time.Duration) (Reservation, error) {
	keys := r.keys(tenant, month, requestID)
	args := []string{
		requestID,
		strconv.FormatInt(amount, 10),
		strconv.FormatInt(min(limit, maxExact), 10),
		strconv.FormatInt(max(lease.Microseconds(), 1), 10),
		r.keyTTLArg,
	}
	v, err := r.run(ctx, op, s, tenant, month, keys, args)
	if err != nil {
		return Reservation{}, err
	}
	if len(v) != 3 {
		return Reservation{}, fmt.Errorf("budget %s: unexpected reply %v", op, v)
	}
	res := Reservation{Spent: v[1], Reserved: v[2], Remaining: remaining(limit, v[1], v[2])}
	switch v[0] {
	case codeRefused:
	case codeAdmitted:
		res.Admitted = true
	case codeDuplicate:
		res.Admitted, res.Duplicate = true, true
	case codeRecreated:
		res.Admitted, res.Recreated = true, true
	case codeSettled:
		return Reservation{}, settledError(requestID)
	default:
		return Reservation{}, fmt.Errorf("budget %s: unexpected reply %v", op, v)
	}
	return res, nil
}

// Shrink implements Counter with one script call.
func (r *Redis) Shrink(ctx context.Context, tenant, month, requestID string, to int64) error {
	if err := checkShrink(requestID, to); err != nil {
		return err
	}
	keys := r.keys(tenant, month, "")
	v, err := r.exec(ctx, "shrink", shrinkScript, keys[1:], []string{requestID, strconv.FormatInt(to, 10)})
	if err != nil {
		return err
	}
	if len(v) != 2 || (v[0] != codeAdmitted && v[0] != codeRefused) {
		return fmt.Errorf("budget shrink: unexpected reply %v", v)
	}
	return nil
}

// Settle implements Counter with one script call when warm.
func (r *Redis) Settle(ctx context.Context, tenant, month, requestID string, actual int64) (int64, error) {
	if err := checkSettle(requestID, actual); err != nil {
		return 0, err
	}
	keys := r.keys(tenant, month, requestID)
	args := []string{requestID, strconv.FormatInt(actual, 10), r.settledTTLArg}
	v, err := r.run(ctx, "settle", settleScript, tenant, month, keys, args)
	if err != nil {
		return 0, err
	}
	if len(v) != 2 || (v[0] != codeAdmitted && v[0] != codeRefused) {
		return 0, fmt.Errorf("budget settle: unexpected reply %v", v)
	}
	return v[1], nil
}

// Status implements Counter with one script call when warm.
func (r *Redis) Status(ctx context.Context, tenant, month string) (spent, reserved int64, err error) {
	keys := r.keys(tenant, month, "")
	v, err := r.run(ctx, "status", statusScript, tenant, month, keys, nil)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 3 || v[0] != codeAdmitted {
		return 0, 0, fmt.Errorf("budget status: unexpected reply %v", v)
	}
	return v[1], v[2], nil
}

// Correct implements Counter with one SET, which also restarts KeyTTL. It
// does not call the Seeder.
func (r *Redis) Correct(ctx context.Context, tenant, month string, spent int64) error {
	if err := checkSpent(spent); err != nil {
		return err
	}
	key := r.base(tenant, month) + "spent"
	err := r.c.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
		return b.Set().Key(key).Value(strconv.FormatInt(spent, 10)).PxMilliseconds(r.keyTTL.Milliseconds()).Build()
	}).Error()
	if err != nil {
		return redisError("correct", err)
	}
	return nil
}

// run calls a script, and if the tenant-month has no spent key, seeds it
// and calls the script once more.
func (r *Redis) run(ctx context.Context, op string, s *rueidis.Lua, tenant, month string, keys, args []string) ([]int64, error) {
	v, err := r.exec(ctx, op, s, keys, args)
	if err != nil || v[0] != codeSeed {
		return v, err
	}
	if err := r.seedSpent(ctx, tenant, month, keys[0]); err != nil {
		return nil, err
	}
	v, err = r.exec(ctx, op, s, keys, args)
	if err == nil && v[0] == codeSeed {
		return nil, fmt.Errorf("budget %s: %s vanished right after it was seeded", op, keys[0])
	}
	return v, err
}

func (r *Redis) exec(ctx context.Context, op string, s *rueidis.Lua, keys, args []string) ([]int64, error) {
	res := r.c.Exec(ctx, s, keys, args)
	if err := res.Error(); err != nil {
		return nil, redisError(op, err)
	}
	v, err := res.AsIntSlice()
	if err != nil || len(v) == 0 {
		return nil, fmt.Errorf("budget %s: unexpected reply: %v", op, err)
	}
	return v, nil
}

// seedSpent sets the spent key from the Seeder unless it exists. Concurrent
// callers for one key in this process share one Seeder call (made with the
// first caller's ctx, whose end fails them all); across replicas SET NX
// keeps the first value.
func (r *Redis) seedSpent(ctx context.Context, tenant, month, key string) error {
	_, err, _ := r.flight.Do(key, func() (any, error) {
		var spent int64
		if r.seed != nil {
			var err error
			if spent, err = r.seed(ctx, tenant, month); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, seedError(tenant, month, err))
			}
			if spent < 0 {
				return nil, seedError(tenant, month, fmt.Errorf("%w: negative spend %d", ErrInvalid, spent))
			}
		}
		// SET NX may be repeated safely, so rueidis may retry it on a
		// broken connection (after a Redis restart the client's idle
		// connections fail once each) instead of costing a Seeder call.
		err := r.c.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
			return b.Set().Key(key).Value(strconv.FormatInt(spent, 10)).Nx().PxMilliseconds(r.keyTTL.Milliseconds()).Build().ToRetryable()
		}).Error()
		if err != nil && !rueidis.IsRedisNil(err) { // nil: someone else seeded first
			return nil, redisError("seed", err)
		}
		return nil, nil
	})
	return err
}

func redisError(op string, err error) error {
	if redisx.IsUnavailable(err) || errors.Is(err, redisx.ErrUnavailable) {
		return fmt.Errorf("budget %s: %w: %w", op, ErrUnavailable, err)
	}
	return fmt.Errorf("budget %s: %w", op, err)
}

// base is the key prefix of a tenant-month: <prefix>{<tenant>:<month>}:.
func (r *Redis) base(tenant, month string) string {
	return r.prefix + "{" + escape(tenant) + ":" + escape(month) + "}:"
}

// keySuffixes follow base; the settled marker's is followed by the request
// id.
var keySuffixes = [4]string{"spent", "holds", "leases", "settled:"}

// keys returns spent, holds, leases and (if requestID is not empty) the
// settled marker of requestID. The keys are substrings of one string: one
// allocation instead of five.
func (r *Redis) keys(tenant, month, requestID string) []string {
	et, em := escape(tenant), escape(month)
	n := len(keySuffixes)
	if requestID == "" {
		n--
	}
	baseLen := len(r.prefix) + len(et) + len(em) + 4 // "{", ":", "}:"
	size := n*baseLen + len(requestID)
	for _, s := range keySuffixes[:n] {
		size += len(s)
	}
	var b strings.Builder
	b.Grow(size)
	var ends [len(keySuffixes)]int
	for i, s := range keySuffixes[:n] {
		b.WriteString(r.prefix)
		b.WriteByte('{')
		b.WriteString(et)
		b.WriteByte(':')
		b.WriteString(em)
		b.WriteString("}:")
		b.WriteString(s)
		if i == 3 {
			b.WriteString(requestID)
		}
		ends[i] = b.Len()
	}
	all := b.String()
	keys := make([]string, n)
	start := 0
	for i := range keys {
		keys[i] = all[start:ends[i]]
		start = ends[i]
	}
	return keys
}

// escape percent-encodes the bytes that delimit the hash tag and the
// tenant:month separator (and '%' itself), so the mapping is one-to-one and
// the tag never ends early. It returns s itself when nothing needs escaping.
func escape(s string) string {
	if !strings.ContainsAny(s, "%{}:") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		case ':':
			b.WriteString("%3A")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
