package tenant

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"golang.org/x/sync/singleflight"
)

// Cache defaults; see CacheOptions.
const (
	DefaultCacheTTL         = 3 * time.Second
	DefaultCacheMaxTTL      = 30 * time.Second
	DefaultCacheNegativeTTL = time.Second
	DefaultCacheMaxEntries  = 100_000
	DefaultCacheLoadTimeout = 5 * time.Second
)

// reloadRetryMax bounds how long a stale entry whose background reload
// failed waits before the next reload is tried (min(TTL, reloadRetryMax)):
// a store that is down is probed about once a second, not once per request.
const reloadRetryMax = time.Second

// coarseTick is the resolution of the default clock. Reading time.Now on
// every lookup was 40-60% of a warm hit on a kvm-clock VM (140ns of 370ns,
// worse under parallel load); a clock refreshed every 20ms costs an atomic
// load, and 20ms is noise against TTLs of a second or more. (Each tick
// wakes a thread; at 5ms, 200 wakes a second were one in ten requests'
// worth of wakeups at 2,000 requests a second.)
const coarseTick = 20 * time.Millisecond

// ErrUnknownNotification is wrapped by HandleNotify's error for a payload
// it does not understand (after evicting everything).
var ErrUnknownNotification = errors.New("unknown tenant cache notification")

// CacheOptions configure a Cache. Zero fields take their defaults, except
// where stated.
type CacheOptions struct {
	// TTL is how long a loaded entry is fresh; 0 means DefaultCacheTTL (3s).
	// A TTL of zero in the policy ("read the store every time") is
	// PassThrough, not TTL 0.
	TTL time.Duration
	// PassThrough turns caching off: every Key and Price call reads the
	// store (no negative caching, no coalescing).
	PassThrough bool
	// MaxTTL caps TTL and NegativeTTL (larger values are clamped) and is the
	// oldest a stale entry may be and still be served while it is reloaded
	// (default 30s). Past it, callers wait for a load and see its error.
	MaxTTL time.Duration
	// NegativeTTL is how long an unknown key or model is remembered
	// (default 1s), so floods of bad keys do not reach the store.
	NegativeTTL time.Duration
	// MaxEntries caps the number of cached entries (default 100000).
	MaxEntries int64
	// LoadTimeout bounds one store read (default 5s). Loads are detached
	// from the cancellation of the request that started them, since other
	// callers share their result.
	LoadTimeout time.Duration
	// Now is the clock, for tests; nil means time.Now read every 5ms by a
	// background goroutine (stopped by Close).
	Now func() time.Time
}

// normalized applies defaults and clamps.
func (o CacheOptions) normalized() (CacheOptions, error) {
	if o.TTL < 0 || o.MaxTTL < 0 || o.NegativeTTL < 0 || o.LoadTimeout < 0 || o.MaxEntries < 0 {
		return o, errors.New("tenant cache: durations and MaxEntries must not be negative")
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultCacheMaxTTL
	}
	if o.TTL == 0 {
		o.TTL = DefaultCacheTTL
	}
	if o.NegativeTTL == 0 {
		o.NegativeTTL = DefaultCacheNegativeTTL
	}
	o.TTL = min(o.TTL, o.MaxTTL)
	o.NegativeTTL = min(o.NegativeTTL, o.MaxTTL)
	if o.MaxEntries == 0 {
		o.MaxEntries = DefaultCacheMaxEntries
	}
	if o.LoadTimeout == 0 {
		o.LoadTimeout = DefaultCacheLoadTimeout
	}
	return o, nil
}

// CacheStats are a Cache's counters since NewCache.
type CacheStats struct {
	Hits         uint64 // fresh entries served
	Misses       uint64 // calls that found no usable entry and waited for a load (every call in pass-through)
	StaleServed  uint64 // stale entries served while a reload runs
	Loads        uint64 // store reads
	LoadErrors   uint64 // store reads that failed (ErrNotFound is not a failure)
	NegativeHits uint64 // calls answered ErrNotFound from a negative entry
	Evictions    uint64 // eviction requests applied (Evict* calls, notifications)
	// CapacityEvictions are entries ristretto dropped to make room
	// (MaxEntries), not counting those dropped when the cache closes.
	CapacityEvictions uint64
}

