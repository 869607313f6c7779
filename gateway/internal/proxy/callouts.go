package proxy

import (
	"fmt"

	"github.com/tollgate/tollgate/gateway/internal/callout"
	"github.com/tollgate/tollgate/gateway/internal/config"
)

// newCallouts builds the `http` service of a policy state from its
// plugins' callout grants. Without any, it refuses (and counts) every
// call-out.
func (s *Server) newCallouts(p *config.Policy) (*callout.Service, error) {
	grants := map[string]*callout.Grant{}
	for i := range p.Plugins {
		pl := &p.Plugins[i]
		c := pl.Callout
		if c == nil {
			continue
		}
		g, err := callout.NewGrant(callout.GrantSpec{Allow: c.Allow, Timeout: c.Timeout, MaxResponseBytes: int64(c.MaxResponseBytes),
			MaxInFlight: c.MaxInFlight, HeadersEnv: c.HeadersEnv}, c.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("plugins[%d] (%s): %w", i, pl.Name, err)
		}
		grants[pl.Name] = g
	}
	return callout.New(callout.Config{Grants: grants, Metrics: s.callouts, Log: s.log.With("component", "callout")})
}
