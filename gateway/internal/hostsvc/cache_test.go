package hostsvc

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const cacheBody = `{"model":"mock-1","messages":[{"role":"user","content":"hi"}],"temperature":0}`

// newCacheSet is a Set whose cache services use an in-process store, with
// the fuzz prices (mock-*: 1 micro a prompt token, 10 a completion token)
// and the clock *now.
func newCacheSet(t *testing.T, now *atomic.Int64) (*Set, *Counts, *respcache.Store) {
	t.Helper()
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	st, err := respcache.New(respcache.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	counts := new(Counts)
	return NewSet(Config{Log: quietLog(), Prices: fuzzPrices{}, Counts: counts, Cache: st, Now: clock}), counts, st
}

func newClock() *atomic.Int64 {
	var now atomic.Int64
	now.Store(time.Unix(1_800_000_000, 0).UnixNano())
	return &now
}

func cacheRequest(tenantID, body string) *wasmhost.Request {
	r := wasmhost.AcquireRequest()
	r.Model, r.RequestID, r.Endpoint, r.Body = []byte("mock-1"), []byte("req"), []byte("chat/completions"), []byte(body)
	if tenantID != "" {
		r.Tenant = &wasmhost.Tenant{ID: tenantID}
	}
	return r
}

func clientHeader(r *wasmhost.Request, name string) string {
	for _, h := range r.SetClientHeaders {
		if strings.EqualFold(string(h.Name), name) {
			return string(h.Value)
		}
	}
	return ""
}

// lookup serves one cache.lookup on a fresh session bound to set; the
// session and request are returned for the caller to go on with.
func lookup(t *testing.T, set *Set, tenantID, body, req string) (*Session, *wasmhost.Request, string) {
	t.Helper()
	sv := new(Session)
	sv.Bind(set)
	r := cacheRequest(tenantID, body)
	t.Cleanup(func() { sv.Reset(); wasmhost.ReleaseRequest(r) })
	out, err := sv.Call(r, CacheLookupService, []byte(req))
	if err != nil {
		t.Fatalf("lookup %q: %v", req, err)
	}
	return sv, r, string(out)
}

func TestCacheLookupRefusesMalformedRequests(t *testing.T) {
	t.Parallel()
	set, counts, _ := newCacheSet(t, newClock())
	for _, req := range []string{
		"", "1000", "1000 tenant -", "1000 tenant - 0 x", "1000 tenant - 0 1000",
		"0 tenant - 0", "-1 tenant - 0", "86400001 tenant - 0", "1h tenant - 0", "x tenant - 0", "1.5 tenant - 0",
		"1000 tenants - 0", "1000 shared: - 0", "1000 shared:a/b - 0", "1000 shared:" + strings.Repeat("a", 65) + " - 0", "1000 Tenant - 0",
		"1000 tenant nope 0", "1000 tenant coalesce,nope 0", "1000 tenant , 0", "1000 tenant coalesce, 0", "1000 tenant ,refresh 0", "1000 tenant -,refresh 0",
		"1000 tenant - -1", "1000 tenant - 1000001", "1000 tenant - x",
	} {
		var sv Session
		sv.Bind(set)
		r := cacheRequest("a", cacheBody)
		_, err := sv.Call(r, CacheLookupService, []byte(req))
		if !errors.Is(err, wasmhost.ErrBadServiceRequest) {
			t.Errorf("lookup %q: err %v, want ErrBadServiceRequest", req, err)
		}
		if sv.CacheOutcome() != CacheNone || len(r.SetClientHeaders) != 0 {
			t.Errorf("lookup %q: outcome %v, headers %d", req, sv.CacheOutcome(), len(r.SetClientHeaders))
		}
		sv.Reset()
		wasmhost.ReleaseRequest(r)
	}
	// The bounds themselves are accepted.
	for _, req := range []string{"1 tenant - 0", "86400000 shared:A-z_0.9 coalesce,refresh 1000000", "1000 tenant refresh,coalesce 5"} {
		if _, _, out := lookup(t, set, "a", cacheBody, req); out != "miss" {
			t.Errorf("lookup %q = %q, want miss", req, out)
		}
	}
	for o := CacheHit; o <= CacheBypass; o++ {
		if o != CacheMiss && counts.Cache.Lookups[o].Load() != 0 {
			t.Errorf("%v counted %d", o, counts.Cache.Lookups[o].Load())
		}
	}
	if n := counts.Cache.Lookups[CacheMiss].Load(); n != 3 {
		t.Errorf("misses %d, want 3", n)
	}
}

func TestCacheOneLookupPerRequest(t *testing.T) {
	t.Parallel()
	set, _, _ := newCacheSet(t, newClock())
	sv, r, out := lookup(t, set, "a", cacheBody, "1000 tenant - 0")
	if out != "miss" {
		t.Fatalf("first lookup %q", out)
	}
	if _, err := sv.Call(r, CacheLookupService, []byte("1000 tenant - 0")); !errors.Is(err, wasmhost.ErrBadServiceRequest) {
		t.Errorf("second lookup: %v", err)
	}
	if _, err := sv.Call(r, CacheSkipService, []byte("x")); !errors.Is(err, wasmhost.ErrBadServiceRequest) {
		t.Errorf("skip after a lookup: %v", err)
	}
	if sv.CacheOutcome() != CacheMiss || !sv.CacheWantsReply() {
		t.Errorf("outcome %v wants %v", sv.CacheOutcome(), sv.CacheWantsReply())
	}
}

func TestCacheSkip(t *testing.T) {
	t.Parallel()
	set, counts, _ := newCacheSet(t, newClock())
	for _, req := range []string{"", "a b", "a\nb", strings.Repeat("x", 65)} {
		var sv Session
		sv.Bind(set)
		r := cacheRequest("a", cacheBody)
		if _, err := sv.Call(r, CacheSkipService, []byte(req)); !errors.Is(err, wasmhost.ErrBadServiceRequest) {
			t.Errorf("skip %q: %v", req, err)
		}
		wasmhost.ReleaseRequest(r)
	}
	var sv Session
	sv.Bind(set)
	defer sv.Reset()
	r := cacheRequest("a", cacheBody)
	defer wasmhost.ReleaseRequest(r)
	out, err := sv.Call(r, CacheSkipService, []byte("no-store"))
	if err != nil || string(out) != "ok" {
		t.Fatalf("skip = %q, %v", out, err)
	}
	if sv.CacheOutcome() != CacheBypass || sv.CacheWantsReply() || clientHeader(r, "X-Tollgate-Cache") != "bypass" {
		t.Errorf("outcome %v wants %v header %q", sv.CacheOutcome(), sv.CacheWantsReply(), clientHeader(r, "X-Tollgate-Cache"))
	}
	if _, err := sv.Call(r, CacheLookupService, []byte("1000 tenant - 0")); !errors.Is(err, wasmhost.ErrBadServiceRequest) {
		t.Errorf("lookup after a skip: %v", err)
	}
	if n := counts.Cache.Lookups[CacheBypass].Load(); n != 1 {
		t.Errorf("bypasses %d", n)
	}
}

func TestCacheBypassReasons(t *testing.T) {
	t.Parallel()
	set, counts, _ := newCacheSet(t, newClock())
	tests := []struct {
		name, tenant, body, req, want string
		noAnswer                      bool
	}{
		{"no tenant", "", cacheBody, "1000 tenant - 0", "bypass notenant", false},
		{"endpoint", "a", cacheBody, "1000 tenant - 0", "bypass endpoint", true},
		{"endpoint before tenant", "", cacheBody, "1000 tenant - 0", "bypass endpoint", true},
		{"body not an object", "a", `[1,2]`, "1000 tenant - 0", "bypass body", false},
		{"body not JSON", "a", `{"model":`, "1000 shared:x - 0", "bypass body", false},
	}
	for _, tt := range tests {
		var sv Session
		sv.Bind(set)
		r := cacheRequest(tt.tenant, tt.body)
		r.NoAnswer = tt.noAnswer
		out, err := sv.Call(r, CacheLookupService, []byte(tt.req))
		if err != nil || string(out) != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.name, out, err, tt.want)
		}
		if sv.CacheOutcome() != CacheBypass || sv.CacheWantsReply() || clientHeader(r, "X-Tollgate-Cache") != "bypass" || r.Answer.Status != 0 {
			t.Errorf("%s: outcome %v wants %v header %q answer %d", tt.name, sv.CacheOutcome(), sv.CacheWantsReply(),
				clientHeader(r, "X-Tollgate-Cache"), r.Answer.Status)
		}
		sv.Reset()
		wasmhost.ReleaseRequest(r)
	}
	// A shared scope needs no tenant.
	if _, _, out := lookup(t, set, "", cacheBody, "1000 shared:x - 0"); out != "miss" {
		t.Errorf("shared scope without a tenant: %q", out)
	}
	if n := counts.Cache.Lookups[CacheBypass].Load(); n != int64(len(tests)) {
		t.Errorf("bypasses %d, want %d", n, len(tests))
	}
}

