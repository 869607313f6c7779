package tenant_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// fakeStore is a Store whose contents, failures and pace the test controls.
type fakeStore struct {
	mu     sync.Mutex
	keys   map[tenant.KeyHash]*tenant.Snapshot
	prices map[string]*tenant.Price
	err    error
	// gate, when set, holds every call after it has read its answer (a read
	// "in transit") until the gate is closed; each held call reports its
	// item on entered first.
	gate    chan struct{}
	entered chan string
	calls   map[string]int
	total   atomic.Int64
}

func newFakeStore() *fakeStore {
	return &fakeStore{
		keys:    make(map[tenant.KeyHash]*tenant.Snapshot),
		prices:  make(map[string]*tenant.Price),
		calls:   make(map[string]int),
		entered: make(chan string, 1000),
	}
}

func keyItem(h tenant.KeyHash) string { return "key:" + hex.EncodeToString(h[:]) }

func (f *fakeStore) KeyByHash(ctx context.Context, h tenant.KeyHash) (*tenant.Snapshot, error) {
	f.mu.Lock()
	snap, ok := f.keys[h]
	err, gate := f.err, f.gate
	f.calls[keyItem(h)]++
	f.mu.Unlock()
	f.total.Add(1)
	if err := f.hold(ctx, gate, keyItem(h)); err != nil {
		return nil, err
	}
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, tenant.ErrNotFound
	}
	return snap, nil
}

func (f *fakeStore) Price(ctx context.Context, model string, _ time.Time) (*tenant.Price, error) {
	f.mu.Lock()
	p, ok := f.prices[model]
	err, gate := f.err, f.gate
	f.calls["price:"+model]++
	f.mu.Unlock()
	f.total.Add(1)
	if err := f.hold(ctx, gate, "price:"+model); err != nil {
		return nil, err
	}
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, tenant.ErrNotFound
	}
	return p, nil
}

func (f *fakeStore) hold(ctx context.Context, gate chan struct{}, item string) error {
	if gate == nil {
		return nil
	}
	f.entered <- item
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// arm makes the following calls wait; close the returned gate to let them go.
func (f *fakeStore) arm() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate = make(chan struct{})
	return f.gate
}

// disarm lets later calls through (calls already held stay held).
func (f *fakeStore) disarm() {
	f.mu.Lock()
	f.gate = nil
	f.mu.Unlock()
}

func (f *fakeStore) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeStore) putKey(s *tenant.Snapshot) {
	f.mu.Lock()
	f.keys[s.Key.Hash] = s
	f.mu.Unlock()
}

func (f *fakeStore) putPrice(p *tenant.Price) {
	f.mu.Lock()
	f.prices[p.Model] = p
	f.mu.Unlock()
}

func (f *fakeStore) callsOf(item string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[item]
}

