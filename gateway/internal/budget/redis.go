package budget

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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
	// KeyTTL is how long a monthly scope's keys live: spent from when it
	// is seeded or corrected, holds and leases from the last Extend or
	// Reserve that made the scope's first hold (no other outstanding), or
	// from one Reserve in 64 (default DefaultKeyTTL, 40 days, longer than
	// any month and its late settles, so a scope that always has holds
	// outstanding keeps its keys for its whole period). Rounded down to ms.
	KeyTTL time.Duration
	// DayKeyTTL is the same for a daily scope (default DefaultDayKeyTTL,
	// 3 days: the day, and late settles after it).
	DayKeyTTL time.Duration
}

// Redis is a Counter shared by every replica that uses the same Redis.
// Its methods are safe for concurrent use. It holds no state of its own
// beyond options, so it keeps working across Redis restarts (re-seeding the
// counters the restart lost).
type Redis struct {
	c      *redisx.Client
	seed   Seeder
	prefix string
	now    func() time.Time // Crossing.At

	keyTTL        [2]time.Duration // by Window
	keyTTLArg     [2]string        // the same in ms, formatted once
	settledTTLArg string           // SettledTTL in ms, formatted once

	flight singleflight.Group // one Seeder call per spent key at a time
}

// NewRedis returns a Redis counter on c. seed may be nil (counters start at
// 0). It panics if opts.Prefix contains '{' or '}', a programming error
// that would split a tenant across Redis Cluster slots.
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
	if opts.DayKeyTTL < time.Millisecond {
		opts.DayKeyTTL = DefaultDayKeyTTL
	}
	r := &Redis{
		c:             c,
		seed:          seed,
		prefix:        opts.Prefix,
		now:           time.Now,
		settledTTLArg: strconv.FormatInt(opts.SettledTTL.Milliseconds(), 10),
	}
	r.keyTTL[Month], r.keyTTL[Day] = opts.KeyTTL, opts.DayKeyTTL
	for w, d := range r.keyTTL {
		r.keyTTLArg[w] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	return r
}

// Reserve implements Counter with one script call when warm.
func (r *Redis) Reserve(ctx context.Context, tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, amount, lease); err != nil {
		return Reservation{}, err
	}
	return r.hold(ctx, "reserve", reserveScript, tenant, requestID, scopes, amount, lease)
}

// Extend implements Counter with one script call when warm.
func (r *Redis) Extend(ctx context.Context, tenant, requestID string, scopes []Scope, more int64, lease time.Duration) (Reservation, error) {
	if err := checkHold(requestID, more, lease); err != nil {
		return Reservation{}, err
	}
	return r.hold(ctx, "extend", extendScript, tenant, requestID, scopes, more, lease)
}