func TestCacheMissThenHit(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			now := newClock()
			set, counts, _ := newCacheSet(t, now)
			sv, r, out := lookup(t, set, "a", cacheBody, "60000 tenant - 0")
			if out != "miss" || clientHeader(r, "X-Tollgate-Cache") != "miss" || r.Answer.Status != 0 || !sv.CacheWantsReply() {
				t.Fatalf("first lookup %q header %q answer %d", out, clientHeader(r, "X-Tollgate-Cache"), r.Answer.Status)
			}
			e := &respcache.Entry{Stream: stream, PromptTokens: 7, CompletionTokens: 3, Model: "mock-1"}
			if stream {
				e.Events = [][]byte{[]byte(`{"a":1}`), []byte(`{"b":2}`)}
			} else {
				e.Body = []byte(`{"whole":true}`)
			}
			sv.CacheStore(context.Background(), e)
			if sv.CacheWantsReply() || counts.Cache.Stored.Load() != 1 {
				t.Fatalf("after store: wants %v stored %d", sv.CacheWantsReply(), counts.Cache.Stored.Load())
			}
			sv.CacheStore(context.Background(), e) // once
			if counts.Cache.Stored.Load() != 1 {
				t.Fatalf("stored twice")
			}
			now.Add(int64(2500 * time.Millisecond))
			sv2, r2, out := lookup(t, set, "a", cacheBody, "60000 tenant - 0")
			if out != "hit 2500" {
				t.Fatalf("second lookup %q, want hit 2500", out)
			}
			if clientHeader(r2, "X-Tollgate-Cache") != "hit" || clientHeader(r2, "Age") != "2" {
				t.Errorf("headers %q %q", clientHeader(r2, "X-Tollgate-Cache"), clientHeader(r2, "Age"))
			}
			a := &r2.Answer
			if a.Status != 200 || a.Source != "cache" || a.IsStream() != stream {
				t.Fatalf("answer %d %q stream %v", a.Status, a.Source, a.IsStream())
			}
			if stream {
				if len(a.Events) != 2 || string(a.Events[0]) != `{"a":1}` || string(a.Events[1]) != `{"b":2}` {
					t.Errorf("events %q", a.Events)
				}
			} else if string(a.Body) != `{"whole":true}` {
				t.Errorf("body %q", a.Body)
			}
			if sv2.CacheOutcome() != CacheHit || sv2.CacheWantsReply() {
				t.Errorf("hit: outcome %v wants %v", sv2.CacheOutcome(), sv2.CacheWantsReply())
			}
			c := &counts.Cache
			if c.Lookups[CacheHit].Load() != 1 || c.Lookups[CacheMiss].Load() != 1 || c.BytesServed.Load() != int64(a.Size()) {
				t.Errorf("counts hit %d miss %d bytes %d (answer %d)", c.Lookups[CacheHit].Load(), c.Lookups[CacheMiss].Load(), c.BytesServed.Load(), a.Size())
			}
			// Past its ttl the entry is a miss again.
			now.Add(int64(time.Minute))
			if _, _, out := lookup(t, set, "a", cacheBody, "60000 tenant - 0"); out != "miss" {
				t.Errorf("after the ttl: %q", out)
			}
		})
	}
}