// waitEntered waits for a held call.
func (f *fakeStore) waitEntered(t *testing.T) string {
	t.Helper()
	select {
	case item := <-f.entered:
		return item
	case <-time.After(5 * time.Second):
		t.Fatal("no store call arrived")
		return ""
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// snapshot builds a key snapshot; version goes in the prefix so tests can
// tell loads apart.
func snapshot(key, tenantID, planID, version string) *tenant.Snapshot {
	return &tenant.Snapshot{
		Key:    tenant.Key{ID: key, TenantID: tenantID, Hash: tenant.HashKey(key), Prefix: version, Status: tenant.StatusActive},
		Tenant: tenant.Tenant{ID: tenantID, Status: tenant.StatusActive, PlanID: planID},
		Plan:   tenant.Plan{ID: planID},
	}
}

func newTestCache(t *testing.T, st tenant.Store, opts tenant.CacheOptions) *tenant.Cache {
	t.Helper()
	if opts.MaxEntries == 0 {
		opts.MaxEntries = 1000 // the default's 1M counters make each test slow under -race
	}
	c, err := tenant.NewCache(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustKey(t *testing.T, c *tenant.Cache, key string) *tenant.Snapshot {
	t.Helper()
	s, err := c.Key(context.Background(), tenant.HashKey(key))
	if err != nil {
		t.Fatalf("Key(%s): %v", key, err)
	}
	return s
}

// eventually polls cond for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// within runs f and fails if it does not return within d.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("call blocked for more than %s", d)
		var zero T
		return zero
	}
}

var errDown = errors.New("store down")

func TestNewCacheOptions(t *testing.T) {
	tests := []struct {
		name    string
		store   tenant.Store
		opts    tenant.CacheOptions
		wantErr bool
	}{
		{"defaults", newFakeStore(), tenant.CacheOptions{}, false},
		{"nil store", nil, tenant.CacheOptions{}, true},
		{"negative ttl", newFakeStore(), tenant.CacheOptions{TTL: -1}, true},
		{"negative max entries", newFakeStore(), tenant.CacheOptions{MaxEntries: -1}, true},
		{"negative negative ttl", newFakeStore(), tenant.CacheOptions{NegativeTTL: -time.Second}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tenant.NewCache(tt.store, tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if c != nil {
				c.Close()
			}
		})
	}
}

func TestCacheHitMiss(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	st.putPrice(&tenant.Price{Model: "m1", InputMicrosPerMTok: 5})
	c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})

	const n = 50
	for i := range n {
		if s := mustKey(t, c, "tg_a"); s.Key.ID != "tg_a" || s.Tenant.ID != "acme" {
			t.Fatalf("get %d: wrong snapshot %+v", i, s.Key)
		}
		p, err := c.Price(context.Background(), "m1")
		if err != nil || p.InputMicrosPerMTok != 5 {
			t.Fatalf("Price = %+v, %v", p, err)
		}
	}
	if got := st.callsOf(keyItem(tenant.HashKey("tg_a"))); got != 1 {
		t.Errorf("key store calls = %d, want 1 for %d sequential gets", got, n)
	}
	if got := st.callsOf("price:m1"); got != 1 {
		t.Errorf("price store calls = %d, want 1", got)
	}
	want := tenant.CacheStats{Hits: 2 * (n - 1), Misses: 2, Loads: 2}
	if got := c.Stats(); got != want {
		t.Errorf("stats = %+v, want %+v", got, want)
	}
}

func TestCacheStaleServedWhileReloading(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{TTL: time.Second, MaxTTL: 10 * time.Second, Now: clk.Now})
	mustKey(t, c, "tg_a")

	st.putKey(snapshot("tg_a", "acme", "basic", "v2"))
	gate := st.arm()
	clk.Advance(2 * time.Second)
	// The reload blocks in the store; callers must get v1 without waiting.
	for i := range 3 {
		s := within(t, 2*time.Second, func() *tenant.Snapshot { return mustKey(t, c, "tg_a") })
		if s.Key.Prefix != "v1" {
			t.Fatalf("call %d during reload got %q, want the stale v1", i, s.Key.Prefix)
		}
	}
	st.waitEntered(t) // the one reload is in the store, blocked
	if got := st.total.Load(); got != 2 {
		t.Fatalf("store calls = %d, want 2 (1 load + 1 reload)", got)
	}
	st.disarm()
	close(gate)
	eventually(t, "the reloaded v2", func() bool { return mustKey(t, c, "tg_a").Key.Prefix == "v2" })
	if got := st.total.Load(); got != 2 {
		t.Errorf("store calls = %d, want 2", got)
	}
	if s := c.Stats(); s.StaleServed < 3 || s.Loads != 2 {
		t.Errorf("stats = %+v, want StaleServed >= 3 and Loads 2", s)
	}
}

