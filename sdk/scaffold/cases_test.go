package scaffold_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/sdk/conformance"
	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/scaffold"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// buildDir holds the templates built by the tests, once per language.
var buildDir string

func TestMain(m *testing.M) {
	var err error
	if buildDir, err = os.MkdirTemp("", "scaffold-test-"); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(buildDir)
	os.Exit(code)
}

var builds struct {
	mu   sync.Mutex
	wasm map[string]string // lang → module
	dir  map[string]string // lang → the written plugin
}

// buildTemplate writes the lang template as "my-guard", the Go one with
// its SDK replaced by this checkout's, builds it as `tollgate plugin
// build` does, and returns the plugin's folder and module.
func buildTemplate(t *testing.T, lang string) (dir, wasm string) {
	t.Helper()
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if w, ok := builds.wasm[lang]; ok {
		return builds.dir[lang], w
	}
	sdkDir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(buildDir, lang, "my-guard")
	if err := scaffold.Write(dir, "my-guard", lang, scaffold.Options{GoSDK: sdkDir}); err != nil {
		t.Fatal(err)
	}
	wasm = filepath.Join(buildDir, lang, "my-guard.wasm")
	build := wasmbuild.Build
	if lang == "rust" {
		build = wasmbuild.BuildRust
	}
	if err := build(dir, wasm); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(wasm)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", lang, st.Size())
	if builds.wasm == nil {
		builds.wasm, builds.dir = map[string]string{}, map[string]string{}
	}
	builds.wasm[lang], builds.dir[lang] = wasm, dir
	return dir, wasm
}

// TestTemplatesPassTheCases runs every case of the written plugin's
// plugin_test.json against the example guard in each language — the same
// cases, the same expectations — and the conformance suite.
func TestTemplatesPassTheCases(t *testing.T) {
	for _, lang := range scaffold.Langs {
		t.Run(lang, func(t *testing.T) {
			dir, wasm := buildTemplate(t, lang)
			cases, err := os.ReadFile(filepath.Join(dir, "plugin_test.json"))
			if err != nil {
				t.Fatal(err)
			}
			results, err := conformance.RunCases(wasm, cases)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) < 14 {
				t.Errorf("%d cases ran, want the file's 14", len(results))
			}
			for _, r := range results {
				if !r.OK {
					t.Errorf("case %s: %s (got %s)", r.Name, r.Problem, r.Got)
				}
			}
			rep, err := conformance.Check(wasm, conformance.Options{Config: []byte(`{"deny": ["secret", "p@ssw0rd"]}`), Quick: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				if !r.OK {
					t.Errorf("conformance %s: not passed: %s", r.Name, r.Detail)
				}
			}
		})
	}
}

// TestTemplatesRefuseBadConfigs checks that both languages refuse the same
// configs, each with a message naming the plugin and the problem.
func TestTemplatesRefuseBadConfigs(t *testing.T) {
	tests := []struct{ config, want string }{
		{`{"deny": `, "not JSON"},
		{`{"deny": ["a"]} x`, "not JSON"},
		{`["secret"]`, "not an object"},
		{`{}`, `"deny" is missing`},
		{`{"deny": []}`, `"deny" is empty`},
		{`{"deny": "secret"}`, "not an array"},
		{`{"deny": [""]}`, "deny[0] is 0 bytes long"},
		{`{"deny": ["a", 1]}`, "not a string"},
		{`{"deny": ["` + strings.Repeat("x", 257) + `"]}`, "deny[0] is 257 bytes long"},
		{`{"deny": ["a"], "replacement": 1}`, "not a string"},
		{`{"deny": ["a"], "mode": 1}`, `unknown config field "mode"`},
	}
	for _, lang := range scaffold.Langs {
		t.Run(lang, func(t *testing.T) {
			_, wasm := buildTemplate(t, lang)
			for _, tt := range tests {
				_, err := plugintest.LoadErr(t, wasm, tt.config)
				if err == nil || !strings.Contains(err.Error(), "my-guard: ") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("config %.40s: error %v, want one containing %q", tt.config, err, tt.want)
				}
			}
		})
	}
}
