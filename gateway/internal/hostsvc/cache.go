package hostsvc

import (
	"bytes"
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// The response cache's services (docs/adr/0028-response-cache.md). A
// plugin decides whether a request may be served from the cache; the host
// keys, looks up, answers and stores.
const (
	CacheLookupService = "cache.lookup"
	CacheSkipService   = "cache.skip"
)

// MaxCacheTTL bounds an entry's time to live.
const MaxCacheTTL = 24 * time.Hour

// CacheOutcome is what the cache did for a request: the call log's
// cache column and the X-Tollgate-Cache header.
type CacheOutcome uint8

// Cache outcomes.
const (
	CacheNone   CacheOutcome = iota // no cache service was called
	CacheHit                        // served from the cache
	CacheMiss                       // looked up (or refreshed): the upstream's reply is stored if it completes
	CacheBypass                     // not cacheable, or the client or plugin said not to use the cache
	cacheOutcomes
)

// CacheOutcomeNames name the outcomes for metrics and the call log ("" for
// none).
var CacheOutcomeNames = [cacheOutcomes]string{"", "hit", "miss", "bypass"}

func (o CacheOutcome) String() string { return CacheOutcomeNames[o] }

// CacheCounts count the cache services' work; they outlive reloads.
type CacheCounts struct {
	// Lookups by outcome (index CacheOutcome; 0 unused).
	Lookups [cacheOutcomes]atomic.Int64
	// BytesServed counts the bytes of answers served from the cache,
	// SavedMicros what those replies would have cost (USD micros at the
	// current prices), Stored the replies stored, StoreFailed those that
	// could not be (Redis down, over the size cap), Coalesced the
	// requests that waited for an identical request's reply.
	BytesServed, SavedMicros, Stored, StoreFailed, Coalesced atomic.Int64
}

// Cache serves cache.lookup and cache.skip from a respcache.Store.
type Cache struct {
	store  *respcache.Store // nil until open made it
	open   func() (*respcache.Store, error)
	once   sync.Once
	log    *slog.Logger
	counts *CacheCounts
	now    func() time.Time
}

// Store returns the cache's store, opening it at the first call when it
// is opened on demand; nil if it could not be opened (logged once).
func (ca *Cache) Store() *respcache.Store {
	ca.once.Do(func() {
		if ca.store != nil || ca.open == nil {
			return
		}
		st, err := ca.open()
		if err != nil {
			ca.log.Error("response cache: store not opened; every lookup is a bypass", "err", err)
			return
		}
		ca.store = st
	})
	return ca.store
}

// CloseCache closes the response cache's store if the Set opened it on
// demand (Config.OpenCache), once no request uses the Set; a store given
// as Config.Cache is the caller's.
func (s *Set) CloseCache() {
	ca := s.cache
	if ca == nil || ca.open == nil {
		return
	}
	ca.once.Do(func() {}) // from here on, no lookup opens it
	if ca.store != nil {
		ca.store.Close()
	}
}

// cacheState is a request's part in the cache, kept in its Session.
type cacheState struct {
	outcome CacheOutcome
	key     []byte
	ttl     time.Duration
	// hitPPM is the share of the stored reply's price a hit costs, in
	// millionths (the plugin's hit_cost).
	hitPPM int64
	// flight is the request's coalescing flight while it leads one.
	flight *respcache.Flight
	// pending: the reply is to be stored when the request completes.
	pending bool
	// The stored reply's usage, for a hit; saved what it saved (once
	// savedDone).
	prompt, completion int64
	saved              int64
	savedDone          bool
	fields             [5][]byte // a fifth: a request with too many fields is refused
}

func (cs *cacheState) reset() {
	if cs.flight != nil {
		cs.flight.Done()
	}
	*cs = cacheState{key: cs.key[:0]}
}

// cacheLookup serves cache.lookup. Its request:
//
//	TTL_MS SCOPE FLAGS HIT_COST_PPM
//
// TTL_MS is the entry's time to live (1 ms to 24 h); SCOPE is "tenant"
// (the request's tenant: a request without one is not cached) or
// "shared:NAME" (every tenant whose plugin names it); FLAGS is "-" or a
// comma-separated list of "coalesce" (wait for an identical request in
// flight on this replica instead of calling the upstream again) and
// "refresh" (do not serve a stored reply, store the new one: the client's
// Cache-Control: no-cache); HIT_COST_PPM is what a hit costs, in
// millionths of the stored reply's price (0: free).
//
// Answers: "hit AGE_MS" (the request's answer is set: the plugin answers
// RESPOND), "miss" (the reply is stored if it completes) or
// "bypass REASON" (notenant, endpoint, body: not cacheable; unavailable:
// the store could not be opened). A store that
// fails (Redis down) answers "miss": a request never fails for the cache.
func (c *Session) cacheLookup(ctx context.Context, r *wasmhost.Request, req []byte, wait bool) ([]byte, error) {
	ca := c.set.cache
	cs := &c.cache
	store := ca.Store()
	f := fields(cs.fields[:], req)
	if len(f) != 4 {
		return nil, errBadRequest
	}
	ttlMS, ok1 := atoi(f[0])
	ppm, ok2 := atoi(f[3])
	if !ok1 || !ok2 || ttlMS < 1 || ttlMS > MaxCacheTTL.Milliseconds() || ppm < 0 || ppm > 1_000_000 {
		return nil, errBadRequest
	}
	coalesce, refresh, ok := cacheFlags(f[2])
	if !ok {
		return nil, errBadRequest
	}
	scope, ok := cacheScope(r, f[1])
	switch {
	case !ok:
		return nil, errBadRequest
	case cs.outcome != CacheNone:
		return nil, errBadRequest // one lookup per request
	case store == nil:
		return c.bypass(r, "unavailable"), nil
	case r.NoAnswer:
		return c.bypass(r, "endpoint"), nil
	case scope == "":
		return c.bypass(r, "notenant"), nil
	}
	key, err := respcache.Key(cs.key[:0], scope, string(r.Endpoint), r.Body)
	if err != nil {
		return c.bypass(r, "body"), nil
	}
	cs.key, cs.ttl, cs.hitPPM = key, time.Duration(ttlMS)*time.Millisecond, ppm
	if !refresh {
		if out, hit := c.serveStored(ctx, store, r); hit {
			return out, nil
		}
		if coalesce && wait {
			fl, leader := store.Lead(string(key))
			if !leader {
				ca.counts.Coalesced.Add(1)
				if fl.Wait(ctx) == nil {
					if out, hit := c.serveStored(ctx, store, r); hit {
						return out, nil
					}
				}
				// The leader's reply was not stored: lead now, or go
				// on alone.
				fl, leader = store.Lead(string(key))
			}
			if leader {
				cs.flight = fl
			}
		}
	}
	cs.outcome, cs.pending = CacheMiss, true
	ca.counts.Lookups[CacheMiss].Add(1)
	r.AddClientHeader("X-Tollgate-Cache", []byte("miss"))
	return []byte("miss"), nil
}

// serveStored looks the request's key up in store and, on a hit, sets its
// answer.
func (c *Session) serveStored(ctx context.Context, store *respcache.Store, r *wasmhost.Request) ([]byte, bool) {
	ca, cs := c.set.cache, &c.cache
	e, hit, err := store.Get(ctx, string(cs.key))
	if err != nil {
		ca.log.Warn("response cache: lookup failed; served from the upstream", "err", err)
	}
	if !hit {
		return nil, false
	}
	if e.Stream {
		r.Answer.SetEvents(200, e.Events, "cache")
	} else {
		r.Answer.Set(200, e.Body, "cache")
	}
	cs.outcome, cs.prompt, cs.completion = CacheHit, e.PromptTokens, e.CompletionTokens
	ca.counts.Lookups[CacheHit].Add(1)
	ca.counts.BytesServed.Add(int64(r.Answer.Size()))
	r.AddClientHeader("X-Tollgate-Cache", []byte("hit"))
	age := max(ca.now().Sub(e.Stored), 0)
	r.AddClientHeader("Age", strconv.AppendInt(nil, int64(age/time.Second), 10))
	return strconv.AppendInt([]byte("hit "), age.Milliseconds(), 10), true
}

// cacheSkip serves cache.skip: the plugin decided not to use the cache for
// this request (REASON, one word, is logged nowhere but counted as a
// bypass). Answers "ok".
func (c *Session) cacheSkip(r *wasmhost.Request, req []byte) ([]byte, error) {
	if len(req) == 0 || len(req) > 64 || bytes.ContainsAny(req, " \n") || c.cache.outcome != CacheNone {
		return nil, errBadRequest
	}
	c.bypass(r, "")
	return []byte("ok"), nil
}

func (c *Session) bypass(r *wasmhost.Request, reason string) []byte {
	c.cache.outcome = CacheBypass
	c.set.cache.counts.Lookups[CacheBypass].Add(1)
	r.AddClientHeader("X-Tollgate-Cache", []byte("bypass"))
	return []byte("bypass " + reason)
}

func cacheFlags(b []byte) (coalesce, refresh, ok bool) {
	if string(b) == "-" {
		return false, false, true
	}
	for more := true; more; {
		var f []byte
		f, b, more = bytes.Cut(b, []byte(","))
		switch string(f) { // an empty flag ("coalesce,") is refused
		case "coalesce":
			coalesce = true
		case "refresh":
			refresh = true
		default:
			return false, false, false
		}
	}
	return coalesce, refresh, true
}

// cacheScope is the request's scope in the cache key: "t:" and the
// tenant's id, or "s:" and a shared scope's name; "" for "tenant" without
// a tenant. ok false for a malformed scope.
func cacheScope(r *wasmhost.Request, b []byte) (string, bool) {
	if string(b) == "tenant" {
		if r.Tenant == nil || r.Tenant.ID == "" {
			return "", true
		}
		return "t:" + r.Tenant.ID, true
	}
	name, ok := bytes.CutPrefix(b, []byte("shared:"))
	if !ok || len(name) == 0 || len(name) > 64 {
		return "", false
	}
	for _, ch := range name {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-' || ch == '.') {
			return "", false
		}
	}
	return "s:" + string(name), true
}

