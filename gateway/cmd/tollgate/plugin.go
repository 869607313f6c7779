package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

const pluginUsage = `usage:
  tollgate plugin build DIR [-o FILE]   build the Go plugin in DIR into FILE (default DIR/<name>.wasm)
  tollgate plugin test DIR [go test flags]   build it, then run its tests against the built module
  tollgate plugin warm [-policy FILE] [-cache-dir DIR] [-seed DIR]   compile a policy's plugins into the compilation cache
  tollgate plugin check [-config JSON|@FILE] [-json] FILE.wasm...   run the conformance suite against built modules (any language)
`

// plugin runs `tollgate plugin build|test|warm`.
func plugin(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "warm" {
		return pluginWarm(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "check" {
		return pluginCheck(args[1:], stdout, stderr)
	}
	if len(args) < 2 || (args[0] != "build" && args[0] != "test") {
		fmt.Fprint(stderr, pluginUsage)
		return 2
	}
	cmd, dir := args[0], args[1]
	fs := flag.NewFlagSet("plugin "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output .wasm file (default DIR/<dir name>.wasm)")
	rest := args[2:]
	if cmd == "build" {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin: %v\n", err)
		return 1
	}
	if *out == "" {
		*out = filepath.Join(abs, filepath.Base(abs)+".wasm")
	}
	if err := wasmbuild.Build(abs, *out); err != nil {
		fmt.Fprintf(stderr, "tollgate plugin: %v\n", err)
		return 1
	}
	if st, err := os.Stat(*out); err == nil {
		fmt.Fprintf(stdout, "built %s (%d KiB)\n", *out, st.Size()>>10)
	}
	if cmd == "build" {
		return 0
	}
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	test := exec.Command(goBin, append([]string{"test"}, append(rest, ".")...)...)
	test.Dir = abs
	test.Env = append(os.Environ(), "TOLLGATE_PLUGIN_WASM="+*out)
	test.Stdout, test.Stderr = stdout, stderr
	if err := test.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintf(stderr, "tollgate plugin test: %v\n", err)
		return 1
	}
	return 0
}
