package conformance

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate/tollgate/sdk/scaffold"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// TestExampleGuardConforms: the example guard that `tollgate plugin new`
// writes passes every check and every case of its plugin_test.json, in
// each language.
func TestExampleGuardConforms(t *testing.T) {
	sdkDir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range scaffold.Langs {
		t.Run(lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "denyguard")
			if err := scaffold.Write(dir, "denyguard", lang, scaffold.Options{GoSDK: sdkDir}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "denyguard.wasm")
			build := wasmbuild.Build
			if lang == "rust" {
				build = wasmbuild.BuildRust
			}
			if err := build(dir, out); err != nil {
				t.Fatal(err)
			}
			cases, err := os.ReadFile(filepath.Join(dir, "plugin_test.json"))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Check(out, Options{Config: pluginConfig(t, dir), Quick: testing.Short()})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Results {
				if !r.OK {
					t.Errorf("%s: not passed: %s", r.Name, r.Detail)
				}
			}
			results, err := RunCases(out, cases)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) < 10 {
				t.Errorf("%d cases ran, want the file's 10 or more", len(results))
			}
			for _, r := range results {
				if !r.OK {
					t.Errorf("case %s: %s (got %s)", r.Name, r.Problem, r.Got)
				}
			}
		})
	}
}