func (r *Redis) hold(ctx context.Context, op string, s *rueidis.Lua, tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (Reservation, error) {
	h, err := r.prepareHold(op, s, tenant, requestID, scopes, amount, lease)
	if err != nil {
		return Reservation{}, err
	}
	return h.alone(ctx)
}

// prepareHold makes the keys and arguments of a Reserve or an Extend.
func (r *Redis) prepareHold(op string, s *rueidis.Lua, tenant, requestID string, scopes []Scope, amount int64, lease time.Duration) (*Hold, error) {
	if err := checkScopes(scopes); err != nil {
		return nil, err
	}
	h := &Hold{r: r, op: op, script: s, tenant: tenant, requestID: requestID, scopes: scopes}
	h.keys = r.keys(tenant, requestID, scopes, holdSuffixes[:])
	h.args = make([]string, 3, 3+2*len(scopes))
	h.args[0] = requestID
	h.args[1] = strconv.FormatInt(amount, 10)
	h.args[2] = strconv.FormatInt(max(lease.Microseconds(), 1), 10)
	for _, sc := range scopes {
		h.args = append(h.args, strconv.FormatInt(min(sc.Limit, maxExact), 10), r.keyTTLArg[sc.Window])
	}
	return h, nil
}

// Shrink implements Counter with one script call.
func (r *Redis) Shrink(ctx context.Context, tenant, requestID string, scopes []Scope, to int64) error {
	if err := checkShrink(requestID, to); err != nil {
		return err
	}
	if err := checkScopes(scopes); err != nil {
		return err
	}
	keys := r.keys(tenant, "", scopes, shrinkSuffixes[:])
	v, err := r.exec(ctx, "shrink", shrinkScript, keys, []string{requestID, strconv.FormatInt(to, 10)})
	if err != nil {
		return err
	}
	if len(v) != 2 || v[0] != codeAdmitted {
		return fmt.Errorf("budget shrink: unexpected reply %v", v)
	}
	return nil
}

// Settle implements Counter with one script call when warm.
func (r *Redis) Settle(ctx context.Context, tenant, requestID string, scopes []Scope, actual int64) ([]Crossing, error) {
	st, err := r.PrepareSettle(tenant, requestID, scopes, actual)
	if err != nil {
		return nil, err
	}
	return st.alone(ctx)
}

// Status implements Counter with one script call when warm.
func (r *Redis) Status(ctx context.Context, tenant string, s Scope) (spent, reserved int64, err error) {
	if err := checkScope(s); err != nil {
		return 0, 0, err
	}
	scopes := []Scope{s}
	keys := r.keys(tenant, "", scopes, holdSuffixes[:])
	v, err := r.run(ctx, "status", statusScript, tenant, scopes, keys, nil, 0)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 3 || v[0] != codeAdmitted {
		return 0, 0, fmt.Errorf("budget status: unexpected reply %v", v)
	}
	return v[1], v[2], nil
}

// Correct implements Counter with one SET, which also restarts the key's
// TTL. It does not call the Seeder.
func (r *Redis) Correct(ctx context.Context, tenant string, s Scope, spent int64) error {
	if err := checkSpent(spent); err != nil {
		return err
	}
	if err := checkScope(s); err != nil {
		return err
	}
	key := r.keys(tenant, "", []Scope{s}, holdSuffixes[:1])[0]
	ttl := r.keyTTL[s.Window].Milliseconds()
	err := r.c.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
		return b.Set().Key(key).Value(strconv.FormatInt(spent, 10)).PxMilliseconds(ttl).Build()
	}).Error()
	if err != nil {
		return redisError("correct", err)
	}
	return nil
}

// run calls a script, and if it answers that some scopes have no spent
// key, seeds them and calls the script once more. The spent key of scope j
// is keys[first+3j].
func (r *Redis) run(ctx context.Context, op string, s *rueidis.Lua, tenant string, scopes []Scope, keys, args []string, first int) ([]int64, error) {
	v, err := r.exec(ctx, op, s, keys, args)
	if err != nil || v[0] != codeSeed {
		return v, err
	}
	if err := r.seedScopes(ctx, tenant, scopes, keys, first, v[1:]); err != nil {
		return nil, err
	}
	v, err = r.exec(ctx, op, s, keys, args)
	if err == nil && v[0] == codeSeed {
		return nil, fmt.Errorf("budget %s: %v vanished right after they were seeded", op, v[1:])
	}
	return v, err
}