// CacheOutcome is what the cache did for the request.
func (c *Session) CacheOutcome() CacheOutcome { return c.cache.outcome }

// CacheHitTokens scales a hit's token counts to what the hit is charged:
// its share (hit_cost) of the stored reply's. Other requests' are
// returned as they are.
func (c *Session) CacheHitTokens(prompt, completion int64) (int64, int64) {
	cs := &c.cache
	if cs.outcome != CacheHit {
		return prompt, completion
	}
	return scalePPM(prompt, cs.hitPPM), scalePPM(completion, cs.hitPPM)
}

// scalePPM is n × ppm / 10⁶, rounded up.
func scalePPM(n, ppm int64) int64 {
	if n <= 0 || ppm <= 0 {
		return 0
	}
	return (n*ppm + 999_999) / 1_000_000
}

// CacheSaved is what a hit saved: the stored reply's usage priced for r's
// model, less what the hit is charged (USD micros; 0 for other requests
// or an unpriced model). Priced and counted once per request.
func (c *Session) CacheSaved(r *wasmhost.Request) int64 {
	cs := &c.cache
	if cs.outcome != CacheHit || c.set == nil || c.set.cache == nil {
		return 0
	}
	if !cs.savedDone {
		cs.savedDone = true
		if full, ok := c.set.budget.Cost(r, cs.prompt, cs.completion); ok {
			p, q := c.CacheHitTokens(cs.prompt, cs.completion)
			charged, _ := c.set.budget.Cost(r, p, q)
			cs.saved = max(full-charged, 0)
			c.set.cache.counts.SavedMicros.Add(cs.saved)
		}
	}
	return cs.saved
}

// CacheWantsReply reports whether the request's reply is to be stored.
func (c *Session) CacheWantsReply() bool { return c.cache.pending }

// CacheStore stores the request's completed reply (once, after it was
// served and no guard stopped it) and lets any request waiting on it go
// on. e.Stored is set here.
func (c *Session) CacheStore(ctx context.Context, e *respcache.Entry) {
	cs := &c.cache
	if !cs.pending || c.set == nil || c.set.cache == nil {
		return
	}
	cs.pending = false
	ca := c.set.cache
	e.Stored = ca.now().UTC()
	if err := ca.Store().Put(ctx, string(cs.key), e, cs.ttl); err != nil {
		ca.counts.StoreFailed.Add(1)
		ca.log.Warn("response cache: reply not stored", "err", err)
	} else {
		ca.counts.Stored.Add(1)
	}
	c.CacheDone()
}

// CacheDone ends the request's part in the cache without storing: a
// request that led a coalescing flight lets the others go on.
func (c *Session) CacheDone() {
	cs := &c.cache
	cs.pending = false
	if cs.flight != nil {
		cs.flight.Done()
		cs.flight = nil
	}
}