func storeReply(t *testing.T, set *Set, tenantID, req, body string) {
	t.Helper()
	sv, _, out := lookup(t, set, tenantID, cacheBody, req)
	if out != "miss" {
		t.Fatalf("lookup %q: %q", req, out)
	}
	sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(body), PromptTokens: 1000, CompletionTokens: 100})
}

func TestCacheScopes(t *testing.T) {
	t.Parallel()
	set, _, _ := newCacheSet(t, newClock())
	storeReply(t, set, "a", "60000 tenant - 0", `{"of":"a"}`)
	if _, _, out := lookup(t, set, "b", cacheBody, "60000 tenant - 0"); out != "miss" {
		t.Errorf("tenant b found tenant a's entry: %q", out)
	}
	if _, _, out := lookup(t, set, "a", cacheBody, "60000 shared:x - 0"); out != "miss" {
		t.Errorf("a shared scope found a tenant's entry: %q", out)
	}
	_, r, out := lookup(t, set, "a", cacheBody, "60000 tenant - 0")
	if !strings.HasPrefix(out, "hit ") || string(r.Answer.Body) != `{"of":"a"}` {
		t.Errorf("tenant a: %q %q", out, r.Answer.Body)
	}
	storeReply(t, set, "c", "60000 shared:team - 0", `{"of":"team"}`)
	for _, tenantID := range []string{"c", "d", ""} {
		_, r, out := lookup(t, set, tenantID, cacheBody, "60000 shared:team - 0")
		if !strings.HasPrefix(out, "hit ") || string(r.Answer.Body) != `{"of":"team"}` {
			t.Errorf("shared:team for %q: %q %q", tenantID, out, r.Answer.Body)
		}
	}
	if _, _, out := lookup(t, set, "d", cacheBody, "60000 shared:other - 0"); out != "miss" {
		t.Errorf("shared:other found shared:team's entry: %q", out)
	}
}

