// Package wasmbuild builds Go plugin sources into .wasm modules with the
// standard toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared). It is
// what `tollgate plugin build` runs, and what tests use to build the
// plugins they load.
package wasmbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Build compiles the Go main package in dir into out. The go command comes
// from $GO, else PATH, else /usr/local/go/bin/go.
func Build(dir, out string) error {
	goBin := goCommand()
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", abs, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building plugin %s: %v\n%s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

var (
	mu     sync.Mutex
	builds = map[string]string{}
)

// Cached builds dir once per source content: the .wasm goes to the user
// cache dir under a name derived from a hash of every Go file the build
// compiles outside the standard library (found by `go list -deps` as a
// wasip1 build sees them, in whatever module dir belongs to) and of the
// go.mod files involved, so repeated test runs reuse it. It returns the
// .wasm path.
func Cached(dir string) (string, error) {
	mu.Lock()
	defer mu.Unlock()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if p, ok := builds[abs]; ok {
		return p, nil
	}
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	if err := hashSources(h, abs); err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	out := filepath.Join(base, "tollgate", "plugins", filepath.Base(abs)+"-"+hex.EncodeToString(h.Sum(nil))[:16]+".wasm")
	if _, err := os.Stat(out); err != nil {
		tmp := out + fmt.Sprintf(".%d.tmp", os.Getpid())
		if err := Build(abs, tmp); err != nil {
			return "", err
		}
		if err := os.Rename(tmp, out); err != nil {
			return "", err
		}
	}
	builds[abs] = out
	return out, nil
}

// hashSources writes to h the paths and contents of the files a wasip1
// build of the package in dir compiles, outside the standard library, and
// of the go.mod of each module they come from.
func hashSources(h io.Writer, dir string) error {
	cmd := exec.Command(goCommand(), "list", "-deps", "-f",
		"{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{with .Module}}\n{{.GoMod}}{{end}}{{end}}", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("listing the sources of plugin %s: %v\n%s", dir, err, strings.TrimSpace(stderr.String()))
	}
	seen := map[string]bool{}
	var files []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case len(fields) == 1 && strings.HasSuffix(fields[0], "go.mod"):
			if !seen[fields[0]] {
				seen[fields[0]] = true
				files = append(files, fields[0])
			}
		default:
			for _, f := range fields[1:] {
				files = append(files, filepath.Join(fields[0], f))
			}
		}
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return nil
}

// goCommand is $GO, else go from PATH, else /usr/local/go/bin/go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if g, err := exec.LookPath("go"); err == nil {
		return g
	}
	return "/usr/local/go/bin/go"
}
