package config

import (
	"strings"
	"testing"
	"time"
)

// A drain shorter than the longest upstream total timeout is warned of,
// naming that upstream; one as long is not.
func TestDrainWarnings(t *testing.T) {
	const two = `
version: 1
server: {drain_timeout: %s}
upstreams:
  - {name: short, base_url: 'http://127.0.0.1:9/v1', timeouts: {total: 2m}}
  - {name: long, base_url: 'http://127.0.0.1:9/v1', timeouts: {total: %s}}
routes: [{models: [m], upstream: short}]
`
	tests := []struct {
		drain, total string
		longest      time.Duration
		want         string // "" for no warning
	}{
		{"30s", "10m", 10 * time.Minute, `server.drain_timeout 30s is shorter than upstream "long"'s timeouts.total 10m0s`},
		{"9m59s", "10m", 10 * time.Minute, `server.drain_timeout 9m59s is shorter than upstream "long"'s timeouts.total 10m0s`},
		{"10m", "10m", 10 * time.Minute, ""},
		{"3m", "1m", 2 * time.Minute, ""}, // the first upstream is the longest
	}
	for _, tt := range tests {
		t.Run(tt.drain+" vs "+tt.total, func(t *testing.T) {
			p, err := Parse([]byte(strings.NewReplacer("%s", tt.drain).Replace(strings.Replace(two, "total: %s", "total: "+tt.total, 1))), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := p.LongestStream(); got != tt.longest {
				t.Errorf("longest stream %v, want %v", got, tt.longest)
			}
			ws := p.DrainWarnings()
			switch {
			case tt.want == "" && len(ws) != 0:
				t.Errorf("warnings %q, want none", ws)
			case tt.want != "" && (len(ws) != 1 || !strings.HasPrefix(ws[0], tt.want)):
				t.Errorf("warnings %q, want one starting %q", ws, tt.want)
			}
		})
	}
}
