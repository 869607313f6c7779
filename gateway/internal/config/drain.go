package config

import (
	"fmt"
	"time"
)

// LongestStream is the longest any request may last upstream: the largest
// upstreams[].timeouts.total. Call it on a validated policy.
func (p *Policy) LongestStream() (longest time.Duration, upstream string) {
	for _, u := range p.Upstreams {
		if u.Timeouts.Total > longest {
			longest, upstream = u.Timeouts.Total, u.Name
		}
	}
	return longest, upstream
}

// DrainWarnings returns a warning when server.drain_timeout is shorter
// than the longest stream the upstreams' timeouts.total allow: on SIGTERM
// a stream still open when the drain ends is cut (its client gets a final
// shutting_down event), so a rolling deploy can cut long streams
// (deploy/README.md, "Shutdown"). It is a warning, not a problem: a
// short drain may be meant. Call it on a validated policy.
func (p *Policy) DrainWarnings() []string {
	longest, name := p.LongestStream()
	if p.Server.DrainTimeout >= longest {
		return nil
	}
	return []string{fmt.Sprintf("server.drain_timeout %v is shorter than upstream %q's timeouts.total %v: a stream still open %v after SIGTERM is cut; raise drain_timeout (and the orchestrator's grace period) to keep every stream",
		p.Server.DrainTimeout, name, longest, p.Server.DrainTimeout)}
}