func TestCacheReloadFailureServesStaleUntilMaxTTL(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{TTL: time.Second, MaxTTL: 5 * time.Second, Now: clk.Now})
	mustKey(t, c, "tg_a")
	st.setErr(errDown)

	clk.Advance(2 * time.Second) // stale
	if s := mustKey(t, c, "tg_a"); s.Key.Prefix != "v1" {
		t.Fatalf("got %q, want stale v1", s.Key.Prefix)
	}
	eventually(t, "the failed reload", func() bool { return c.Stats().LoadErrors == 1 })
	// A failed reload is not retried at once.
	mustKey(t, c, "tg_a")
	time.Sleep(20 * time.Millisecond)
	if got := st.total.Load(); got != 2 {
		t.Fatalf("store calls = %d, want 2 (no immediate retry)", got)
	}
	clk.Advance(time.Second) // the retry interval, min(TTL, 1s), has passed
	if s := mustKey(t, c, "tg_a"); s.Key.Prefix != "v1" {
		t.Fatalf("got %q, want stale v1", s.Key.Prefix)
	}
	eventually(t, "the second failed reload", func() bool { return c.Stats().LoadErrors == 2 })

	clk.Advance(3 * time.Second) // 6s past the load: beyond MaxTTL
	_, err := c.Key(context.Background(), tenant.HashKey("tg_a"))
	if !errors.Is(err, errDown) {
		t.Fatalf("past MaxTTL: err = %v, want %v", err, errDown)
	}
	// 4 calls, or 3 when this caller joined the second reload before it
	// had quite finished (it shares its error then).
	if got := st.total.Load(); got != 3 && got != 4 {
		t.Errorf("store calls = %d, want 3 or 4", got)
	}
}

func TestCachePassThrough(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	st.putPrice(&tenant.Price{Model: "m1"})
	c := newTestCache(t, st, tenant.CacheOptions{PassThrough: true})
	for range 5 {
		mustKey(t, c, "tg_a")
		if _, err := c.Key(context.Background(), tenant.HashKey("tg_unknown")); !errors.Is(err, tenant.ErrNotFound) {
			t.Fatalf("unknown key: err = %v", err)
		}
		if _, err := c.Price(context.Background(), "m1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := st.total.Load(); got != 15 {
		t.Errorf("store calls = %d, want 15 (every call reads the store)", got)
	}
}

func TestCacheNegative(t *testing.T) {
	st := newFakeStore()
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{NegativeTTL: time.Second, Now: clk.Now})
	h := tenant.HashKey("tg_new")
	check := func(wantErr error, wantCalls int) {
		t.Helper()
		_, err := c.Key(context.Background(), h)
		if !errors.Is(err, wantErr) && err != wantErr {
			t.Fatalf("err = %v, want %v", err, wantErr)
		}
		if got := st.callsOf(keyItem(h)); got != wantCalls {
			t.Fatalf("store calls = %d, want %d", got, wantCalls)
		}
	}
	check(tenant.ErrNotFound, 1)
	for range 100 {
		check(tenant.ErrNotFound, 1) // a flood of the bad key stays here
	}
	if got := c.Stats().NegativeHits; got != 100 {
		t.Errorf("NegativeHits = %d, want 100", got)
	}
	st.putKey(snapshot("tg_new", "acme", "basic", "v1"))
	clk.Advance(999 * time.Millisecond)
	check(tenant.ErrNotFound, 1)
	clk.Advance(time.Millisecond) // NegativeTTL reached
	check(nil, 2)
	check(nil, 2)

	// Prices too.
	if _, err := c.Price(context.Background(), "nope"); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("Price err = %v", err)
	}
	if _, err := c.Price(context.Background(), "nope"); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatalf("Price err = %v", err)
	}
	if got := st.callsOf("price:nope"); got != 1 {
		t.Errorf("price store calls = %d, want 1", got)
	}
}

func TestCacheColdLoadError(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	st.setErr(errDown)
	c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})
	for i := 1; i <= 3; i++ {
		_, err := c.Key(context.Background(), tenant.HashKey("tg_a"))
		if !errors.Is(err, errDown) || errors.Is(err, tenant.ErrNotFound) {
			t.Fatalf("err = %v, want %v", err, errDown)
		}
		if got := st.total.Load(); got != int64(i) {
			t.Fatalf("store calls = %d, want %d (errors are not cached)", got, i)
		}
	}
	st.setErr(nil)
	mustKey(t, c, "tg_a")
	if s := c.Stats(); s.LoadErrors != 3 || s.Loads != 4 {
		t.Errorf("stats = %+v, want LoadErrors 3, Loads 4", s)
	}
}

