package conformance

import (
	"strings"
	"testing"
)

// TestBadGuestsFailTheirCheck: each purpose-built bad guest fails exactly
// the check it breaks, and passes (or skips) every other; the good guard
// fails none.
func TestBadGuestsFailTheirCheck(t *testing.T) {
	tests := []struct {
		dir    string
		config string
		fails  string
	}{
		{"goodguard", `{"word": "secret"}`, ""},
		{"globalstate", `{"deny": ["secret"]}`, "state.instances,state.interleaved"},
		{"holdrequest", `{}`, "phases.request"},
		{"longtrap", `{}`, "phases.chunk"},
		{"spin", `{}`, "limits.deadline"},
		{"leak", `{}`, "limits.growth"},
		{"badphases", `{}`, "exports"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			rep, err := Check(build(t, "testdata/"+tt.dir), Options{Config: []byte(tt.config), Quick: true})
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, r := range rep.Results {
				t.Logf("%-24s ok=%v skipped=%v %s", r.Name, r.OK, r.Skipped, r.Detail)
				if r.Failed() {
					failed = append(failed, r.Name)
				}
			}
			if got := strings.Join(failed, ","); got != tt.fails {
				t.Errorf("failed checks %q, want %q", got, tt.fails)
			}
		})
	}
}