// Cache is the read-through cache in front of a Store. Warm lookups are
// served from memory without touching the store; an entry older than TTL is
// served as is while one background reload refreshes it; callers without an
// entry share one store read per key. Evictions win against loads that were
// in flight when they happened. Returned values are shared: never modify
// them.
//
// Methods are safe for concurrent use, except Close.
type Cache struct {
	store Store
	opts  CacheOptions
	rc    *ristretto.Cache[uint64, *entry]
	sf    singleflight.Group
	seed  maphash.Seed
	// epoch is bumped by EvictAll: entries of an older epoch are ignored.
	epoch atomic.Uint64
	// The cache's clock counts nanoseconds since base: opts.Now's reading,
	// or coarse, refreshed every coarseTick until stopClock is closed.
	base      time.Time
	coarse    atomic.Int64
	stopClock chan struct{}

	mu sync.Mutex // guards the fields below; never held across a store read
	// inflight holds the loads running per flight key; an eviction marks
	// them stale so they do not insert what they read.
	inflight map[string][]*ticket
	owners   map[KeyHash]owner
	byTenant map[string]map[KeyHash]struct{}
	byPlan   map[string]map[KeyHash]struct{}
	closed   bool
	busy     sync.WaitGroup // loads and evictions that may touch rc

	stats struct {
		hits, misses, staleServed, loads, loadErrors, negativeHits, evictions atomic.Uint64
	}
	// capacity counts ristretto's evictions for room (its OnEvict).
	capacity *capacityEvictions
}

// capacityEvictions counts the entries ristretto evicts for room. Closing
// the cache evicts every entry through the same callback: those are not
// counted.
type capacityEvictions struct {
	n       atomic.Uint64
	closing atomic.Bool
}

func (c *capacityEvictions) evicted(*ristretto.Item[*entry]) {
	if !c.closing.Load() {
		c.n.Add(1)
	}
}

// entry kinds.
const (
	kindKey uint8 = iota + 1
	kindPrice
)

// entry is one cached load result. It is immutable once inserted, except
// for nextReload.
type entry struct {
	kind     uint8
	negative bool // the store said ErrNotFound
	hash     KeyHash
	model    string
	snap     *Snapshot
	price    *Price
	loadedAt int64 // on the cache's clock (see Cache.nanos)
	epoch    uint64
	// nextReload is the time (on the cache's clock) from which a stale
	// entry may start a reload; math.MaxInt64 while one runs.
	nextReload atomic.Int64
}

// ticket is the version of one in-flight load: an eviction of its key
// after the load began sets stale, and a stale load inserts nothing.
type ticket struct {
	flight     string
	epoch      uint64
	stale      bool // guarded by Cache.mu
	registered bool // counted in Cache.busy
}

// owner is what a cached key belongs to, for EvictTenant and EvictPlan.
type owner struct{ tenant, plan string }

// NewCache returns a cache reading through store.
func NewCache(store Store, opts CacheOptions) (*Cache, error) {
	if store == nil {
		return nil, errors.New("tenant cache: nil store")
	}
	o, err := opts.normalized()
	if err != nil {
		return nil, err
	}
	capacity := &capacityEvictions{}
	rc, err := ristretto.NewCache(&ristretto.Config[uint64, *entry]{
		OnEvict:            capacity.evicted,
		NumCounters:        10 * o.MaxEntries,
		MaxCost:            o.MaxEntries,
		BufferItems:        64,
		IgnoreInternalCost: true,
		// Slots are already hashes (see keySlot, priceSlot); identity is
		// checked against the entry, so no conflict hash is needed.
		KeyToHash: func(k uint64) (uint64, uint64) { return k, 0 },
	})
	if err != nil {
		return nil, fmt.Errorf("tenant cache: %w", err)
	}
	c := &Cache{
		store:    store,
		opts:     o,
		rc:       rc,
		capacity: capacity,
		seed:     maphash.MakeSeed(),
		inflight: make(map[string][]*ticket),
		owners:   make(map[KeyHash]owner),
		byTenant: make(map[string]map[KeyHash]struct{}),
		byPlan:   make(map[string]map[KeyHash]struct{}),
	}
	if o.Now != nil {
		c.base = o.Now()
	} else {
		c.base = time.Now()
		c.stopClock = make(chan struct{})
		go c.runClock(c.stopClock)
	}
	return c, nil
}

