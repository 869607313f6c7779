package respcache

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/redisx"
	"github.com/tollgate/tollgate/gateway/internal/redisx/redisxtest"
	"github.com/tollgate/tollgate/gateway/internal/testkit/redistest"
)

// clock is a settable Now.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *clock) Add(d time.Duration) { c.ns.Add(int64(d)) }
func (c *clock) Set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func redisClient(t testing.TB, srv *redistest.Server) *redisx.Client {
	return redisxtest.Connect(t, redisx.Options{Addrs: []string{srv.Addr()}, Timeout: 5 * time.Second})
}

func newStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testEntry(body string) *Entry {
	return &Entry{Body: []byte(body), PromptTokens: 10, CompletionTokens: 20, Model: "gpt-4o",
		Stored: time.Date(2026, 12, 2, 12, 0, 0, 123_000_000, time.UTC)}
}

func wantHit(t *testing.T, s *Store, key, body string) {
	t.Helper()
	e, hit, err := s.Get(t.Context(), key)
	if err != nil || !hit {
		t.Fatalf("Get(%s): hit %v err %v, want a hit", key, hit, err)
	}
	if string(e.Body) != body || e.Model != "gpt-4o" || e.PromptTokens != 10 || e.CompletionTokens != 20 {
		t.Fatalf("Get(%s): %+v, want body %q", key, e, body)
	}
}

func wantMiss(t *testing.T, s *Store, key string) {
	t.Helper()
	if e, hit, err := s.Get(t.Context(), key); hit || err != nil {
		t.Fatalf("Get(%s): hit %v (%q) err %v, want a clean miss", key, hit, e.Body, err)
	}
}

func TestLocalOnly(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{})
	wantMiss(t, s, "k")
	if err := s.Put(t.Context(), "k", testEntry("one"), time.Minute); err != nil {
		t.Fatal(err)
	}
	wantHit(t, s, "k", "one")
	if err := s.Put(t.Context(), "k", testEntry("two"), time.Minute); err != nil {
		t.Fatal(err)
	}
	wantHit(t, s, "k", "two")
	if st := s.Stats(); st.LocalHits != 2 || st.Misses != 1 || st.Puts != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := New(Config{LocalMaxBytes: -1}); err == nil {
		t.Fatal("a Store without any layer was made")
	}
}

// TestPutCopies: the caller may reuse the entry it stored.
func TestPutCopies(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{})
	e := testEntry("abc")
	if err := s.Put(t.Context(), "k", e, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.Body[0] = 'X'
	wantHit(t, s, "k", "abc")
}

// TestPutVisibleWhenRistrettoRefuses: an entry ristretto will not take
// (its cost over ristretto's whole capacity) is still found by the next Get.
func TestPutVisibleWhenRistrettoRefuses(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{LocalMaxBytes: 1024, MaxEntryBytes: 64 << 10})
	for i := range 20 {
		body := string(bytes.Repeat([]byte{'a' + byte(i)}, 4000))
		key := "k" + strconv.Itoa(i)
		if err := s.Put(t.Context(), key, testEntry(body), time.Minute); err != nil {
			t.Fatal(err)
		}
		wantHit(t, s, key, body)
	}
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	var sum int64
	for _, it := range s.recent {
		sum += it.cost
	}
	if sum != s.recentBytes || s.recentBytes > s.recentMax || len(s.recent) > recentMaxCount || len(s.recentOrder) > 2*recentMaxCount {
		t.Fatalf("recent: %d entries (%d bytes counted, %d summed, cap %d), %d places", len(s.recent), s.recentBytes, sum, s.recentMax, len(s.recentOrder))
	}
}

// TestPutGetConcurrent: every Put is seen by the Get that follows it on
// the same replica, with Puts and Gets of other keys racing; with a local
// layer too small for ristretto to keep much (entries go to the held map),
// a Get may miss an entry evicted meanwhile but never returns an older
// value than the last Put of its key.
func TestPutGetConcurrent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		local  int64
		strict bool
	}{{"roomy", 1 << 20, true}, {"tiny", 2048, true}} {
		s := newStore(t, Config{LocalMaxBytes: tc.local})
		var wg sync.WaitGroup
		var hits atomic.Int64
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					key := fmt.Sprintf("g%d-%d", g, i%20) // only this goroutine writes it
					body := fmt.Sprintf("%d-%d-%s", g, i, bytes.Repeat([]byte("x"), i))
					if err := s.Put(context.Background(), key, testEntry(body), time.Minute); err != nil {
						errs <- err
						return
					}
					e, hit, err := s.Get(context.Background(), key)
					if err != nil || (hit && string(e.Body) != body) || (tc.strict && !hit) {
						errs <- fmt.Errorf("%s: Get(%s) after Put: hit %v err %v body %.10q, want %.10q", tc.name, key, hit, err, e.Body, body)
						return
					}
					if hit {
						hits.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("%s: %d of %d Gets after a Put hit", tc.name, hits.Load(), 8*200)
	}
}

