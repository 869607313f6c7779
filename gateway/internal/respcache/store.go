package respcache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/redis/rueidis"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
)

// ErrTooLarge is returned by Put for an entry over Config.MaxEntryBytes.
var ErrTooLarge = errors.New("respcache: entry over the size cap")

// MaxTTL is the longest time an entry may be stored for.
const MaxTTL = 24 * time.Hour

// Defaults of Config.
const (
	DefaultPrefix        = "tollgate:cache:"
	DefaultLocalMaxBytes = 64 << 20
	DefaultMaxEntryBytes = 4 << 20
	DefaultTimeout       = 100 * time.Millisecond
)

// Config configures a Store.
type Config struct {
	// Redis: nil for in-process only.
	Redis         *redisx.Client
	Prefix        string        // key prefix in Redis; "" means "tollgate:cache:"
	LocalMaxBytes int64         // the in-process layer's cost cap (encoded bytes); 0 means 64 MiB; <0 disables it
	MaxEntryBytes int           // entries larger are not stored (Put returns ErrTooLarge); 0 means 4 MiB
	Timeout       time.Duration // per Redis command; 0 means 100 ms
	// LocalTTL bounds how long the in-process layer keeps an entry (at
	// most its own expiry): how long a replica may serve its copy after
	// another replica replaced the entry in Redis. 0 means the entry's
	// whole time to live.
	LocalTTL time.Duration
	Now      func() time.Time
}

// Stats for metrics. Misses counts every Get that returned no entry, those
// that failed included; Errors counts the Gets that failed (Redis down or
// slow, a corrupt value); PutErrors the Puts Redis failed; TooLarge the
// Puts refused by the size cap; Coalesced the Leads that joined a flight.
type Stats struct{ LocalHits, RedisHits, Misses, Errors, Puts, PutErrors, TooLarge, Coalesced int64 }

// Store is the two-level cache: an in-process ristretto in front of Redis.
// Safe for concurrent use.
type Store struct {
	redis    *redisx.Client
	prefix   string
	maxEntry int
	timeout  time.Duration
	localTTL time.Duration
	now      func() time.Time

	local *ristretto.Cache[string, *item] // nil when disabled

	// recent keeps the entries of the last Puts (at most recentMaxCount
	// and recentMax bytes) beside ristretto, which may drop a Set or evict
	// an entry under other Puts' pressure: a Put must be visible to the
	// next Get of this replica. recentMu guards only map and slice work.
	recentMu    sync.Mutex
	recent      map[string]*item
	recentOrder []*item // oldest first; an item no longer in recent is skipped
	recentBytes int64
	recentMax   int64

	flightsMu sync.Mutex
	flights   map[string]*Flight

	localHits, redisHits, misses, errs, puts, putErrs, tooLarge, coalesced atomic.Int64
}

// item is an entry in the in-process layer. It is shared by every Get
// that finds it and never written after it is made.
type item struct {
	key  string
	e    Entry
	exp  int64 // Unix nanoseconds (by Config.Now): not served from then on
	cost int64
}

// recentMaxCount bounds the entries kept beside ristretto.
const recentMaxCount = 256

