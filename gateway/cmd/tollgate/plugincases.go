package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tollgate/tollgate/sdk/conformance"
)

// runCaseFile runs DIR/plugin_test.json against the module at wasmPath and
// prints one line per case. found is false when there is no such file.
func runCaseFile(p pluginDir, wasmPath string, stdout, stderr io.Writer) (code int, found bool) {
	path := filepath.Join(p.dir, "plugin_test.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin test: %v\n", err)
		return 1, true
	}
	results, err := conformance.RunCases(wasmPath, b)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin test: %s: %v\nfix the file (its format is in docs/PLUGINS.md, \"Test cases in any language\"), then run `tollgate plugin test %s` again\n", path, err, p.dir)
		return 1, true
	}
	failed := 0
	for _, r := range results {
		if r.OK {
			fmt.Fprintf(stdout, "ok    %s\n", r.Name)
			continue
		}
		failed++
		fmt.Fprintf(stdout, "FAIL  %s: %s (got %s)\n", r.Name, r.Problem, r.Got)
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "tollgate plugin test: %d of %d cases in %s failed: fix the plugin (or the case), then run `tollgate plugin test %s` again\n", failed, len(results), path, p.dir)
		return 1, true
	}
	fmt.Fprintf(stdout, "%s: %d cases passed\n", path, len(results))
	return 0, true
}