func TestCacheRefresh(t *testing.T) {
	t.Parallel()
	set, _, _ := newCacheSet(t, newClock())
	storeReply(t, set, "a", "60000 tenant - 0", `{"v":1}`)
	sv, r, out := lookup(t, set, "a", cacheBody, "60000 tenant refresh 0")
	if out != "miss" || r.Answer.Status != 0 || !sv.CacheWantsReply() {
		t.Fatalf("refresh served the stored entry: %q answer %d", out, r.Answer.Status)
	}
	sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(`{"v":2}`)})
	_, r, out = lookup(t, set, "a", cacheBody, "60000 tenant - 0")
	if !strings.HasPrefix(out, "hit ") || string(r.Answer.Body) != `{"v":2}` {
		t.Errorf("after refresh: %q %q", out, r.Answer.Body)
	}
}

func TestCacheHitTokensAndSaved(t *testing.T) {
	t.Parallel()
	if got := scalePPM(3, 1); got != 1 {
		t.Errorf("scalePPM(3, 1) = %d, want 1 (rounded up)", got)
	}
	if got := scalePPM(1_000_001, 999_999); got != 1_000_000 {
		t.Errorf("scalePPM(1000001, 999999) = %d", got)
	}
	tests := []struct {
		ppm                  string
		prompt, completion   int64 // charged for a stored 1000 + 100
		saved, chargedMicros int64
	}{
		{"0", 0, 0, 2000, 0},
		{"1000000", 1000, 100, 0, 2000},
		{"250000", 250, 25, 1500, 500},
		{"1", 1, 1, 1989, 11}, // rounded up: a hit is never free unless hit_cost is 0
		{"333333", 334, 34, 2000 - 334 - 340, 334 + 340},
	}
	for _, tt := range tests {
		set, counts, _ := newCacheSet(t, newClock())
		storeReply(t, set, "a", "60000 tenant - "+tt.ppm, `{}`)
		sv, r, out := lookup(t, set, "a", cacheBody, "60000 tenant - "+tt.ppm)
		if !strings.HasPrefix(out, "hit ") {
			t.Fatalf("ppm %s: %q", tt.ppm, out)
		}
		if p, q := sv.CacheHitTokens(1000, 100); p != tt.prompt || q != tt.completion {
			t.Errorf("ppm %s: hit tokens %d %d, want %d %d", tt.ppm, p, q, tt.prompt, tt.completion)
		}
		if got := sv.CacheSaved(r); got != tt.saved {
			t.Errorf("ppm %s: saved %d, want %d", tt.ppm, got, tt.saved)
		}
		if got := sv.CacheSaved(r); got != tt.saved || counts.Cache.SavedMicros.Load() != tt.saved {
			t.Errorf("ppm %s: second CacheSaved %d, counted %d (want once: %d)", tt.ppm, got, counts.Cache.SavedMicros.Load(), tt.saved)
		}
		if c, _ := set.Cost(r, tt.prompt, tt.completion); c != tt.chargedMicros {
			t.Errorf("ppm %s: charged %d, want %d", tt.ppm, c, tt.chargedMicros)
		}
	}
	// A miss is charged in full and saved nothing; so is an unpriced hit.
	set, counts, _ := newCacheSet(t, newClock())
	sv, r, _ := lookup(t, set, "a", cacheBody, "60000 tenant - 0")
	if p, q := sv.CacheHitTokens(1000, 100); p != 1000 || q != 100 || sv.CacheSaved(r) != 0 {
		t.Errorf("miss: %d %d saved %d", p, q, sv.CacheSaved(r))
	}
	sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(`{}`), PromptTokens: 1000, CompletionTokens: 100})
	sv, r, out := lookup(t, set, "a", cacheBody, "60000 tenant - 0")
	r.Model = []byte("unpriced")
	if !strings.HasPrefix(out, "hit ") || sv.CacheSaved(r) != 0 || counts.Cache.SavedMicros.Load() != 0 {
		t.Errorf("unpriced hit: %q saved %d", out, sv.CacheSaved(r))
	}
}

