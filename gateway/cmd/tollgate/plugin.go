package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

const pluginUsage = `usage:
  tollgate plugin new NAME [-lang go|rust] [-dir DIR] [-sdk DIR]   write a new plugin (a guard to start from) into DIR (default ./NAME)
  tollgate plugin build DIR [-o FILE]   build the plugin in DIR (Go or Rust) into FILE (default DIR/<dir name>.wasm)
  tollgate plugin test DIR [go test flags]   build it, run its Go tests against the built module, then the cases in DIR/plugin_test.json
  tollgate plugin warm [-policy FILE] [-cache-dir DIR] [-seed DIR]   compile a policy's plugins into the compilation cache
  tollgate plugin check [-config JSON|@FILE] [-json] FILE.wasm...   run the conformance suite against built modules (any language)
`

// plugin runs `tollgate plugin new|build|test|warm|check`.
func plugin(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pluginUsage)
		return 2
	}
	switch args[0] {
	case "new":
		return pluginNew(args[1:], stdout, stderr)
	case "build":
		return pluginBuild(args[1:], stdout, stderr)
	case "test":
		return pluginTest(args[1:], stdout, stderr)
	case "warm":
		return pluginWarm(args[1:], stdout, stderr)
	case "check":
		return pluginCheck(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, pluginUsage)
		return 0
	}
	fmt.Fprintf(stderr, "tollgate plugin: unknown command %q\n\n%s", args[0], pluginUsage)
	return 2
}

// Plugin languages, told apart by the files of a plugin folder.
const (
	langGo   = "go"
	langRust = "rust"
)

// pluginDir is a plugin folder given on the command line.
type pluginDir struct {
	dir  string // absolute
	lang string
}

// openPluginDir finds the plugin in dir: Rust with a Cargo.toml, Go with
// Go files (its module's go.mod may be in a folder above).
func openPluginDir(dir string) (pluginDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return pluginDir{}, err
	}
	st, err := os.Stat(abs)
	if err != nil || !st.IsDir() {
		return pluginDir{}, fmt.Errorf("%s is not a folder: give the plugin's folder (`tollgate plugin new NAME` makes one)", dir)
	}
	if _, err := os.Stat(filepath.Join(abs, "Cargo.toml")); err == nil {
		return pluginDir{abs, langRust}, nil
	}
	if gofiles, _ := filepath.Glob(filepath.Join(abs, "*.go")); len(gofiles) > 0 {
		if !hasGoMod(abs) {
			return pluginDir{}, fmt.Errorf("%s has Go files but no go.mod in it or above: a Go plugin is a module; run `go mod init NAME` there (then `go get github.com/tollgate/tollgate/sdk`), or start from `tollgate plugin new NAME`", dir)
		}
		return pluginDir{abs, langGo}, nil
	}
	return pluginDir{}, fmt.Errorf("%s is not a plugin folder: it has no Cargo.toml (Rust) and no .go files (Go); `tollgate plugin new NAME` makes one", dir)
}

// hasGoMod reports whether dir or a folder above it has a go.mod.
func hasGoMod(dir string) bool {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return true
		}
		if filepath.Dir(d) == d {
			return false
		}
	}
}

// defaultOut is where a plugin is built without -o: DIR/<dir name>.wasm.
func (p pluginDir) defaultOut() string {
	return filepath.Join(p.dir, filepath.Base(p.dir)+".wasm")
}

// build compiles the plugin into out, with an error that says what to do
// (again: the command to run after a fix, "build DIR" or "test DIR").
func (p pluginDir) build(out, again string) error {
	if p.lang == langRust {
		if err := wasmbuild.BuildRust(p.dir, out); err != nil {
			return fmt.Errorf("%w\nfix what is above, then run `tollgate plugin %s` again", err, again)
		}
		return nil
	}
	if _, err := exec.LookPath(goCommand()); err != nil {
		return fmt.Errorf("the go command is not installed (or not on PATH; $GO names another): install Go 1.25 or later from https://go.dev/dl/, then run this again")
	}
	if err := wasmbuild.Build(p.dir, out); err != nil {
		return fmt.Errorf("%w\nfix the errors above, then run `tollgate plugin %s` again", err, again)
	}
	return nil
}

// goCommand is the go command wasmbuild runs: $GO, else go.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// splitDirArg takes the plugin folder (or name) out of args: the first
// argument that is neither a flag nor the value of one of valueFlags (the
// flags that take a value, written "-f value"), so that flags may come
// before or after it.
func splitDirArg(args []string, valueFlags ...string) (dir string, rest []string, ok bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && slices.Contains(valueFlags, name) {
				i++
			}
			continue
		}
		return a, append(append([]string(nil), args[:i]...), args[i+1:]...), true
	}
	return "", args, false
}

func pluginBuild(args []string, stdout, stderr io.Writer) int {
	dir, rest, ok := splitDirArg(args, "o")
	fs := flag.NewFlagSet("plugin build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output .wasm file (default DIR/<dir name>.wasm)")
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if !ok || fs.NArg() > 0 {
		fmt.Fprint(stderr, "usage: tollgate plugin build DIR [-o FILE]\n")
		return 2
	}
	p, err := openPluginDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin build: %v\n", err)
		return 1
	}
	if *out == "" {
		*out = p.defaultOut()
	}
	if err := p.build(*out, "build "+dir); err != nil {
		fmt.Fprintf(stderr, "tollgate plugin build: %v\n", err)
		return 1
	}
	reportBuilt(stdout, *out)
	return 0
}

func reportBuilt(stdout io.Writer, out string) {
	if st, err := os.Stat(out); err == nil {
		fmt.Fprintf(stdout, "built %s (%d KiB)\n", out, st.Size()>>10)
	}
}

// pluginTest builds the plugin, runs a Go plugin's tests with
// TOLLGATE_PLUGIN_WASM set to the built module, then DIR/plugin_test.json.
func pluginTest(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprint(stderr, "usage: tollgate plugin test DIR [go test flags]\n")
		return 2
	}
	dir, goTestFlags := args[0], args[1:]
	p, err := openPluginDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin test: %v\n", err)
		return 1
	}
	out := p.defaultOut()
	if err := p.build(out, "test "+dir); err != nil {
		fmt.Fprintf(stderr, "tollgate plugin test: %v\n", err)
		return 1
	}
	reportBuilt(stdout, out)
	ran := false
	if p.lang == langGo {
		test := exec.Command(goCommand(), append(append([]string{"test"}, goTestFlags...), ".")...)
		test.Dir = p.dir
		test.Env = append(os.Environ(), "TOLLGATE_PLUGIN_WASM="+out)
		test.Stdout, test.Stderr = stdout, stderr
		if err := test.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				fmt.Fprintf(stderr, "tollgate plugin test: the Go tests failed (output above): fix the plugin or the test, then run `tollgate plugin test %s` again\n", dir)
				return 1
			}
			fmt.Fprintf(stderr, "tollgate plugin test: running go test: %v\n", err)
			return 1
		}
		ran = true
	}
	code, found := runCaseFile(p, out, stdout, stderr)
	if !found && !ran {
		fmt.Fprintf(stderr, "tollgate plugin test: %s has no plugin_test.json, so there is nothing to test: write cases there (see the plugin_test.json `tollgate plugin new` writes)\n", dir)
		return 1
	}
	return code
}
