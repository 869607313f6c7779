// Command warmplugins builds the Wasm plugins the end-to-end tests load
// into wasmbuild's cache (the user cache directory, one file per source
// content), and compiles them and the built-in plugins into the plugin
// runtime's default compilation cache, so that the tests find them built
// and compiled. make test runs it beside the package tests, on CPU they
// leave idle, instead of inside the end-to-end run, where each first build
// (2-70 s on a loaded 2-core machine) and each first compile under the
// race detector held up the serial tests. A plugin missing here is still
// built and compiled by the first test that needs it: this changes when
// the work is done, not what is tested.
//
//	go run ./gateway/e2e/testdata/warmplugins   (from the repository root)
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/builtin"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// dirs are the plugins the end-to-end tests build with wasmbuild.Cached,
// relative to the repository root.
var dirs = []string{
	"plugins/preflight",
	"plugins/ratelimit",
	"plugins/budget",
	"plugins/holdback",
	"plugins/moderation",
	"plugins/keywordguard",
	"plugins/holdback/testdata/usageprobe",
	"sdk/wasmhost/testdata/testplugin",
	"sdk/wasmhost/testdata/rewriteplugin",
	"gateway/e2e/testdata/faultplugin",
}

func main() {
	host, err := wasmhost.NewHost(wasmhost.DefaultCacheDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmplugins:", err)
		os.Exit(1)
	}
	defer host.Close()
	failed := false
	for _, d := range dirs {
		t0 := time.Now()
		p, err := wasmbuild.Cached(d)
		if err == nil {
			var bin []byte
			if bin, err = os.ReadFile(p); err == nil {
				compile(host, d, bin)
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "warmplugins: %s: %v\n", d, err)
			failed = true
			continue
		}
		fmt.Printf("warmplugins: %s (%v)\n", d, time.Since(t0).Round(time.Millisecond))
	}
	for _, name := range builtin.Names() {
		bin, err := builtin.Module(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "warmplugins: built-in %s: %v\n", name, err)
			failed = true
			continue
		}
		t0 := time.Now()
		compile(host, "built-in "+name, bin)
		fmt.Printf("warmplugins: built-in %s (%v)\n", name, time.Since(t0).Round(time.Millisecond))
	}
	if failed {
		os.Exit(1)
	}
}

// compile loads bin once through host, which compiles it into the cache.
// A load that fails after compiling (a plugin refusing the empty config)
// has still filled the cache; either way the tests load it themselves.
func compile(host *wasmhost.Host, name string, bin []byte) {
	pl, err := host.Load(context.Background(), wasmhost.Spec{Name: name, Module: bin, Instances: 1})
	if err != nil {
		if !strings.Contains(err.Error(), "configuration refused") {
			fmt.Printf("warmplugins: %s: %v\n", name, err)
		}
		return
	}
	pl.Close()
}
