package config

import (
	"testing"
	"time"
)

func TestBudgetLeaseWarnings(t *testing.T) {
	tests := []struct {
		name    string
		plugins []Plugin
		total   time.Duration
		want    int
	}{
		{"default lease above the default total", []Plugin{{Name: "b", Builtin: "budget"}}, DefaultTotalTimeout, 0},
		{"default lease under a long total", []Plugin{{Name: "b", Builtin: "budget"}}, time.Hour, 1},
		{"short lease", []Plugin{{Name: "b", Builtin: "budget", Config: map[string]any{"lease": "3s"}}}, DefaultTotalTimeout, 1},
		{"equal is not above", []Plugin{{Name: "b", Path: "../bin/plugins/budget.wasm", Config: map[string]any{"lease": "10m"}}}, 10 * time.Minute, 1},
		{"long lease", []Plugin{{Name: "b", Builtin: "budget", Config: map[string]any{"lease": "1h"}}}, 30 * time.Minute, 0},
		{"other plugins", []Plugin{{Name: "p", Builtin: "preflight"}, {Name: "g", Path: "guard.wasm", Config: map[string]any{"lease": "1s"}}}, time.Hour, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Policy{Plugins: tt.plugins, Upstreams: []Upstream{{Timeouts: Timeouts{Total: time.Minute}}, {Timeouts: Timeouts{Total: tt.total}}}}
			if got := p.BudgetLeaseWarnings(); len(got) != tt.want {
				t.Fatalf("warnings %q, want %d", got, tt.want)
			}
		})
	}
}
