package tenantstore

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/pricing"
	"github.com/tollgate/tollgate/gateway/internal/store/mem"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// Options are what Open needs besides the policy.
type Options struct {
	Log *slog.Logger
	// PGTracer traces every statement of the Postgres store (nil: none).
	PGTracer pgx.QueryTracer
	// Budget and Cancel serve the admin API's budget and cancel
	// endpoints (Postgres only).
	Budget admin.BudgetCounter
	Cancel func(ctx context.Context, id string) (bool, error)
	// CheckPlugins checks the plugin overrides of the admin API's plan
	// and tenant writes (Postgres only; nil: not checked).
	CheckPlugins admin.PluginChecker
	// Inflight lists the requests in flight and Policy describes the
	// running policy, for the admin API (nil: not served).
	Inflight admin.InflightLister
	Policy   func() admin.PolicyInfo
}

// Tenants is an open tenant store: its cache, and the admin API over it.
type Tenants struct {
	// Cache is the cache in front of the store: what requests read.
	Cache *tenant.Cache
	// Admin serves the admin API (read-only with the memory store).
	Admin   http.Handler
	closers []func() // run in order by Close
}

// Open builds the tenant store of p and its cache: the policy's tenants
// section (memory) or Postgres, whose writes evict cached entries through
// LISTEN/NOTIFY. On error what was opened is closed.
func Open(p *config.Policy, o Options) (_ *Tenants, err error) {
	t := new(Tenants)
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	var store tenant.Store
	var memStore *mem.Store
	switch p.Store.Kind {
	case config.StorePostgres:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		db, err := pg.Open(ctx, p.Store.Postgres.DSN, pg.Options{MaxConns: p.Store.Postgres.MaxConns, Logger: o.Log, Tracer: o.PGTracer})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("tenant store: %w", err)
		}
		t.closers = append(t.closers, db.Close)
		store = db
	default:
		m, err := mem.New(p.Tenants, os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("tenants: %w", err)
		}
		store, memStore = m, m
	}
	db, isPG := store.(*pg.Store)
	if p.Pricing.CatalogOn() {
		cat, err := pricing.Embedded()
		if err != nil {
			return nil, err
		}
		store = &pricing.Store{Store: store, Catalog: cat}
	}
	opts := tenant.CacheOptions{NegativeTTL: p.Store.Cache.NegativeTTL, MaxEntries: p.Store.Cache.MaxEntries}
	if ttl := p.Store.Cache.TTL; ttl != nil {
		opts.TTL, opts.PassThrough = *ttl, *ttl == 0
	}
	cache, err := tenant.NewCache(store, opts)
	if err != nil {
		return nil, fmt.Errorf("tenant cache: %w", err)
	}
	if isPG {
		// Closers run in order: stop listening, then close the store.
		t.closers = append([]func(){listen(db, cache, o.Log)}, t.closers...)
	}
	t.closers = append(t.closers, cache.Close)
	t.Cache = cache
	adminOpts := []admin.Option{admin.WithBudget(o.Budget), admin.WithCanceller(o.Cancel), admin.WithPrices(cache),
		admin.WithInflight(o.Inflight), admin.WithPolicy(o.Policy)}
	if isPG {
		t.Admin = admin.NewHandler(db, cache, p.Admin.Token, o.Log.With("component", "admin"), append(adminOpts, admin.WithPluginCheck(o.CheckPlugins))...)
	} else {
		// The policy is the store: the admin API reads it and refuses
		// writes (501 read_only_store).
		t.Admin = admin.NewHandler(admin.ReadOnlyStore(memStore), cache, p.Admin.Token, o.Log.With("component", "admin"),
			append(adminOpts, admin.WithReadOnly(true))...)
	}
	return t, nil
}

// listen evicts cache entries on the store's notifications until the
// returned stop is called. It waits (a few seconds at most) until the
// evictions are heard, so a write right after start is not missed (the
// TTL would bound it); Postgres being slow does not hold the gateway back
// for long.
func listen(db *pg.Store, cache *tenant.Cache, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	listening := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		db.Listen(ctx, func(payload string) {
			// Every (re)connection starts with "all", once LISTEN is
			// in effect.
			once.Do(func() { close(listening) })
			start := time.Now()
			if err := cache.HandleNotify(payload); err != nil {
				log.Warn("tenant cache eviction", "payload", payload, "err", err)
			}
			if log.Enabled(ctx, slog.LevelDebug) {
				log.Debug("tenant cache eviction applied", "payload", shortPayload(payload), "took", time.Since(start))
			}
		})
	}()
	select {
	case <-listening:
	case <-time.After(5 * time.Second):
		log.Warn("tenant cache: eviction listener not connected yet; serving (entries expire with the cache TTL meanwhile)")
	}
	return func() { cancel(); <-done }
}

// shortPayload is an eviction payload for a log line: a key's is its kind
// and the first 8 hex digits of the key's hash.
func shortPayload(p string) string {
	if len(p) > len("key:")+8 && strings.HasPrefix(p, "key:") {
		return p[:len("key:")+8] + "…"
	}
	return p
}

// Close stops the listener and closes the store and the cache. Safe on a
// partly opened Tenants.
func (t *Tenants) Close() {
	for _, c := range t.closers {
		c()
	}
	t.closers = nil
}
