package proxy

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/admin"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// reloadFailure is the error of the last reload, while it is the last.
type reloadFailure struct {
	err string
	at  time.Time
}

// PolicyInfo is the running policy for the admin API's GET
// /v1/admin/policy: its generation (1 + successful reloads), when it was
// loaded, the last reload's error if it failed, the store kind and each
// plugin with its counters.
func (s *Server) PolicyInfo() admin.PolicyInfo {
	info := admin.PolicyInfo{Reloads: s.reloads.Load(), Plugins: []admin.PluginInfo{}}
	info.Generation = info.Reloads + 1
	if f := s.lastReloadFailure.Load(); f != nil {
		msg, at := f.err, f.at
		info.LastReloadError, info.LastReloadErrorAt = &msg, &at
	}
	st := s.acquireState()
	if st == nil {
		return info
	}
	defer st.release()
	info.LoadedAt = st.loadedAt.UTC()
	info.Store = string(st.policy.Store.Kind)
	if info.Store == "" {
		info.Store = "memory"
	}
	for _, p := range st.pipeline.Plugins() {
		stats := p.Stats()
		pi := admin.PluginInfo{Name: p.Name(), Phases: phaseNames(p.Phases()),
			Instances: stats.InstancesCreated.Load() - stats.InstancesDiscarded.Load(), OnError: "closed",
			Calls: stats.Calls.Load(), Traps: stats.Traps.Load(), Timeouts: stats.Timeouts.Load(),
			PoolWaits: stats.PoolWaits.Load(), Overdue: stats.Overdue.Load(), Events: map[string]int64{}}
		if p.FailMode() == wasmhost.FailOpen {
			pi.OnError = "open"
		}
		pi.Errors = pi.Traps + pi.Timeouts
		stats.Events.Range(func(k, v any) bool {
			if c, ok := v.(interface{ Load() int64 }); ok {
				pi.Events[k.(string)] = c.Load()
			}
			return true
		})
		info.Plugins = append(info.Plugins, pi)
	}
	return info
}

// phaseNames spells a plugin's phases as the policy does.
func phaseNames(ph wasmhost.Phase) []string {
	out := []string{}
	for _, n := range []struct {
		p    wasmhost.Phase
		name string
	}{{wasmhost.PhaseRequest, "request"}, {wasmhost.PhaseResponseHeaders, "response_headers"}, {wasmhost.PhaseChunk, "chunk"}, {wasmhost.PhaseEnd, "end"}} {
		if ph&n.p != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// InflightRequests lists the requests in flight for the admin API: every
// replica's with Redis, else this one's.
func (s *Server) InflightRequests(ctx context.Context) ([]admin.InflightRequest, error) {
	reqs, err := s.cancels.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.InflightRequest, len(reqs))
	for i, r := range reqs {
		out[i] = admin.InflightRequest(r)
	}
	return out, nil
}