// TestLocalTTL: an entry is served until the instant its TTL ends, never at
// or after it (by Config.Now).
func TestLocalTTL(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s := newStore(t, Config{Now: clk.Now})
	if err := s.Put(t.Context(), "k", testEntry("x"), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	clk.Add(199 * time.Millisecond)
	wantHit(t, s, "k", "x")
	clk.Add(time.Millisecond)
	wantMiss(t, s, "k")
	clk.Add(50 * time.Millisecond)
	wantMiss(t, s, "k")
}

// TestTTLAcrossLayers: with a clock ahead of Redis's, an entry Redis still
// holds is not served past the expiry stored in its value, by the replica
// that stored it (local layer) nor by another (Redis layer, or the local
// copy of its Redis hit, kept only for the time the entry had left).
func TestTTLAcrossLayers(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := newClock()
	a := newStore(t, Config{Redis: redisClient(t, srv), Now: clk.Now, Timeout: 5 * time.Second})
	b := newStore(t, Config{Redis: redisClient(t, srv), Now: clk.Now, Timeout: 5 * time.Second})
	if err := a.Put(t.Context(), "k", testEntry("x"), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Add(9900 * time.Millisecond)
	wantHit(t, b, "k", "x") // from Redis
	if st := b.Stats(); st.RedisHits != 1 {
		t.Fatalf("b stats %+v", st)
	}
	wantHit(t, b, "k", "x")
	clk.Add(100 * time.Millisecond) // at the expiry: Redis (real time) still has it
	if n, err := srv.Do("EXISTS", "tollgate:cache:k"); err != nil || n != "1" {
		t.Fatalf("EXISTS: %q %v (the test needs Redis to still hold it)", n, err)
	}
	wantMiss(t, a, "k")
	wantMiss(t, b, "k")
	clk.Add(50 * time.Millisecond)
	wantMiss(t, a, "k")
	wantMiss(t, b, "k")
	c := newStore(t, Config{Redis: redisClient(t, srv), Now: clk.Now, Timeout: 5 * time.Second})
	wantMiss(t, c, "k")
}

// TestRedisTTL: Redis itself drops an entry stored for 200ms (SET PX), and
// no layer serves it 250ms after the Put.
func TestRedisTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second})
	b := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second, LocalMaxBytes: -1})
	start := time.Now()
	if err := a.Put(t.Context(), "k", testEntry("x"), 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	pttl, err := srv.Do("PTTL", "tollgate:cache:k")
	if n, _ := strconv.Atoi(pttl); err != nil || n > 200 || (n <= 0 && time.Since(start) < 150*time.Millisecond) {
		t.Fatalf("PTTL %q %v, want (0, 200]", pttl, err)
	}
	time.Sleep(time.Until(start.Add(250 * time.Millisecond)))
	wantMiss(t, a, "k")
	wantMiss(t, b, "k")
	if n, err := srv.Do("EXISTS", "tollgate:cache:k"); err != nil || n != "0" {
		t.Fatalf("EXISTS after the TTL: %q %v", n, err)
	}
}

// TestAcrossReplicas: a Put on one Store is a hit on another on the same
// Redis, then a local hit there.
func TestAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second})
	b := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second})
	wantMiss(t, b, "k")
	ev := &Entry{Stream: true, Events: [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}, Model: "gpt-4o", Stored: time.Now()}
	if err := a.Put(t.Context(), "k", ev, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		e, hit, err := b.Get(t.Context(), "k")
		if !hit || err != nil || !e.Stream || len(e.Events) != 2 || string(e.Events[1]) != `{"b":2}` ||
			!e.Stored.Equal(ev.Stored.Truncate(time.Millisecond)) {
			t.Fatalf("b.Get: %+v hit %v err %v", e, hit, err)
		}
	}
	if st := b.Stats(); st.RedisHits != 1 || st.LocalHits != 1 || st.Misses != 1 {
		t.Fatalf("b stats %+v", st)
	}
	// Prefixes keep two caches on one Redis apart.
	c := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second, Prefix: "other:"})
	wantMiss(t, c, "k")
}

