package proxy

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/respcache"
	"github.com/tollgate/tollgate/gateway/internal/tenantstore"
)

// openTenants opens the tenant store of p for st (tenantstore), closed
// with st, and builds st's host services over its cache.
func (s *Server) openTenants(st *state, p *config.Policy) error {
	t, err := tenantstore.Open(p, tenantstore.Options{Log: s.log, PGTracer: s.pgTracer, Budget: s.acct.Budget, Cancel: s.AdminCancel,
		CheckPlugins: s.checkPlugins, Inflight: s.InflightRequests, Policy: s.PolicyInfo})
	if err != nil {
		return err
	}
	st.closers = append(st.closers, t.Close)
	st.tenants, st.admin = t.Cache, t.Admin
	co, err := s.newCallouts(p)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, co.Close)
	var openCache func() (*respcache.Store, error)
	if p.CacheEnabled() {
		// Opened at the first lookup: a policy whose plugins never ask
		// holds no cache.
		c, redis := p.Cache, s.acct.Redis
		local := int64(c.LocalMaxBytes)
		if !c.CacheLocal() {
			local = -1
		}
		openCache = func() (*respcache.Store, error) {
			return respcache.New(respcache.Config{Redis: redis, LocalMaxBytes: local, LocalTTL: c.LocalTTL,
				MaxEntryBytes: int(c.MaxEntryBytes), Timeout: c.Timeout})
		}
	}
	st.services = hostsvc.NewSet(hostsvc.Config{Log: s.log, Tenants: t.Cache, Prices: t.Cache,
		Limiter: s.acct.Limiter, Budget: s.acct.Budget, Counts: &s.svcCounts, Now: time.Now, NewID: s.ids.append,
		Alerts: s.acct.Alerts, EndUserHeader: p.Server.EndUserHeader,
		RefuseUnpriced: p.Pricing.Unpriced == config.UnpricedRefuse, Callout: co,
		OpenCache: openCache})
	st.closers = append(st.closers, st.services.CloseCache, st.services.WaitEnds)
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