func TestCacheSingleflight(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})
	gate := st.arm()
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			s, err := c.Key(context.Background(), tenant.HashKey("tg_a"))
			if err == nil && s.Key.Prefix != "v1" {
				err = errors.New("wrong snapshot")
			}
			errs <- err
		})
	}
	st.waitEntered(t)
	eventually(t, "all callers to miss", func() bool { return c.Stats().Misses == n })
	time.Sleep(50 * time.Millisecond) // let the last ones join the flight
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := st.total.Load(); got != 1 {
		t.Errorf("store calls = %d, want 1 for %d concurrent cold callers", got, n)
	}
}

func TestCacheWaiterContext(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})
	gate := st.arm()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Key(ctx, tenant.HashKey("tg_a"))
		first <- err
	}()
	st.waitEntered(t)
	second := make(chan *tenant.Snapshot, 1)
	go func() { second <- mustKey(t, c, "tg_a") }()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: err = %v", err)
	}
	close(gate) // the load survived the first caller's cancellation
	if s := <-second; s.Key.Prefix != "v1" {
		t.Fatalf("second caller got %q", s.Key.Prefix)
	}
	if got := st.total.Load(); got != 1 {
		t.Errorf("store calls = %d, want 1", got)
	}
}

func TestCacheMaxTTLClamp(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("tg_a", "acme", "basic", "v1"))
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{TTL: time.Hour, MaxTTL: 10 * time.Second, NegativeTTL: time.Minute, Now: clk.Now})
	mustKey(t, c, "tg_a")
	c.Key(context.Background(), tenant.HashKey("tg_unknown"))
	st.putKey(snapshot("tg_a", "acme", "basic", "v2"))

	clk.Advance(9 * time.Second)
	if s := mustKey(t, c, "tg_a"); s.Key.Prefix != "v1" || st.total.Load() != 2 {
		t.Fatalf("at 9s: got %q after %d calls, want cached v1 after 2", s.Key.Prefix, st.total.Load())
	}
	clk.Advance(2 * time.Second) // 11s: past the clamped TTL and MaxTTL
	if s := mustKey(t, c, "tg_a"); s.Key.Prefix != "v2" {
		t.Fatalf("at 11s: got %q, want a synchronous load of v2", s.Key.Prefix)
	}
	if _, err := c.Key(context.Background(), tenant.HashKey("tg_unknown")); !errors.Is(err, tenant.ErrNotFound) {
		t.Fatal(err)
	}
	if got := st.total.Load(); got != 4 {
		t.Errorf("store calls = %d, want 4 (negative TTL clamped to MaxTTL too)", got)
	}
	if got := c.Stats().StaleServed; got != 0 {
		t.Errorf("StaleServed = %d, want 0", got)
	}
}

// evictionFixture warms a cache with keys a1, a2 (tenant A, plan p1), b1
// (tenant B, plan p2) and prices m1, m2.
func evictionFixture(t *testing.T) (*fakeStore, *tenant.Cache) {
	st := newFakeStore()
	st.putKey(snapshot("a1", "A", "p1", "v1"))
	st.putKey(snapshot("a2", "A", "p1", "v1"))
	st.putKey(snapshot("b1", "B", "p2", "v1"))
	st.putPrice(&tenant.Price{Model: "m1"})
	st.putPrice(&tenant.Price{Model: "m2"})
	c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})
	touchAll(t, c)
	return st, c
}

var allItems = []string{"a1", "a2", "b1", "m1", "m2"}

