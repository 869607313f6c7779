package conformance

import (
	"strings"
	"testing"
)

// A module that dispatches calls passes the suite: its http call gets a
// 200 with {}, its host services their results, and FAIL is a verdict
// every phase allows (the policy's on_error decides), not a problem.
func TestDispatchingPluginsConform(t *testing.T) {
	tests := []struct {
		name, dir, config string
		detail            map[string]string // a result's detail must hold this
	}{
		{"http classifier", "../plugintest/testdata/dispatchplugin", `{"url":"https://classifier.test/v1/classify"}`, nil},
		{"host services", "../wasmhost/testdata/testplugin",
			`{"request":["dispatch:ratelimit.admit=fail_open 1 0","pause"],"chunk":["dispatch:budget.extend=1 1","pause"],"call_response":"continue"}`, nil},
		{"FAIL", "../wasmhost/testdata/testplugin", `{"request":"fail","phases":["request"]}`,
			map[string]string{"phases.request": "failed by the plugin (FAIL)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Check(build(t, tt.dir), Options{Config: []byte(tt.config), Quick: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				if !r.OK || r.Skipped {
					t.Errorf("%s: not passed: %s", r.Name, r.Detail)
				}
				if want, ok := tt.detail[r.Name]; ok && !strings.Contains(r.Detail, want) {
					t.Errorf("%s: %q, want %q in it", r.Name, r.Detail, want)
				}
			}
		})
	}
}
