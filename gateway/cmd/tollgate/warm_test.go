package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// plugin warm compiles a policy's plugins into the cache once; a second run
// and a run seeded from that cache find them there.
func TestPluginWarm(t *testing.T) {
	dir := t.TempDir()
	pf := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(pf, []byte(`
version: 1
upstreams: [{name: a, base_url: "http://127.0.0.1:9/v1"}]
routes: [{models: [m], upstream: a}]
plugin_runtime: {cache_dir: `+filepath.Join(dir, "policy-cache")+`}
plugins:
  - {name: guard, builtin: holdback, config: {markers: [example.invalid]}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string // regexps, each matched against stdout
	}{
		{"cold into the policy's cache_dir", []string{"-policy", pf},
			[]string{`(?m)^guard: compiled in \S+$`, `warmed 1 plugin\(s\) into ` + regexp.QuoteMeta(filepath.Join(dir, "policy-cache"))}},
		{"warm", []string{"-policy", pf},
			[]string{`(?m)^guard: already cached in \S+$`}},
		{"seeded into another cache", []string{"-policy", pf, "-cache-dir", filepath.Join(dir, "other"), "-seed", filepath.Join(dir, "policy-cache")},
			[]string{`(?m)^seeded \S+other with 1 entries from \S+policy-cache$`, `(?m)^guard: already cached in \S+$`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(append([]string{"plugin", "warm"}, tt.args...), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			for _, w := range tt.want {
				if !regexp.MustCompile(w).MatchString(out.String()) {
					t.Errorf("stdout lacks %s:\n%s", w, out.String())
				}
			}
		})
	}
	var out, errb bytes.Buffer
	if code := run([]string{"plugin", "warm", "-policy", filepath.Join(dir, "none.yaml")}, &out, &errb); code != 1 {
		t.Errorf("missing policy: exit %d, want 1", code)
	}
	if code := run([]string{"plugin", "warm", "extra"}, &out, &errb); code != 2 {
		t.Errorf("extra argument: exit %d, want 2", code)
	}
}