// seedScopes seeds the scopes a script named (1-based), at once when there
// are several: a cold request of three scopes waits for one Seeder call,
// not three in a row.
func (r *Redis) seedScopes(ctx context.Context, tenant string, scopes []Scope, keys []string, first int, missing []int64) error {
	for _, i := range missing {
		if i < 1 || i > int64(len(scopes)) {
			return fmt.Errorf("budget: seed reply names scope %d of %d", i, len(scopes))
		}
	}
	if len(missing) == 1 {
		j := int(missing[0]) - 1
		return r.seedSpent(ctx, tenant, scopes[j], keys[first+3*j])
	}
	errs := make([]error, len(missing))
	var wg sync.WaitGroup
	for n, i := range missing {
		j := int(i) - 1
		wg.Go(func() { errs[n] = r.seedSpent(ctx, tenant, scopes[j], keys[first+3*j]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Redis) exec(ctx context.Context, op string, s *rueidis.Lua, keys, args []string) ([]int64, error) {
	reply, err := r.c.Exec(ctx, s, keys, args).ToMessage()
	if err != nil {
		return nil, redisError(op, err)
	}
	return r.ints(op, reply)
}

// seedSpent sets a scope's spent key from the Seeder unless it exists.
// Concurrent callers for one key in this process share one Seeder call
// (made with the first caller's ctx, whose end fails them all); across
// replicas SET NX keeps the first value.
func (r *Redis) seedSpent(ctx context.Context, tenant string, s Scope, key string) error {
	_, err, _ := r.flight.Do(key, func() (any, error) {
		var spent int64
		if r.seed != nil {
			var err error
			if spent, err = r.seed(ctx, tenant, s); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, seedError(tenant, s, err))
			}
			if spent < 0 {
				return nil, seedError(tenant, s, fmt.Errorf("%w: negative spend %d", ErrInvalid, spent))
			}
		}
		// SET NX may be repeated safely, so rueidis may retry it on a
		// broken connection (after a Redis restart the client's idle
		// connections fail once each) instead of costing a Seeder call.
		ttl := r.keyTTL[s.Window].Milliseconds()
		err := r.c.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
			return b.Set().Key(key).Value(strconv.FormatInt(spent, 10)).Nx().PxMilliseconds(ttl).Build().ToRetryable()
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

// Suffixes of a scope's keys, in the order the scripts take them.
var (
	holdSuffixes   = [3]string{"spent", "holds", "leases"}
	shrinkSuffixes = [2]string{"holds", "leases"}
)

// keys returns, if requestID is not empty, the request's settled marker,
// then for each scope its keys named by suffixes. The keys are substrings
// of one string: one allocation for the text instead of one per key.
func (r *Redis) keys(tenant, requestID string, scopes []Scope, suffixes []string) []string {
	et := redisx.TenantTag(tenant)
	n := len(scopes) * len(suffixes)
	size := 0
	if requestID != "" {
		n++
		size += len(r.prefix) + len(et) + len("{}:settled:") + len(requestID)
	}
	for _, s := range scopes {
		base := len(r.prefix) + len(et) + len("{}:") + len(s.Kind) + len(s.ID) + len(s.Period) + 8 // ':' ×3, escapes
		for _, suf := range suffixes {
			size += base + len(suf)
		}
	}
	var b strings.Builder
	b.Grow(size)
	var inline [16]int
	ends := inline[:0]
	tag := func() {
		b.WriteString(r.prefix)
		b.WriteByte('{')
		b.WriteString(et)
		b.WriteString("}:")
	}
	if requestID != "" {
		tag()
		b.WriteString("settled:")
		b.WriteString(requestID)
		ends = append(ends, b.Len())
	}
	for _, s := range scopes {
		for _, suf := range suffixes {
			tag()
			writeEscaped(&b, s.Kind)
			b.WriteByte(':')
			writeEscaped(&b, s.ID)
			b.WriteByte(':')
			writeEscaped(&b, s.Period)
			b.WriteByte(':')
			b.WriteString(suf)
			ends = append(ends, b.Len())
		}
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
// key's fields (and '%' itself), so the mapping is one-to-one and the tag
// never ends early. It returns s itself when nothing needs escaping.
func escape(s string) string {
	if !strings.ContainsAny(s, "%{}:") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	writeEscaped(&b, s)
	return b.String()
}

// writeEscaped writes escape(s) to b.
func writeEscaped(b *strings.Builder, s string) {
	if !strings.ContainsAny(s, "%{}:") {
		b.WriteString(s)
		return
	}
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
}
