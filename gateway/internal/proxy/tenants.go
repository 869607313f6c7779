package proxy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/store/mem"
	"github.com/tollgate/tollgate/gateway/internal/store/pg"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
)

// openTenants builds the tenant store and its cache for a state: the
// policy's tenants section (memory) or Postgres, whose writes evict cached
// entries through LISTEN/NOTIFY.
func (s *Server) openTenants(st *state, p *config.Policy) error {
	var store tenant.Store
	switch p.Store.Kind {
	case config.StorePostgres:
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		db, err := pg.Open(ctx, p.Store.Postgres.DSN, pg.Options{MaxConns: p.Store.Postgres.MaxConns, Logger: s.log, Tracer: s.pgTracer})
		cancel()
		if err != nil {
			return fmt.Errorf("tenant store: %w", err)
		}
		st.closers = append(st.closers, db.Close)
		store = db
	default:
		m, err := mem.New(p.Tenants, os.LookupEnv)
		if err != nil {
			return fmt.Errorf("tenants: %w", err)
		}
		store = m
	}
	opts := tenant.CacheOptions{NegativeTTL: p.Store.Cache.NegativeTTL, MaxEntries: p.Store.Cache.MaxEntries}
	if ttl := p.Store.Cache.TTL; ttl != nil {
		opts.TTL, opts.PassThrough = *ttl, *ttl == 0
	}
	cache, err := tenant.NewCache(store, opts)
	if err != nil {
		return fmt.Errorf("tenant cache: %w", err)
	}
	// Closers run in order: stop listening, then close the cache.
	if db, ok := store.(*pg.Store); ok {
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		listening := make(chan struct{})
		var once sync.Once
		go func() {
			defer close(done)
			db.Listen(ctx, func(payload string) {
				// Every (re)connection starts with "all", once LISTEN is
				// in effect.
				once.Do(func() { close(listening) })
				if err := cache.HandleNotify(payload); err != nil {
					s.log.Warn("tenant cache eviction", "payload", payload, "err", err)
				}
			})
		}()
		st.closers = append([]func(){func() { stop(); <-done }}, st.closers...)
		// Serve once evictions are heard, so a write right after start is
		// not missed (the TTL would bound it); Postgres being slow does
		// not hold the gateway back for long.
		select {
		case <-listening:
		case <-time.After(5 * time.Second):
			s.log.Warn("tenant cache: eviction listener not connected yet; serving (entries expire with the cache TTL meanwhile)")
		}
	}
	st.closers = append(st.closers, cache.Close)
	if db, ok := store.(*pg.Store); ok {
		st.admin = admin.NewHandler(db, cache, p.Admin.Token, s.log.With("component", "admin"), admin.WithBudget(s.acct.Budget), admin.WithCanceller(s.AdminCancel))
	}
	st.tenants = cache
	st.services = hostsvc.NewSet(hostsvc.Config{Log: s.log, Tenants: cache, Prices: cache,
		Limiter: s.acct.Limiter, Budget: s.acct.Budget, Counts: &s.svcCounts, Now: time.Now, NewID: s.ids.append})
	return nil
}

// AdminHandler serves the admin API of the current policy's store; with
// the memory store it answers 501 (the policy file is the store).
func (s *Server) AdminHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := s.acquireState()
		if st == nil {
			http.Error(w, `{"error":{"message":"The gateway is shutting down.","type":"server_error","param":null,"code":"shutting_down"}}`, http.StatusServiceUnavailable)
			return
		}
		defer st.release()
		if st.admin == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotImplemented)
			w.Write([]byte(`{"error":{"message":"The admin API needs the Postgres store (store.kind: postgres); with the memory store, edit the policy and reload.","type":"invalid_request_error","param":null,"code":"read_only_store"}}`))
			return
		}
		st.admin.ServeHTTP(w, r)
	})
}