// New returns a Store. Redis nil and LocalMaxBytes < 0 (no layer at all)
// is an error.
func New(cfg Config) (*Store, error) {
	s := &Store{
		redis:    cfg.Redis,
		prefix:   cfg.Prefix,
		maxEntry: cfg.MaxEntryBytes,
		timeout:  cfg.Timeout,
		localTTL: cfg.LocalTTL,
		now:      cfg.Now,
		flights:  map[string]*Flight{},
	}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.maxEntry <= 0 {
		s.maxEntry = DefaultMaxEntryBytes
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	maxBytes := cfg.LocalMaxBytes
	if maxBytes == 0 {
		maxBytes = DefaultLocalMaxBytes
	}
	if maxBytes < 0 && cfg.Redis == nil {
		return nil, errors.New("respcache: no layer: Redis is nil and the in-process layer is disabled")
	}
	if maxBytes > 0 {
		c, err := ristretto.NewCache(&ristretto.Config[string, *item]{
			NumCounters: max(maxBytes/1024*10, 1000), // ~10 per KiB entry
			MaxCost:     maxBytes,
			BufferItems: 64,
		})
		if err != nil {
			return nil, fmt.Errorf("respcache: in-process cache: %w", err)
		}
		s.local = c
		s.recent = map[string]*item{}
		s.recentMax = max(maxBytes/8, int64(s.maxEntry))
	}
	return s, nil
}

// Close releases the in-process layer, once no Get or Put runs. The Redis
// client is the caller's.
func (s *Store) Close() {
	if s.local != nil {
		s.local.Close()
	}
}

// Stats returns the counters so far.
func (s *Store) Stats() Stats {
	return Stats{
		LocalHits: s.localHits.Load(), RedisHits: s.redisHits.Load(), Misses: s.misses.Load(),
		Errors: s.errs.Load(), Puts: s.puts.Load(), PutErrors: s.putErrs.Load(),
		TooLarge: s.tooLarge.Load(), Coalesced: s.coalesced.Load(),
	}
}

// Get looks key up: the in-process layer first, then Redis. A hit in Redis
// is kept in-process for the entry's remaining time. An entry at or past
// its expiry is never returned. Redis failing or slower than the timeout,
// or a corrupt value, is a miss with an error. The Entry returned is shared
// with the cache: its slices must not be written to.
func (s *Store) Get(ctx context.Context, key string) (Entry, bool, error) {
	now := s.now().UnixNano()
	if it := s.getLocal(key, now); it != nil {
		s.localHits.Add(1)
		return it.e, true, nil
	}
	if s.redis == nil {
		s.misses.Add(1)
		return Entry{}, false, nil
	}
	e, exp, ok, err := s.getRedis(ctx, key)
	if err != nil {
		s.misses.Add(1)
		s.errs.Add(1)
		return Entry{}, false, err
	}
	// Compare with the time now, after the round trip: the value may have
	// expired on the way.
	now = s.now().UnixNano()
	if !ok || now >= exp {
		s.misses.Add(1)
		return Entry{}, false, nil
	}
	s.redisHits.Add(1)
	if s.local != nil {
		lexp := s.localExpiry(now, exp)
		s.putLocal(&item{key: key, e: e, exp: lexp, cost: s.cost(key, &e)}, time.Duration(lexp-now))
	}
	return e, true, nil
}

func (s *Store) getLocal(key string, now int64) *item {
	if s.local == nil {
		return nil
	}
	// The recent entries first: one of them is the last Put of its key,
	// which ristretto may not have applied yet (it may still hold an
	// older one).
	s.recentMu.Lock()
	it := s.recent[key]
	if it != nil && now >= it.exp {
		delete(s.recent, key)
		s.recentBytes -= it.cost
		it = nil
	}
	s.recentMu.Unlock()
	if it != nil {
		return it
	}
	// An expired item is left for ristretto's own TTL to remove: a Del
	// here could remove a newer entry a concurrent Put just stored.
	if it, ok := s.local.Get(key); ok && it.key == key && now < it.exp {
		return it
	}
	return nil
}

// The Redis value: the expiry (Unix milliseconds, rounded down so the
// value is never served past its true expiry) as 8 bytes big-endian, then
// the Entry's encoding.
const expiryBytes = 8

func (s *Store) getRedis(ctx context.Context, key string) (e Entry, exp int64, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rkey := s.prefix + key
	b, err := s.redis.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
		return b.Get().Key(rkey).Build()
	}).AsBytes()
	if rueidis.IsRedisNil(err) {
		return Entry{}, 0, false, nil
	}
	if err != nil {
		return Entry{}, 0, false, fmt.Errorf("respcache: redis GET: %w", err)
	}
	if len(b) < expiryBytes {
		return Entry{}, 0, false, fmt.Errorf("respcache: redis value of %q: %w: %d bytes", rkey, errEntry, len(b))
	}
	expMs := binary.BigEndian.Uint64(b)
	if expMs > math.MaxInt64/uint64(time.Millisecond) {
		return Entry{}, 0, false, fmt.Errorf("respcache: redis value of %q: %w: expiry %d", rkey, errEntry, expMs)
	}
	e, err = Unmarshal(b[expiryBytes:])
	if err != nil {
		return Entry{}, 0, false, fmt.Errorf("respcache: redis value of %q: %w", rkey, err)
	}
	return e, int64(expMs) * int64(time.Millisecond), true, nil
}

func (s *Store) cost(key string, e *Entry) int64 {
	return int64(e.Size() + len(key) + 64)
}

