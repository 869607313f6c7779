package sdk_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk"
)

// TestSourceHasWhatPluginsUse checks that sdk.Source holds every file of
// this module that a plugin's build (wasip1) and its tests (plugintest, on
// the host) compile, and the module's go.mod and go.sum: a plugin whose
// go.mod replaces the SDK with an unpacked Source must build and test.
func TestSourceHasWhatPluginsUse(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	builds := []struct {
		env  []string
		pkgs []string
	}{
		{[]string{"GOOS=wasip1", "GOARCH=wasm"}, []string{"."}},
		{nil, []string{"./plugintest"}},
	}
	want := map[string]bool{"go.mod": true, "go.sum": true}
	for _, b := range builds {
		cmd := exec.Command("go", append([]string{"list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}{{range .EmbedFiles}}{{"\t"}}{{.}}{{end}}{{end}}`}, b.pkgs...)...)
		cmd.Env = append(os.Environ(), b.env...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Split(line, "\t")
			rel, err := filepath.Rel(root, f[0])
			if f[0] == "" || err != nil || strings.HasPrefix(rel, "..") {
				continue // another module's package
			}
			for _, name := range f[1:] {
				if p := path.Join(filepath.ToSlash(rel), name); !strings.Contains(p, "/testdata/") {
					want[p] = true
				}
			}
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d files listed: %v", len(want), want)
	}
	for p := range want {
		if _, err := fs.Stat(sdk.Source, p); err != nil {
			t.Errorf("sdk.Source lacks %s (add its folder to the go:embed line in source.go)", p)
		}
	}
}
