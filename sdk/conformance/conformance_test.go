package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// exampleConfigs are the repository's plugins' configs from the example
// policies (policies/*.yaml); a plugin folder with a plugin_test.json uses
// its config instead.
var exampleConfigs = map[string]string{
	"budget":       `{"default_max_tokens": 64}`,
	"ratelimit":    `{"default_max_tokens": 512, "models": [{"match": "mock-2", "rpm": 10}]}`,
	"preflight":    `{"max_messages": 256}`,
	"holdback":     `{"markers": ["oaidalleapiprodscus.blob.core.windows.net", "files.oaiusercontent.com"], "case_insensitive": true}`,
	"pii":          `{"mode": "mask-and-restore"}`,
	"cache":        `{"ttl": "10m", "scope": "shared:demo", "when": "deterministic", "coalesce": true}`,
	"keywordguard": `{"deny": ["(?i)ignore (all )?previous instructions", "(?i)\\bssn\\b"], "message": "This request was blocked by the gateway's content policy.", "status": 400, "header": {"name": "X-Keyword-Guard", "value": "checked"}}`,
}

func pluginConfig(t *testing.T, dir string) []byte {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "plugin_test.json")); err == nil {
		var f struct {
			Config json.RawMessage `json:"config"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s/plugin_test.json: %v", dir, err)
		}
		if len(f.Config) > 0 {
			return f.Config
		}
	}
	cfg, ok := exampleConfigs[filepath.Base(dir)]
	if !ok {
		t.Fatalf("no example config for plugin %s: add one to exampleConfigs or a plugin_test.json", dir)
	}
	return []byte(cfg)
}

func build(t *testing.T, dir string) string {
	t.Helper()
	p, err := wasmbuild.Cached(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPluginsConform: every plugin of the repository passes every check
// with its example config.
func TestPluginsConform(t *testing.T) {
	dirs, err := filepath.Glob("../../plugins/*/main.go")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no plugins found: %v", err)
	}
	for _, m := range dirs {
		dir := filepath.Dir(m)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			rep, err := Check(build(t, dir), Options{Config: pluginConfig(t, dir), Quick: testing.Short()})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				t.Logf("%-24s ok=%v skipped=%v %s", r.Name, r.OK, r.Skipped, r.Detail)
				if !r.OK {
					t.Errorf("%s: not passed: %s", r.Name, r.Detail)
				}
			}
			t.Logf("measurements: %+v", rep.Measurements)
		})
	}
}
