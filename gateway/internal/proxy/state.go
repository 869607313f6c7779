package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/accounting"
	"github.com/tollgate/tollgate/gateway/internal/balance"
	"github.com/tollgate/tollgate/gateway/internal/chains"
	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/hostsvc"
	"github.com/tollgate/tollgate/gateway/internal/provider"
	"github.com/tollgate/tollgate/gateway/internal/tenant"
	"github.com/tollgate/tollgate/gateway/internal/upstream"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// state is everything derived from one policy: routes, upstream pools and
// the plugin pipeline. It is immutable and swapped whole on reload. Each
// request holds a reference for its whole life (stream included), so a
// reload never changes the rules under a request in flight, and the old
// state's plugins and connections are closed when its last request ends.
type state struct {
	policy  *config.Policy
	routes  *router
	files   *route                // /v1/files and /v1/batches (passthru.go); nil: not served
	mcp     map[string]*mcpServer // the policy's MCP servers, by name (mcp.go)
	clients map[string]*upstream.Client
	// bindings are the upstreams' providers, by name (provider.go).
	bindings map[string]*binding
	filters  map[*upstream.Client]*headerFilter
	// health is each upstream's breaker, in-flight count and attempt
	// counters, in policy order (metrics read it).
	health   []*balance.Upstream
	pipeline *wasmhost.Pipeline
	services *hostsvc.Set
	plugins  *chains.Compiler // plans' and tenants' plugin overrides (chains.go)
	tenants  *tenant.Cache    // the tenant store's cache
	admin    http.Handler     // nil without the Postgres store
	closers  []func()         // tenant store, cache, listener
	acct     *accounting.Accounting

	loadedAt  time.Time    // when newState built it
	refs      atomic.Int64 // requests in flight + 1 while current
	closeOnce sync.Once
}

func (s *Server) newState(p *config.Policy) (_ *state, err error) {
	st := &state{policy: p, loadedAt: time.Now(), acct: s.acct, clients: make(map[string]*upstream.Client), bindings: make(map[string]*binding), filters: make(map[*upstream.Client]*headerFilter)}
	st.refs.Store(1)
	s.acct.OpenState()
	defer func() {
		if err != nil {
			st.close() // what was opened before the failure
		}
	}()
	if err := s.openTenants(st, p); err != nil {
		return nil, err
	}
	var specs []wasmhost.Spec
	if specs, err = PluginSpecs(p); err != nil {
		return nil, err
	}
	if len(specs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var pipe *wasmhost.Pipeline
		if pipe, err = wasmhost.NewPipeline(ctx, s.host, specs); err != nil {
			return nil, err
		}
		st.pipeline = pipe
	}
	if err := st.openChains(p, specs); err != nil {
		return nil, err
	}
	health := make(map[string]*balance.Upstream, len(p.Upstreams))
	for i := range p.Upstreams {
		u := &p.Upstreams[i]
		b, err := provider.Bind(u)
		if err != nil {
			return nil, err
		}
		if b.Close != nil {
			st.closers = append(st.closers, b.Close)
		}
		c := upstream.New(u, b.Options...)
		st.clients[u.Name] = c
		st.bindings[u.Name] = newBinding(u, b)
		f := newHeaderFilter(u.ForwardHeaders)
		if len(b.Withhold) > 0 {
			f.withhold(b.Withhold...)
		}
		if s.tracing != nil {
			f.withhold("traceparent", "tracestate") // the gateway sends its own
		}
		st.filters[c] = f
		h := balance.NewUpstream(u.Name, healthConfig(u))
		health[u.Name] = h
		st.health = append(st.health, h)
	}
	st.routes = newRouter(p, st.clients, st.bindings, st.filters, health, time.Now())
	if err := st.routes.bindChains(p, st.pipeline); err != nil {
		return nil, err
	}
	st.files = newFilesRoute(p, st.clients, st.bindings, st.filters, health)
	if st.mcp, err = newMCPServers(p, st.pipeline, s.tracing != nil, s.mcpKey); err != nil {
		return nil, err
	}
	if st.mcp != nil {
		st.closers = append(st.closers, func() { closeMCPServers(st.mcp) })
	}
	st.closers = append(st.closers, s.obs.Attach(st.pipeline, st.tenants))
	return st, nil
}

// acquireState returns the current state with a reference the caller must
// release. Nil once the server has shut down.
func (s *Server) acquireState() *state {
	for {
		st := s.state.Load()
		if st == nil {
			return nil
		}
		st.refs.Add(1)
		if s.state.Load() == st {
			return st
		}
		st.release() // swapped meanwhile: take the new one
	}
}

func (st *state) release() {
	if st.refs.Add(-1) == 0 {
		st.closeOnce.Do(st.close)
	}
}

func (st *state) close() {
	for _, c := range st.closers {
		c()
	}
	st.pipeline.Close()
	for _, c := range st.clients {
		c.Close()
	}
	st.acct.CloseState()
}

// Reload swaps in a new policy: its plugins are compiled and configured
// beside the old ones, then the swap is atomic; requests in flight finish
// on the old state, which is closed when the last of them ends. On error the
// old state keeps serving. Server settings (listen address, limits) are not
// reloaded.
func (s *Server) Reload(p *config.Policy) error {
	st, err := s.newState(p)
	if err != nil {
		s.lastReloadFailure.Store(&reloadFailure{err: err.Error(), at: time.Now().UTC()})
		return err
	}
	old := s.state.Swap(st)
	if old == nil { // shut down meanwhile
		s.state.Store(nil)
		st.release()
		return fmt.Errorf("reload: the server is shut down")
	}
	s.acct.CheckReload(p)
	if !old.policy.Server.Same(p.Server) {
		s.log.Warn("reload: the server section changed; it applies at the next restart")
	}
	if !old.policy.Tracing.Same(p.Tracing) {
		s.log.Warn("reload: the tracing section changed; it applies at the next restart")
	}
	if !old.policy.Metrics.Same(p.Metrics) {
		s.log.Warn("reload: the metrics section changed; it applies at the next restart")
	}
	old.release()
	s.reloads.Add(1)
	s.lastReloadFailure.Store(nil)
	return nil
}

// Reloads counts successful reloads.
func (s *Server) Reloads() int64 { return s.reloads.Load() }

// readUpstreams calls read with the current policy's upstreams (metrics
// read their counters); not at all once the server has shut down.
func (s *Server) readUpstreams(read func([]*balance.Upstream)) {
	if st := s.acquireState(); st != nil {
		defer st.release()
		read(st.health)
	}
}
