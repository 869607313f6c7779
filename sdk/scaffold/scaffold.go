// Package scaffold writes the folder of a new plugin: the example guard
// "denyguard" (sdk/scaffold/templates), in Go or Rust, renamed. It is what
// `tollgate plugin new` runs. Both languages' templates pass the same
// cases, templates/plugin_test.json, which the new plugin keeps.
package scaffold

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	rustsdk "github.com/tollgate/tollgate/sdk/rust"
)

//go:embed templates
var templates embed.FS

// Langs are the languages Write has a template for.
var Langs = []string{"go", "rust"}

// Options tune Write. The zero value writes a plugin that fetches its SDK
// like any other module.
type Options struct {
	// GoSDK is the directory of the Go SDK module
	// (github.com/tollgate/tollgate/sdk) for a Go plugin's go.mod
	// `replace`, e.g. a checkout's sdk folder; "" writes no replace line.
	// A relative path is taken from the current directory. The plugin's
	// go.mod also requires what the SDK's does (as indirect), and the
	// SDK's go.sum becomes the plugin's, so that the plugin builds and its
	// tests run without `go mod tidy` or the network.
	GoSDK string
}

// token is the example's name in the templates, replaced by the new
// plugin's where it names the plugin.
const token = "denyguard"

// validName is what a plugin may be called: it becomes a Go module path,
// a Cargo package name and a file name.
var validName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// ErrNotEmpty is returned by Write when the target folder has files.
var ErrNotEmpty = errors.New("the folder is not empty")

// Write writes a new plugin called name, in lang (one of Langs), into
// dir, which must not exist or be empty. A Rust plugin gets the SDK crate
// vendored in dir/tollgate-sdk.
func Write(dir, name, lang string, o Options) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("plugin name %q: use 1 to 64 lower-case letters, digits, '-' and '_', starting with a letter", name)
	}
	var files map[string][]byte
	var err error
	switch lang {
	case "go":
		files, err = goFiles(name, o)
	case "rust":
		files, err = rustFiles(name)
	default:
		return fmt.Errorf("language %q: the templates are %s", lang, strings.Join(Langs, ", "))
	}
	if err != nil {
		return err
	}
	if err := checkEmpty(dir); err != nil {
		return err
	}
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("writing plugin %s: %w", name, err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("writing plugin %s: %w", name, err)
		}
	}
	return nil
}

// checkEmpty accepts a missing or empty folder.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("writing a plugin into %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("writing a plugin into %s: %w (it has %s%s); choose a new folder", dir, ErrNotEmpty, entries[0].Name(), more(len(entries)-1))
	}
	return nil
}

func more(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// goFiles is the Go template renamed, with go.mod from go.mod.tmpl.
func goFiles(name string, o Options) (map[string][]byte, error) {
	files, err := templateFiles("go", strings.NewReplacer(token, name))
	if err != nil {
		return nil, err
	}
	if o.GoSDK != "" {
		abs, err := filepath.Abs(o.GoSDK)
		if err != nil {
			return nil, fmt.Errorf("the Go SDK folder %s: %w", o.GoSDK, err)
		}
		mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("the Go SDK folder %s: %w", o.GoSDK, err)
		}
		if reqs := requires(mod); len(reqs) > 0 {
			files["go.mod"] = append(files["go.mod"], "\nrequire (\n"...)
			for _, r := range reqs {
				files["go.mod"] = append(files["go.mod"], "\t"+r+" // indirect\n"...)
			}
			files["go.mod"] = append(files["go.mod"], ")\n"...)
		}
		files["go.mod"] = append(files["go.mod"], "\nreplace github.com/tollgate/tollgate/sdk => "+quoteModPath(abs)+"\n"...)
		sum, err := os.ReadFile(filepath.Join(abs, "go.sum"))
		switch {
		case err == nil:
			files["go.sum"] = sum
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("the Go SDK's go.sum: %w", err)
		}
	}
	files[".gitignore"] = []byte("*.wasm\n")
	return files, nil
}

// requires returns the "PATH VERSION" of every requirement in a go.mod,
// from require lines and blocks (the SDK's go.mod is gofmt'd by the go
// command: one requirement per line).
func requires(goMod []byte) []string {
	var out []string
	block := false
	for _, line := range strings.Split(string(goMod), "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "require" && f[1] == "(":
			block = true
		case block && len(f) == 1 && f[0] == ")":
			block = false
		case block && len(f) == 2:
			out = append(out, f[0]+" "+f[1])
		case len(f) == 3 && f[0] == "require":
			out = append(out, f[1]+" "+f[2])
		}
	}
	return out
}

// quoteModPath quotes a go.mod path that needs it (go.mod's quoting is
// Go's).
func quoteModPath(p string) string {
	if strings.ContainsAny(p, " \t\"'`") {
		return strconv.Quote(p)
	}
	return p
}

// rustFiles is the Rust template renamed, with the SDK crate vendored.
// The Cargo package keeps the name as given; rustc's crate name has '_'
// for '-'.
func rustFiles(name string) (map[string][]byte, error) {
	crate := strings.ReplaceAll(name, "-", "_")
	files, err := templateFiles("rust", strings.NewReplacer("--crate-name "+token, "--crate-name "+crate, token, name))
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(rustsdk.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := rustsdk.Files.ReadFile(p)
		files[path.Join("tollgate-sdk", p)] = b
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("vendoring the Rust SDK: %w", err)
	}
	files[".gitignore"] = []byte("*.wasm\n/target/\n")
	return files, nil
}

// templateFiles reads templates/lang and the shared cases, with r applied
// to every file and ".tmpl" dropped from names.
func templateFiles(lang string, r *strings.Replacer) (map[string][]byte, error) {
	files := map[string][]byte{}
	root := path.Join("templates", lang)
	err := fs.WalkDir(templates, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := templates.ReadFile(p)
		rel := strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl")
		files[rel] = []byte(r.Replace(string(b)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the %s template: %w", lang, err)
	}
	cases, err := templates.ReadFile("templates/plugin_test.json")
	if err != nil {
		return nil, fmt.Errorf("reading the test cases: %w", err)
	}
	files["plugin_test.json"] = cases
	return files, nil
}