func touchAll(t *testing.T, c *tenant.Cache) {
	t.Helper()
	for _, it := range allItems {
		var err error
		if it[0] == 'm' {
			_, err = c.Price(context.Background(), it)
		} else {
			_, err = c.Key(context.Background(), tenant.HashKey(it))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func storeItem(it string) string {
	if it[0] == 'm' {
		return "price:" + it
	}
	return keyItem(tenant.HashKey(it))
}

func hexOf(key string) string {
	h := tenant.HashKey(key)
	return hex.EncodeToString(h[:])
}

func TestCacheEvict(t *testing.T) {
	notify := func(payload string) func(*tenant.Cache) error {
		return func(c *tenant.Cache) error { return c.HandleNotify(payload) }
	}
	do := func(f func(*tenant.Cache)) func(*tenant.Cache) error {
		return func(c *tenant.Cache) error { f(c); return nil }
	}
	all := "a1 a2 b1 m1 m2"
	tests := []struct {
		name     string
		evict    func(*tenant.Cache) error
		reloaded string // items read from the store again, in allItems order
		badNote  bool
	}{
		{"key", do(func(c *tenant.Cache) { c.EvictKey(tenant.HashKey("a1")) }), "a1", false},
		{"tenant", do(func(c *tenant.Cache) { c.EvictTenant("A") }), "a1 a2", false},
		{"unknown tenant", do(func(c *tenant.Cache) { c.EvictTenant("Z") }), "", false},
		{"plan", do(func(c *tenant.Cache) { c.EvictPlan("p2") }), "b1", false},
		{"price", do(func(c *tenant.Cache) { c.EvictPrice("m1") }), "m1", false},
		{"all", do(func(c *tenant.Cache) { c.EvictAll() }), all, false},
		{"notify key", notify("key:" + hexOf("a2")), "a2", false},
		{"notify key upper-case hex", notify("key:" + strings.ToUpper(hexOf("a2"))), "a2", false},
		{"notify tenant", notify("tenant:B"), "b1", false},
		{"notify plan", notify("plan:p1"), "a1 a2", false},
		{"notify price", notify("price:m2"), "m2", false},
		{"notify all", notify("all"), all, false},
		{"notify unknown kind", notify("bogus:1"), all, true},
		{"notify bad hex", notify("key:zz"), all, true},
		{"notify short hash", notify("key:" + hexOf("a1")[:62]), all, true},
		{"notify long hash", notify("key:" + hexOf("a1") + "00"), all, true},
		{"notify empty tenant", notify("tenant:"), all, true},
		{"notify empty", notify(""), all, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, c := evictionFixture(t)
			err := tt.evict(c)
			if tt.badNote != (err != nil) || (err != nil && !errors.Is(err, tenant.ErrUnknownNotification)) {
				t.Fatalf("err = %v, want unknown-notification error: %v", err, tt.badNote)
			}
			before := make(map[string]int)
			for _, it := range allItems {
				before[it] = st.callsOf(storeItem(it))
			}
			touchAll(t, c)
			touchAll(t, c) // the reload is cached again
			var reloaded []string
			for _, it := range allItems {
				switch st.callsOf(storeItem(it)) - before[it] {
				case 0:
				case 1:
					reloaded = append(reloaded, it)
				default:
					t.Errorf("%s read more than once after the eviction", it)
				}
			}
			if got := strings.Join(reloaded, " "); got != tt.reloaded {
				t.Errorf("reloaded %q, want %q", got, tt.reloaded)
			}
			if got := c.Stats().Evictions; got != 1 {
				t.Errorf("Evictions = %d, want 1", got)
			}
		})
	}
}

// evictions that must win against a load of key a1 (tenant A, plan p1)
// in flight.
var inflightEvictions = []struct {
	name  string
	evict func(*tenant.Cache)
}{
	{"key", func(c *tenant.Cache) { c.EvictKey(tenant.HashKey("a1")) }},
	{"tenant", func(c *tenant.Cache) { c.EvictTenant("A") }},
	{"plan", func(c *tenant.Cache) { c.EvictPlan("p1") }},
	{"all", func(c *tenant.Cache) { c.EvictAll() }},
	{"notify", func(c *tenant.Cache) { c.HandleNotify("key:" + hexOf("a1")) }},
}

func TestCacheEvictDuringColdLoad(t *testing.T) {
	for _, tt := range inflightEvictions {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			st.putKey(snapshot("a1", "A", "p1", "old"))
			c := newTestCache(t, st, tenant.CacheOptions{Now: newFakeClock().Now})
			gate := st.arm()
			first := make(chan *tenant.Snapshot, 1)
			go func() { first <- mustKey(t, c, "a1") }()
			st.waitEntered(t) // the load has read "old" and is in transit

			tt.evict(c)
			st.putKey(snapshot("a1", "A", "p1", "new"))
			st.disarm()
			// A caller after the eviction does not join the old load.
			if s := within(t, 2*time.Second, func() *tenant.Snapshot { return mustKey(t, c, "a1") }); s.Key.Prefix != "new" {
				t.Fatalf("caller after the eviction got %q, want new", s.Key.Prefix)
			}
			close(gate)
			if s := <-first; s.Key.Prefix != "old" {
				t.Fatalf("first caller got %q", s.Key.Prefix)
			}
			// The old load finished last but must not have replaced "new".
			if s := mustKey(t, c, "a1"); s.Key.Prefix != "new" {
				t.Fatalf("after the old load finished: got %q, want new", s.Key.Prefix)
			}
			if got := st.total.Load(); got != 2 {
				t.Errorf("store calls = %d, want 2", got)
			}
		})
	}
}