// runClock refreshes the default clock until stop is closed.
func (c *Cache) runClock(stop <-chan struct{}) {
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.coarse.Store(int64(time.Since(c.base))) // monotonic
		case <-stop:
			return
		}
	}
}

// nanos reads the cache's clock: nanoseconds since c.base.
func (c *Cache) nanos() int64 {
	if c.opts.Now != nil {
		return int64(c.opts.Now().Sub(c.base))
	}
	return c.coarse.Load()
}

// wallNow is the wall-clock time, for price lookups.
func (c *Cache) wallNow() time.Time {
	if c.opts.Now != nil {
		return c.opts.Now()
	}
	return time.Now()
}

// keySlot is a key entry's ristretto key: the hash is SHA-256, so its first
// 8 bytes are already uniformly distributed.
func keySlot(h KeyHash) uint64 { return binary.LittleEndian.Uint64(h[:8]) }

func (c *Cache) priceSlot(model string) uint64 { return maphash.String(c.seed, model) }

func keyFlight(h KeyHash) string      { return "k" + string(h[:]) }
func priceFlight(model string) string { return "p" + model }

// Key returns the snapshot of the key with hash h, or ErrNotFound for an
// unknown key (remembered for NegativeTTL). Revoked and expired keys are
// returned; check Snapshot.Usable.
func (c *Cache) Key(ctx context.Context, h KeyHash) (*Snapshot, error) {
	if c.opts.PassThrough {
		c.stats.misses.Add(1)
		e, err := c.fetchKey(ctx, h, time.Time{})
		return e.keyResult(err)
	}
	now := c.nanos()
	if e, ok := c.rc.Get(keySlot(h)); ok && e.kind == kindKey && e.hash == h {
		if served, ok := c.serve(e, now); ok {
			return served.keyResult(nil)
		}
	}
	c.stats.misses.Add(1)
	isKey := func(e *entry) bool { return e.kind == kindKey && e.hash == h }
	e, err := c.load(ctx, keyFlight(h), keySlot(h), isKey, func(ctx context.Context, at time.Time) (*entry, error) {
		return c.fetchKey(ctx, h, at)
	})
	return e.keyResult(err)
}

// Price returns the price of model in force now (as of the entry's load:
// a price change takes effect in the cache within TTL), or ErrNotFound.
func (c *Cache) Price(ctx context.Context, model string) (*Price, error) {
	if c.opts.PassThrough {
		c.stats.misses.Add(1)
		e, err := c.fetchPrice(ctx, model, c.wallNow())
		return e.priceResult(err)
	}
	now := c.nanos()
	slot := c.priceSlot(model)
	if e, ok := c.rc.Get(slot); ok && e.kind == kindPrice && e.model == model {
		if served, ok := c.serve(e, now); ok {
			return served.priceResult(nil)
		}
	}
	c.stats.misses.Add(1)
	isPrice := func(e *entry) bool { return e.kind == kindPrice && e.model == model }
	e, err := c.load(ctx, priceFlight(model), slot, isPrice, func(ctx context.Context, at time.Time) (*entry, error) {
		return c.fetchPrice(ctx, model, at)
	})
	return e.priceResult(err)
}

func (e *entry) keyResult(err error) (*Snapshot, error) {
	switch {
	case err != nil:
		return nil, err
	case e.negative:
		return nil, ErrNotFound
	}
	return e.snap, nil
}