// TestRedisDown: with Redis killed, Get is a miss with an error, Put
// errs, and the local layer still serves (entries stored before and
// after).
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 200 * time.Millisecond})
	if err := s.Put(t.Context(), "before", testEntry("b"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, hit, err := s.Get(t.Context(), "unknown"); hit || err == nil {
		t.Fatalf("Get with Redis down: hit %v err %v, want a miss with an error", hit, err)
	}
	wantHit(t, s, "before", "b")
	if err := s.Put(t.Context(), "after", testEntry("a"), time.Minute); err == nil {
		t.Fatal("Put with Redis down: no error")
	}
	wantHit(t, s, "after", "a")
	if st := s.Stats(); st.Errors != 1 || st.PutErrors != 1 || st.LocalHits != 2 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRedisUnreachable: a Redis that never answered (nothing listens)
// makes misses with errors, not failures.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	addr := srv.Addr()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	rc, err := redisx.New(redisx.Options{Addrs: []string{addr}, Timeout: 50 * time.Millisecond, DialTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	s := newStore(t, Config{Redis: rc})
	if _, hit, err := s.Get(t.Context(), "k"); hit || err == nil {
		t.Fatalf("hit %v err %v", hit, err)
	}
	if err := s.Put(t.Context(), "k", testEntry("x"), time.Minute); err == nil {
		t.Fatal("Put: no error")
	}
	wantHit(t, s, "k", "x")
}

// TestRedisSlow: a Redis slower than the timeout is a miss with an error
// within about the timeout.
func TestRedisSlow(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	s := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 100 * time.Millisecond, LocalMaxBytes: -1})
	slept := make(chan error, 1)
	go func() {
		_, err := srv.Do("DEBUG", "SLEEP", "1")
		slept <- err
	}()
	time.Sleep(100 * time.Millisecond) // let the server fall asleep
	start := time.Now()
	_, hit, err := s.Get(t.Context(), "k")
	if took := time.Since(start); hit || err == nil || took > 700*time.Millisecond {
		t.Fatalf("Get from a sleeping Redis: hit %v err %v after %v, want a miss with an error after ~100ms", hit, err, took)
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
}

// TestCorruptValue: a value that does not decode is a miss with an error.
func TestCorruptValue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second})
	valid := testEntry("x").Marshal(nil)
	for i, v := range []string{"", "short", "\x00\x00\x01\x93\x00\x00\x00\x00garbage",
		"\x00\x00\x01\x93\x00\x00\x00\x00" + string(valid) + "+", // trailing byte
		"\xff\xff\xff\xff\xff\xff\xff\xff" + string(valid),       // an expiry past int64 nanoseconds
	} {
		key := "c" + strconv.Itoa(i)
		if _, err := srv.Do("SET", "tollgate:cache:"+key, v); err != nil {
			t.Fatal(err)
		}
		if _, hit, err := s.Get(t.Context(), key); hit || err == nil {
			t.Fatalf("value %q: hit %v err %v", v, hit, err)
		}
	}
	// The same layout with a valid expiry and nothing after the entry is
	// a hit: the values above were refused for what is wrong in them.
	exp := make([]byte, 8)
	binary.BigEndian.PutUint64(exp, uint64(time.Now().Add(time.Minute).UnixMilli()))
	if _, err := srv.Do("SET", "tollgate:cache:ok", string(exp)+string(valid)); err != nil {
		t.Fatal(err)
	}
	wantHit(t, s, "ok", "x")
}

func TestSizeCap(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{MaxEntryBytes: 1000})
	e := testEntry("")
	for e.Size() < 1000 {
		e.Body = append(e.Body, 'x')
	}
	if e.Size() != 1000 {
		t.Fatalf("size %d", e.Size())
	}
	if err := s.Put(t.Context(), "at", e, time.Minute); err != nil {
		t.Fatalf("an entry at the cap: %v", err)
	}
	e.Body = append(e.Body, 'x')
	if err := s.Put(t.Context(), "over", e, time.Minute); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an entry over the cap: %v", err)
	}
	wantMiss(t, s, "over")
	if st := s.Stats(); st.TooLarge != 1 || st.Puts != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestPutRefused(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{})
	for _, ttl := range []time.Duration{0, -time.Second, MaxTTL + 1} {
		if err := s.Put(t.Context(), "k", testEntry("x"), ttl); err == nil {
			t.Errorf("ttl %v accepted", ttl)
		}
	}
	if err := s.Put(t.Context(), "k", nil, time.Minute); err == nil {
		t.Error("nil entry accepted")
	}
	wantMiss(t, s, "k")
}

