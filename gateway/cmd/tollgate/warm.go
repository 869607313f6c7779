package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate/tollgate/gateway/internal/config"
	"github.com/tollgate/tollgate/gateway/internal/proxy"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

const warmUsage = `usage: tollgate plugin warm [-policy FILE] [-cache-dir DIR] [-seed DIR]

Compiles the policy's plugins (the embedded default's without -policy) into
the compilation cache a gateway serving that policy reads, and exits: run it
where the image is built, or as an init container, and the gateway starts
without compiling (docs/SCALING.md). The cache is valid only for the same
wazero version, OS, architecture and CPU features; a gateway that finds no
entry compiles as usual.
`

// pluginWarm runs `tollgate plugin warm`.
func pluginWarm(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugin warm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, warmUsage); fs.PrintDefaults() }
	policyPath := fs.String("policy", "", "policy file (default: the embedded default policy)")
	cacheDir := fs.String("cache-dir", "", "compilation cache (default: the policy's plugin_runtime.cache_dir, else the user cache dir's tollgate/wazero)")
	seed := fs.String("seed", "", "first copy the entries of this cache (e.g. one made at image build) that the cache lacks")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	var (
		p   *config.Policy
		err error
	)
	if *policyPath == "" {
		// Keys that are never printed: only the plugins matter here.
		var d demoKeys
		if d, err = newDemoKeys(); err == nil {
			p, err = loadEmbedded(d)
		}
	} else {
		p, err = config.Load(*policyPath)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate plugin warm: policy %s:\n  %v\n", *policyPath, err)
		return 1
	}
	dir := *cacheDir
	if dir == "" {
		dir = p.PluginRuntime.CacheDir
	}
	if err := warm(p, dir, *seed, stdout); err != nil {
		fmt.Fprintf(stderr, "tollgate plugin warm: %v\n", err)
		return 1
	}
	return 0
}

// warm seeds the cache in dir from seed (if set), then compiles every
// plugin of p through it, reporting each.
func warm(p *config.Policy, dir, seed string, w io.Writer) error {
	if dir == "" {
		dir = wasmhost.DefaultCacheDir()
	}
	if seed != "" {
		n, err := copyMissing(seed, dir)
		if err != nil {
			return fmt.Errorf("seeding %s from %s: %w", dir, seed, err)
		}
		fmt.Fprintf(w, "seeded %s with %d entries from %s\n", dir, n, seed)
	}
	specs, err := proxy.PluginSpecs(p)
	if err != nil {
		return err
	}
	host, err := wasmhost.NewHost(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer host.Close()
	start := time.Now()
	for _, spec := range specs {
		before := countFiles(dir)
		t := time.Now()
		spec.Instances = 1
		pl, err := host.Load(context.Background(), spec)
		if err != nil {
			return err
		}
		pl.Close()
		how := "compiled"
		if countFiles(dir) == before {
			how = "already cached"
		}
		fmt.Fprintf(w, "%s: %s in %s\n", spec.Name, how, time.Since(t).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "warmed %d plugin(s) into %s in %s\n", len(specs), dir, time.Since(start).Round(time.Millisecond))
	return nil
}

// copyMissing copies the regular files under src that dst lacks into dst,
// at the same relative paths, and returns how many it copied. Each file is
// written under a temporary name and renamed, so a gateway reading dst
// never sees half an entry.
func copyMissing(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if _, err := os.Stat(to); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		tmp := to + ".seed.tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, to); err != nil {
			return err
		}
		n++
		return nil
	})
	return n, err
}

// countFiles counts the regular files under dir (0 when it cannot be read).
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}