// The wasmhost test plugin dispatches a cache.lookup and records the
// answer; a Session bound to set is its Dispatcher.
type lookupRunner struct {
	pl  *wasmhost.Pipeline
	set *Set
}

func newLookupRunner(t *testing.T, set *Set, req string) *lookupRunner {
	t.Helper()
	path, err := wasmbuild.Cached("../../../sdk/wasmhost/testdata/testplugin")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := wasmhost.NewHost("", quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cfg := `{"request":[` + quoteJSON("dispatch:"+CacheLookupService+"="+req) + `,"pause"],"call_response":["record_response","pause_until:1"]}`
	pl, err := wasmhost.NewPipeline(context.Background(), h, []wasmhost.Spec{{Name: "d", Module: mod, Config: []byte(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	return &lookupRunner{pl: pl, set: set}
}

type lookupRun struct {
	sv        *Session
	r         *wasmhost.Request
	cancel    context.CancelFunc
	done      chan struct{}
	responses string
}

// start runs a request through the pipeline on its own goroutine.
func (lr *lookupRunner) start(tenantID string) *lookupRun {
	ctx, cancel := context.WithCancel(context.Background())
	run := &lookupRun{sv: new(Session), r: cacheRequest(tenantID, cacheBody), cancel: cancel, done: make(chan struct{})}
	run.sv.Bind(lr.set)
	run.r.Services, run.r.Context = run.sv, ctx
	go func() {
		defer close(run.done)
		_ = lr.pl.Request(run.r)
		res, _ := run.r.Fact("responses")
		run.responses = string(res)
	}()
	return run
}

func (run *lookupRun) wait(t *testing.T) string {
	t.Helper()
	select {
	case <-run.done:
		return run.responses
	case <-time.After(30 * time.Second):
		t.Fatal("request still waiting")
		return ""
	}
}

// close ends the request. One still stuck in the host after its context
// ended is a failure, and is left (its request still in use).
func (run *lookupRun) close(t *testing.T) {
	t.Helper()
	run.cancel()
	select {
	case <-run.done:
	case <-time.After(30 * time.Second):
		t.Error("request still running after its context ended")
		return
	}
	run.sv.Reset()
	wasmhost.ReleaseRequest(run.r)
}

// waitCoalesced waits until n requests joined a flight.
func waitCoalesced(t *testing.T, counts *Counts, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for counts.Cache.Coalesced.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("coalesced %d, want %d", counts.Cache.Coalesced.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCacheCoalescing(t *testing.T) {
	t.Parallel()
	t.Run("served the leader's reply", func(t *testing.T) {
		t.Parallel()
		set, counts, st := newCacheSet(t, newClock())
		lr := newLookupRunner(t, set, "60000 tenant coalesce 0")
		leader := lr.start("a")
		defer leader.close(t)
		if got := leader.wait(t); got != "0:0:miss:;" {
			t.Fatalf("leader %q", got)
		}
		followers := []*lookupRun{lr.start("a"), lr.start("a")}
		for _, f := range followers {
			defer f.close(t)
		}
		waitCoalesced(t, counts, 2)
		for _, f := range followers {
			select {
			case <-f.done:
				t.Fatalf("a follower went on while the leader holds the flight: %q", f.responses)
			default:
			}
		}
		// Another tenant's identical request is not coalesced with them.
		other := lr.start("b")
		defer other.close(t)
		if got := other.wait(t); got != "0:0:miss:;" {
			t.Errorf("other tenant %q", got)
		}
		leader.sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(`{"led":1}`)})
		for _, f := range followers {
			if got := f.wait(t); !strings.HasPrefix(got, "0:0:hit ") {
				t.Errorf("follower %q, want a hit", got)
			}
			if string(f.r.Answer.Body) != `{"led":1}` || f.sv.CacheOutcome() != CacheHit {
				t.Errorf("follower answer %q outcome %v", f.r.Answer.Body, f.sv.CacheOutcome())
			}
		}
		if n := st.Stats().Coalesced; n != 2 {
			t.Errorf("store coalesced %d", n)
		}
	})
	t.Run("follower's context ends", func(t *testing.T) {
		t.Parallel()
		set, counts, _ := newCacheSet(t, newClock())
		lr := newLookupRunner(t, set, "60000 tenant coalesce 0")
		leader := lr.start("a")
		defer leader.close(t)
		if got := leader.wait(t); got != "0:0:miss:;" {
			t.Fatalf("leader %q", got)
		}
		f := lr.start("a")
		waitCoalesced(t, counts, 1)
		f.cancel()
		f.wait(t) // stopped waiting, the leader still in flight
		// It goes on alone, a miss: the leader still holds the flight.
		if f.sv.CacheOutcome() != CacheMiss || f.r.Answer.Status != 0 {
			t.Errorf("follower outcome %v", f.sv.CacheOutcome())
		}
		f.close(t)
	})
	t.Run("leader reset without storing", func(t *testing.T) {
		t.Parallel()
		set, counts, _ := newCacheSet(t, newClock())
		lr := newLookupRunner(t, set, "60000 tenant coalesce 0")
		leader := lr.start("a")
		if got := leader.wait(t); got != "0:0:miss:;" {
			t.Fatalf("leader %q", got)
		}
		f := lr.start("a")
		defer f.close(t)
		waitCoalesced(t, counts, 1)
		leader.close(t) // Session.Reset: the flight ends unstored
		if got := f.wait(t); got != "0:0:miss:;" {
			t.Fatalf("follower %q, want a miss", got)
		}
		// The follower leads now: the next identical request waits on it.
		g := lr.start("a")
		defer g.close(t)
		waitCoalesced(t, counts, 2)
		f.sv.CacheStore(context.Background(), &respcache.Entry{Body: []byte(`{"second":1}`)})
		if got := g.wait(t); !strings.HasPrefix(got, "0:0:hit ") || string(g.r.Answer.Body) != `{"second":1}` {
			t.Errorf("next request %q %q", got, g.r.Answer.Body)
		}
	})
	t.Run("call does not wait", func(t *testing.T) {
		t.Parallel()
		set, counts, _ := newCacheSet(t, newClock())
		lr := newLookupRunner(t, set, "60000 tenant coalesce 0")
		leader := lr.start("a")
		defer leader.close(t)
		if got := leader.wait(t); got != "0:0:miss:;" {
			t.Fatalf("leader %q", got)
		}
		// Through `call` (an instance held), a lookup never waits.
		if _, _, out := lookup(t, set, "a", cacheBody, "60000 tenant coalesce 0"); out != "miss" {
			t.Errorf("call %q", out)
		}
		if n := counts.Cache.Coalesced.Load(); n != 0 {
			t.Errorf("coalesced %d", n)
		}
	})
}
