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
	"io/fs"
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
	goBin := os.Getenv("GO")
	if goBin == "" {
		var err error
		if goBin, err = exec.LookPath("go"); err != nil {
			goBin = "/usr/local/go/bin/go"
		}
	}
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
// cache dir under a name derived from a hash of dir's files and of the
// sdk's, so repeated test runs reuse it. It returns the .wasm path.
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
	for _, d := range []string{abs, filepath.Join(moduleRoot(abs), "sdk")} {
		if err := hashTree(h, d); err != nil {
			return "", err
		}
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

func hashTree(h interface{ Write([]byte) (int, error) }, dir string) error {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" && p != dir) {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".go") || d.Name() == "go.mod") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
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

// moduleRoot finds the directory of the go.mod above dir.
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