func TestCacheEvictDuringReload(t *testing.T) {
	for _, tt := range inflightEvictions {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			st.putKey(snapshot("a1", "A", "p1", "v1"))
			clk := newFakeClock()
			c := newTestCache(t, st, tenant.CacheOptions{TTL: time.Second, Now: clk.Now})
			mustKey(t, c, "a1")
			st.putKey(snapshot("a1", "A", "p1", "v2"))
			gate := st.arm()
			clk.Advance(2 * time.Second)
			if s := mustKey(t, c, "a1"); s.Key.Prefix != "v1" {
				t.Fatalf("stale read got %q", s.Key.Prefix)
			}
			st.waitEntered(t) // the reload has read v2 and is in transit

			tt.evict(c)
			st.putKey(snapshot("a1", "A", "p1", "v3"))
			st.disarm()
			if s := within(t, 2*time.Second, func() *tenant.Snapshot { return mustKey(t, c, "a1") }); s.Key.Prefix != "v3" {
				t.Fatalf("caller after the eviction got %q, want v3", s.Key.Prefix)
			}
			close(gate)
			time.Sleep(20 * time.Millisecond) // let the reload finish
			if s := mustKey(t, c, "a1"); s.Key.Prefix != "v3" {
				t.Fatalf("after the reload finished: got %q, want v3", s.Key.Prefix)
			}
			if got := st.total.Load(); got != 3 {
				t.Errorf("store calls = %d, want 3", got)
			}
		})
	}
}

func TestCacheTenantMove(t *testing.T) {
	// A key whose reload shows a new tenant is indexed under the new one.
	st := newFakeStore()
	st.putKey(snapshot("a1", "A", "p1", "v1"))
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{TTL: time.Second, Now: clk.Now})
	mustKey(t, c, "a1")
	st.putKey(snapshot("a1", "B", "p2", "v2"))
	clk.Advance(2 * time.Second)
	mustKey(t, c, "a1")
	eventually(t, "the reload", func() bool { return mustKey(t, c, "a1").Key.Prefix == "v2" })

	c.EvictTenant("A")
	mustKey(t, c, "a1")
	if got := st.total.Load(); got != 2 {
		t.Fatalf("evicting the old tenant reloaded the key: %d calls", got)
	}
	c.EvictTenant("B")
	mustKey(t, c, "a1")
	if got := st.total.Load(); got != 3 {
		t.Fatalf("evicting the new tenant: %d calls, want 3", got)
	}
}