// Put stores e under key for ttl (> 0, at most MaxTTL): in-process at once
// (the next Get on this replica finds it before Put returns), then in
// Redis with SET PX. Redis failing returns the error after the in-process
// store. e is copied: the caller may reuse it.
func (s *Store) Put(ctx context.Context, key string, e *Entry, ttl time.Duration) error {
	if e == nil {
		return errors.New("respcache: Put of a nil entry")
	}
	if ttl <= 0 || ttl > MaxTTL {
		return fmt.Errorf("respcache: ttl %v out of (0, %v]", ttl, MaxTTL)
	}
	size := e.Size()
	if size > s.maxEntry {
		s.tooLarge.Add(1)
		return fmt.Errorf("%w: %d bytes (cap %d)", ErrTooLarge, size, s.maxEntry)
	}
	s.puts.Add(1)
	now := s.now()
	exp := now.Add(ttl).UnixNano()
	val := make([]byte, expiryBytes, expiryBytes+size)
	binary.BigEndian.PutUint64(val, uint64(now.Add(ttl).UnixMilli()))
	val = e.Marshal(val)
	if s.local != nil {
		// The local copy aliases val, which nothing writes after this.
		ce, err := Unmarshal(val[expiryBytes:])
		if err != nil { // Marshal's own output: cannot happen
			return fmt.Errorf("respcache: %w", err)
		}
		lexp := s.localExpiry(now.UnixNano(), exp)
		s.putLocal(&item{key: key, e: ce, exp: lexp, cost: s.cost(key, &ce)}, time.Duration(lexp-now.UnixNano()))
	}
	if s.redis == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	px := ttl.Milliseconds()
	if px <= 0 {
		px = 1
	}
	rkey := s.prefix + key
	err := s.redis.Do(ctx, func(b rueidis.Builder) rueidis.Completed {
		return b.Set().Key(rkey).Value(rueidis.BinaryString(val)).PxMilliseconds(px).Build()
	}).Error()
	if err != nil {
		s.putErrs.Add(1)
		return fmt.Errorf("respcache: redis SET: %w", err)
	}
	return nil
}

// putLocal stores it in ristretto and keeps it among the recent entries,
// which Get reads when ristretto does not have it yet (its Sets of new keys
// are applied by its own goroutine, in order) or dropped it. Puts of one
// key reach ristretto in the order they were made (a Set of a key present
// replaces the value at once; of a key absent, goes through one FIFO
// buffer), so it never ends up holding an older entry than the last Put's.
// There is no wait for ristretto: a Put costs no hand-off to its goroutine.
func (s *Store) putLocal(it *item, ttl time.Duration) {
	// ristretto's TTL (real time, by the second) only frees the memory
	// early; item.exp decides what is served.
	s.local.SetWithTTL(it.key, it, it.cost, ttl)
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	if old := s.recent[it.key]; old != nil {
		delete(s.recent, it.key)
		s.recentBytes -= old.cost
	}
	if it.cost > s.recentMax {
		return
	}
	s.recent[it.key] = it
	s.recentBytes += it.cost
	s.recentOrder = append(s.recentOrder, it)
	for len(s.recent) > recentMaxCount || s.recentBytes > s.recentMax {
		o := s.recentOrder[0]
		s.recentOrder[0] = nil
		s.recentOrder = s.recentOrder[1:]
		if s.recent[o.key] == o {
			delete(s.recent, o.key)
			s.recentBytes -= o.cost
		}
	}
	if len(s.recentOrder) > 2*recentMaxCount {
		// Drop the replaced and expired items' places.
		live := make([]*item, 0, len(s.recent))
		for _, o := range s.recentOrder {
			if s.recent[o.key] == o {
				live = append(live, o)
			}
		}
		s.recentOrder = live
	}
}

// Flight is one request fetching a key; followers wait for it.
type Flight struct {
	s    *Store
	key  string
	once sync.Once
	done chan struct{}
}

// Lead registers the caller as the one request fetching key, or returns
// the flight already under way (leader false). A follower waits with Wait,
// then calls Get again; the leader stores first, then calls Done.
func (s *Store) Lead(key string) (f *Flight, leader bool) {
	s.flightsMu.Lock()
	defer s.flightsMu.Unlock()
	if f := s.flights[key]; f != nil {
		s.coalesced.Add(1)
		return f, false
	}
	f = &Flight{s: s, key: key, done: make(chan struct{})}
	s.flights[key] = f
	return f, true
}

// Wait returns when the leader called Done (nil), or ctx ended (its error).
func (f *Flight) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done ends the flight: the key is free for a new leader and the followers
// are released. Only the leader calls it; calls after the first do nothing.
func (f *Flight) Done() {
	f.once.Do(func() {
		f.s.flightsMu.Lock()
		if f.s.flights[f.key] == f {
			delete(f.s.flights, f.key)
		}
		f.s.flightsMu.Unlock()
		close(f.done)
	})
}

// flightCount is the number of flights under way (for tests).
func (s *Store) flightCount() int {
	s.flightsMu.Lock()
	defer s.flightsMu.Unlock()
	return len(s.flights)
}

// localExpiry is when the in-process copy of an entry expiring at exp
// (both Unix nanoseconds) stops being served: exp, or sooner with a
// LocalTTL.
func (s *Store) localExpiry(now, exp int64) int64 {
	if s.localTTL > 0 {
		return min(exp, now+int64(s.localTTL))
	}
	return exp
}