// TestFlights: concurrent requests for a few keys; at most one leader per
// key at any time, every follower finds the leader's entry after Wait, and
// no flight is left in the map.
func TestFlights(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{})
	const keys, workers, rounds = 4, 16, 50
	var active [keys]atomic.Int32
	var leaders, followers atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				k := (w + r) % keys
				key := "k" + strconv.Itoa(k)
				f, leader := s.Lead(key)
				if leader {
					leaders.Add(1)
					if n := active[k].Add(1); n != 1 {
						errs <- fmt.Errorf("%d leaders of %s at once", n, key)
						return
					}
					body := fmt.Sprintf("%d/%d", w, r)
					if err := s.Put(context.Background(), key, testEntry(body), time.Minute); err != nil {
						errs <- err
						return
					}
					active[k].Add(-1)
					f.Done()
					f.Done() // a second Done does nothing
					continue
				}
				followers.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := f.Wait(ctx)
				cancel()
				if err != nil {
					errs <- err
					return
				}
				if _, hit, err := s.Get(context.Background(), key); !hit || err != nil {
					errs <- fmt.Errorf("follower of %s: hit %v err %v after the leader stored", key, hit, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.flightCount(); n != 0 {
		t.Errorf("%d flights left", n)
	}
	if leaders.Load()+followers.Load() != workers*rounds || s.Stats().Coalesced != followers.Load() {
		t.Errorf("leaders %d followers %d coalesced %d", leaders.Load(), followers.Load(), s.Stats().Coalesced)
	}
	t.Logf("leaders %d, followers %d", leaders.Load(), followers.Load())
}

func TestFlightWaitCancelled(t *testing.T) {
	t.Parallel()
	s := newStore(t, Config{})
	f, leader := s.Lead("k")
	g, follower := s.Lead("k")
	if !leader || follower || f != g {
		t.Fatal("second Lead did not join the first flight")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := g.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v", err)
	}
	f.Done()
	if err := g.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h, leader := s.Lead("k"); !leader || h == f {
		t.Fatal("no new flight after Done")
	} else {
		h.Done()
	}
	// The old flight's late Done must not remove the new one.
	h, _ := s.Lead("k")
	f.Done()
	if j, leader := s.Lead("k"); leader || j != h {
		t.Fatal("an old flight's Done removed the new flight")
	}
	h.Done()
	if s.flightCount() != 0 {
		t.Fatal("flight left")
	}
}

func TestGetLocalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector adds allocations")
	}
	s := newStore(t, Config{})
	if err := s.Put(t.Context(), "k", testEntry("x"), time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := testing.AllocsPerRun(1000, func() {
		if _, hit, _ := s.Get(ctx, "k"); !hit {
			t.Fatal("miss")
		}
	})
	if n > 3 {
		t.Errorf("a local hit allocates %v times, want at most 3", n)
	}
}

func BenchmarkGetLocal(b *testing.B) {
	s := newStore(b, Config{})
	if err := s.Put(context.Background(), "k", testEntry(string(bytes.Repeat([]byte("x"), 2000))), time.Hour); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, hit, _ := s.Get(ctx, "k"); !hit {
			b.Fatal("miss")
		}
	}
}

// TestLocalCopyBounded: with LocalTTL, a replica serves its in-process copy
// of an entry another replica replaced in Redis for LocalTTL at most, then
// the new one.
func TestLocalCopyBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := newClock()
	clk.Set(time.Now())
	a := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second, LocalTTL: time.Second, Now: clk.Now})
	b := newStore(t, Config{Redis: redisClient(t, srv), Timeout: 5 * time.Second, Now: clk.Now})
	if err := a.Put(t.Context(), "k", testEntry("old"), time.Hour); err != nil {
		t.Fatal(err)
	}
	wantHit(t, a, "k", "old")
	if err := b.Put(t.Context(), "k", testEntry("new"), time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Add(999 * time.Millisecond)
	wantHit(t, a, "k", "old")
	clk.Add(time.Millisecond)
	wantHit(t, a, "k", "new")
}
