// Package wasmbuild builds Go plugin sources into .wasm modules with the
// standard toolchain (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared). It is
// what `tollgate plugin build` runs, and what tests use to build the
// plugins they load.
package wasmbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// goCommand is the go command: $GO, else go on PATH, else
// /usr/local/go/bin/go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if g, err := exec.LookPath("go"); err == nil {
		return g
	}
	return "/usr/local/go/bin/go"
}

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
// cache dir under a name derived from SourceHash, so repeated test runs
// reuse it. It returns the .wasm path.
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
	sum, err := SourceHash(abs)
	if err != nil {
		return "", err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	out := filepath.Join(base, "tollgate", "plugins", filepath.Base(abs)+"-"+sum[:16]+".wasm")
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

// listTemplate prints, for each non-standard package the plugin's build
// depends on, its directory and source files, then "=" and the go.mod,
// path@version and directory of its module.
const listTemplate = `{{if not .Standard}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}{{range .EmbedFiles}}{{"\t"}}{{.}}{{end}}
{{with .Module}}={{.GoMod}}{{"\t"}}{{.Path}}@{{.Version}}{{"\t"}}{{.Dir}}{{end}}{{end}}`

// SourceHash returns a hex SHA-256 of everything the wasm build of the
// main package in dir depends on, as the go command resolves it from dir's
// own module (replace directives and workspaces included): the go
// version and build settings, every file of every non-standard package in
// the build, and the go.mod and go.sum of their modules. Files that are
// not in the build (tests, other packages of the module) do not count.
//
// A file in a module is named by the module's path@version and its path
// in the module, as the -trimpath build names it, not by where the module
// is: two checkouts of the same sources hash alike, and a plugin built in
// one clone or worktree is not built again in another.
func SourceHash(dir string) (string, error) {
	env := append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	settings, err := goOutput(dir, env, "env", "GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOWASM", "GOWORK")
	if err != nil {
		return "", err
	}
	list, err := goOutput(dir, env, "list", "-deps", "-f", listTemplate, ".")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(settings)
	files := map[string]bool{}
	modules := map[string]string{} // module directory → path@version
	for _, line := range strings.Split(string(list), "\n") {
		fields := strings.Split(line, "\t")
		switch {
		case fields[0] == "":
		case strings.HasPrefix(fields[0], "="): // a module: go.mod, path@version, directory
			gomod := fields[0][1:]
			files[gomod] = true
			files[filepath.Join(filepath.Dir(gomod), "go.sum")] = true
			if len(fields) == 3 && fields[2] != "" {
				modules[fields[2]] = fields[1]
			}
		default:
			for _, f := range fields[1:] {
				files[filepath.Join(fields[0], f)] = true
			}
		}
	}
	if err := hashFiles(h, files, func(f string) string { return moduleKey(modules, f) }); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moduleKey names file f by the innermost of modules (directory →
// path@version) holding it and its slash path there; a file in none (a
// go.mod in the module cache) by its own path.
func moduleKey(modules map[string]string, f string) string {
	best := ""
	for d := range modules {
		if strings.HasPrefix(f, d+string(filepath.Separator)) && len(d) > len(best) {
			best = d
		}
	}
	if best == "" {
		return f
	}
	return modules[best] + "/" + filepath.ToSlash(f[len(best)+1:])
}

// goOutput runs the go command in dir and returns its standard output; an
// error carries its standard error.
func goOutput(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s in %s: %v\n%s", args[0], dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// hashFiles writes the names (key of each path), sizes and contents of
// files to h, in path order; a file that does not exist counts as such (a
// module without a go.sum).
func hashFiles(h io.Writer, files map[string]bool, key func(string) string) error {
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(h, "%s\x00absent\x00", key(f))
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", key(f), len(b))
		h.Write(b)
	}
	return nil
}