func (e *entry) priceResult(err error) (*Price, error) {
	switch {
	case err != nil:
		return nil, err
	case e.negative:
		return nil, ErrNotFound
	}
	return e.price, nil
}

// serve decides what a found entry is worth at now: fresh (served), stale
// (served, and one background reload started) or unusable (ok false: the
// caller loads). Negative entries are never served stale.
func (c *Cache) serve(e *entry, now int64) (*entry, bool) {
	if e.epoch != c.epoch.Load() {
		return nil, false
	}
	age := time.Duration(now - e.loadedAt)
	switch {
	case e.negative && age < c.opts.NegativeTTL:
		c.stats.negativeHits.Add(1)
		return e, true
	case e.negative:
		return nil, false
	case age < c.opts.TTL:
		c.stats.hits.Add(1)
		return e, true
	case age < c.opts.MaxTTL:
		c.stats.staleServed.Add(1)
		c.reloadStale(e, now)
		return e, true
	}
	return nil, false
}

// fresh reports whether e is of the current epoch and within its TTL (or,
// negative, its NegativeTTL) at now: what serve answers without a reload.
func (c *Cache) fresh(e *entry, now int64) bool {
	if e.epoch != c.epoch.Load() {
		return false
	}
	age := time.Duration(now - e.loadedAt)
	if e.negative {
		return age < c.opts.NegativeTTL
	}
	return age < c.opts.TTL
}

// reloadStale starts the background reload of a stale entry unless one runs
// or a failed one is waiting to retry.
func (c *Cache) reloadStale(e *entry, now int64) {
	next := e.nextReload.Load()
	if now < next || !e.nextReload.CompareAndSwap(next, math.MaxInt64) {
		return
	}
	var (
		flight string
		slot   uint64
		fetch  fetchFunc
	)
	switch e.kind {
	case kindKey:
		h := e.hash
		flight, slot = keyFlight(h), keySlot(h)
		fetch = func(ctx context.Context, at time.Time) (*entry, error) { return c.fetchKey(ctx, h, at) }
	default:
		model := e.model
		flight, slot = priceFlight(model), c.priceSlot(model)
		fetch = func(ctx context.Context, at time.Time) (*entry, error) { return c.fetchPrice(ctx, model, at) }
	}
	go func() {
		// The load is detached from any request; its error is counted in
		// LoadErrors and surfaces to callers once the entry passes MaxTTL.
		_, err, _ := c.sf.Do(flight, func() (any, error) {
			return c.run(context.Background(), flight, slot, fetch)
		})
		if err != nil {
			retry := min(c.opts.TTL, reloadRetryMax)
			e.nextReload.Store(c.nanos() + int64(retry))
		}
	}()
}

// fetchFunc reads one entry from the store as of at.
type fetchFunc func(ctx context.Context, at time.Time) (*entry, error)

func (c *Cache) fetchKey(ctx context.Context, h KeyHash, _ time.Time) (*entry, error) {
	c.stats.loads.Add(1)
	snap, err := c.store.KeyByHash(ctx, h)
	switch {
	case err == nil && snap != nil:
		return &entry{kind: kindKey, hash: h, snap: snap}, nil
	case errors.Is(err, ErrNotFound):
		return &entry{kind: kindKey, hash: h, negative: true}, nil
	case err == nil:
		err = errors.New("store returned no snapshot and no error")
	}
	c.stats.loadErrors.Add(1)
	return nil, fmt.Errorf("tenant cache: loading key %x…: %w", h[:4], err)
}

func (c *Cache) fetchPrice(ctx context.Context, model string, at time.Time) (*entry, error) {
	c.stats.loads.Add(1)
	p, err := c.store.Price(ctx, model, at)
	switch {
	case err == nil && p != nil:
		return &entry{kind: kindPrice, model: model, price: p}, nil
	case errors.Is(err, ErrNotFound):
		return &entry{kind: kindPrice, model: model, negative: true}, nil
	case err == nil:
		err = errors.New("store returned no price and no error")
	}
	c.stats.loadErrors.Add(1)
	return nil, fmt.Errorf("tenant cache: loading the price of %q: %w", model, err)
}