func TestCacheClose(t *testing.T) {
	st := newFakeStore()
	st.putKey(snapshot("a1", "A", "p1", "v1"))
	c, err := tenant.NewCache(st, tenant.CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mustKey(t, c, "a1")
	c.Close()
	c.Close() // idempotent
	for range 3 {
		mustKey(t, c, "a1")
	}
	c.EvictAll()
	if got := st.total.Load(); got != 4 {
		t.Errorf("store calls = %d, want 4 (a closed cache reads through)", got)
	}
}

// raceEnabled reports whether the test binary was built with -race, which
// makes sync.Pool drop items at random (and ristretto allocate).
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func TestCacheWarmHitAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are not meaningful under -race")
	}
	st := newFakeStore()
	st.putKey(snapshot("a1", "A", "p1", "v1"))
	st.putPrice(&tenant.Price{Model: "m1"})
	c := newTestCache(t, st, tenant.CacheOptions{})
	ctx := context.Background()
	h := tenant.HashKey("a1")
	mustKey(t, c, "a1")
	if _, err := c.Price(ctx, "m1"); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := c.Key(ctx, h); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Price(ctx, "m1"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("warm hits allocate %.1f times per call", allocs)
	}
}

// TestCacheConcurrent mixes lookups, reloads, evictions and a moving clock;
// run with -race. Every answer must be the snapshot of the key asked for.
func TestCacheConcurrent(t *testing.T) {
	st := newFakeStore()
	keys := []string{"a1", "a2", "b1", "b2"}
	for i, k := range keys {
		st.putKey(snapshot(k, string(rune('A'+i/2)), "p", "v1"))
	}
	clk := newFakeClock()
	c := newTestCache(t, st, tenant.CacheOptions{TTL: 10 * time.Millisecond, MaxTTL: 50 * time.Millisecond, Now: clk.Now})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; ctx.Err() == nil; i++ {
				k := keys[i%len(keys)]
				s, err := c.Key(context.Background(), tenant.HashKey(k))
				if err != nil || s.Key.ID != k {
					t.Errorf("Key(%s) = %v, %v", k, s, err)
					return
				}
				if _, err := c.Price(context.Background(), "none"); !errors.Is(err, tenant.ErrNotFound) {
					t.Errorf("Price: %v", err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		notes := []string{"tenant:A", "plan:p", "all", "key:" + hexOf("b2"), "price:none"}
		for i := 0; ctx.Err() == nil; i++ {
			c.HandleNotify(notes[i%len(notes)])
			clk.Advance(3 * time.Millisecond)
			time.Sleep(100 * time.Microsecond)
		}
	})
	wg.Wait()
	if s := c.Stats(); s.Hits == 0 || s.Loads == 0 {
		t.Errorf("stats = %+v: the mix did not exercise hits and loads", s)
	}
}

// Entries dropped for room are counted as capacity evictions; closing the
// cache, which drops every entry, adds none.
func TestCacheCapacityEvictions(t *testing.T) {
	st := newFakeStore()
	const keys = 200
	for i := range keys {
		st.putKey(snapshot(fmt.Sprint("tg_", i), "acme", "basic", "v1"))
	}
	c, err := tenant.NewCache(st, tenant.CacheOptions{MaxEntries: 10, Now: newFakeClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	// Each key twice, so the admission policy has seen it before.
	for round := 0; round < 2; round++ {
		for i := range keys {
			mustKey(t, c, fmt.Sprint("tg_", i))
		}
	}
	eventually(t, "capacity evictions", func() bool { return c.Stats().CapacityEvictions > 0 })
	before := c.Stats().CapacityEvictions
	c.Close()
	if got := c.Stats(); got.CapacityEvictions != before || got.Evictions != 0 {
		t.Errorf("after Close: capacity evictions %d (was %d), evictions %d", got.CapacityEvictions, before, got.Evictions)
	}
}