// load waits for the one load of flight shared by every caller without an
// entry, or for ctx. The load itself outlives ctx (other callers share it).
//
// A caller can miss the entry just before a load inserts it and join the
// flight just after that load ended: the flight it starts then looks in
// the cache again (is says which entry is the one) and reads the store only
// if the entry is still not there and fresh.
func (c *Cache) load(ctx context.Context, flight string, slot uint64, is func(*entry) bool, fetch fetchFunc) (*entry, error) {
	ch := c.sf.DoChan(flight, func() (any, error) {
		if e, ok := c.rc.Get(slot); ok && is(e) && c.fresh(e, c.nanos()) {
			return e, nil
		}
		return c.run(ctx, flight, slot, fetch)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*entry), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("tenant cache: waiting for a load: %w", context.Cause(ctx))
	}
}

// run performs one load: reads the store, then inserts the result unless an
// eviction happened meanwhile, and makes it visible to the next Get.
func (c *Cache) run(ctx context.Context, flight string, slot uint64, fetch fetchFunc) (*entry, error) {
	t := c.begin(flight)
	if t.registered {
		defer c.busy.Done()
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.LoadTimeout)
	defer cancel()
	start := c.nanos()
	e, err := fetch(ctx, c.wallNow())
	if e != nil {
		// The entry is as old as the moment its read began.
		e.loadedAt, e.epoch = start, t.epoch
	}
	if c.finish(t, e, slot) {
		// ristretto applies a new key's Set asynchronously; wait so the
		// next Get finds it. Not under c.mu: Wait blocks.
		c.rc.Wait()
	}
	return e, err
}

// begin registers a load of flight.
func (c *Cache) begin(flight string) *ticket {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &ticket{flight: flight, epoch: c.epoch.Load()}
	if c.closed {
		t.stale = true // read through, insert nothing
		return t
	}
	t.registered = true
	c.busy.Add(1)
	c.inflight[flight] = append(c.inflight[flight], t)
	return t
}

// finish unregisters t and inserts e (when not nil) unless t went stale.
// It reports whether e was handed to ristretto.
func (c *Cache) finish(t *ticket, e *entry, slot uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts := c.inflight[t.flight]; len(ts) > 0 {
		for i, x := range ts {
			if x == t {
				ts = append(ts[:i], ts[i+1:]...)
				break
			}
		}
		if len(ts) == 0 {
			delete(c.inflight, t.flight)
		} else {
			c.inflight[t.flight] = ts
		}
	}
	if e == nil || t.stale {
		return false
	}
	// Set does not block: when ristretto's buffer is full it drops the
	// insert, and the next Get loads again.
	if !c.rc.Set(slot, e, 1) {
		return false
	}
	if e.kind == kindKey {
		if e.negative {
			c.unindexLocked(e.hash)
		} else {
			c.indexLocked(e.hash, owner{tenant: e.snap.Tenant.ID, plan: e.snap.Plan.ID})
		}
	}
	return true
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	s := &c.stats
	return CacheStats{
		Hits:         s.hits.Load(),
		Misses:       s.misses.Load(),
		StaleServed:  s.staleServed.Load(),
		Loads:        s.loads.Load(),
		LoadErrors:   s.loadErrors.Load(),
		NegativeHits: s.negativeHits.Load(),
		Evictions:    s.evictions.Load(),

		CapacityEvictions: c.capacity.n.Load(),
	}
}

// Close waits for the loads in flight (each bounded by LoadTimeout) and
// releases the cache's goroutines. Close must not run concurrently with other
// methods; after it, Key and Price read the store on every call and
// evictions do nothing.
func (c *Cache) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	for flight := range c.inflight {
		c.staleFlightLocked(flight)
	}
	c.mu.Unlock()
	c.busy.Wait()
	c.capacity.closing.Store(true)
	c.rc.Close()
	if c.stopClock != nil {
		close(c.stopClock)
	}
}
