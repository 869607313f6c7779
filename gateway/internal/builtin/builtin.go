// Package builtin owns the plugins that ship inside the tollgate binary:
// preflight, ratelimit, budget, holdback, pii and moderation, built from plugins/ into
// WebAssembly modules that are committed under modules/ (gzip-compressed)
// and embedded, so a plain `go build` or `go install` of the gateway has
// them and nothing needs building first.
//
// modules/manifest.json records, for each module, a hash of the sources it
// was built from (the Go files of every package it compiles: the plugin
// and the SDK packages it imports); TestModulesMatchSources
// fails when a source changed without the module being rebuilt. Rebuild
// with `make plugins`, or:
//
//	go generate ./gateway/internal/builtin
//
// Why the modules are committed rather than built: docs/adr/0008-built-in-plugins-committed.md.
package builtin

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

//go:generate go test -count=1 -run TestModulesMatchSources . -update

//go:embed modules/*.wasm.gz modules/manifest.json
var modules embed.FS

// names are the built-in plugins, the first four in the order a policy
// usually runs them: preflight first (it resolves the key the others
// read), holdback last. pii goes where the policy wants its rewrite seen
// (policies/pii.yaml: before budget, whose hold then prices the masked
// prompt); moderation after holdback (its reply check sees the reply as
// holdback left it).
var names = []string{"preflight", "ratelimit", "budget", "holdback", "pii", "moderation", "cache"}

// ErrUnknown is returned for a name that is not a built-in plugin.
var ErrUnknown = errors.New("unknown built-in plugin")

// Names returns the built-in plugins' names. The caller may modify the
// slice.
func Names() []string { return slices.Clone(names) }

// Known reports whether name is a built-in plugin.
func Known(name string) bool { return slices.Contains(names, name) }

// Module returns the WebAssembly module of the built-in plugin name,
// decompressed into a new slice the caller owns. The bytes are the same on
// every call, so wazero's compilation cache, keyed on the module's hash,
// finds the code compiled by an earlier start or by `tollgate plugin warm`.
func Module(name string) ([]byte, error) {
	if !Known(name) {
		return nil, fmt.Errorf("%w %q (built-in plugins: %v)", ErrUnknown, name, names)
	}
	gz, err := modules.ReadFile("modules/" + name + ".wasm.gz")
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %q: %w", name, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("built-in plugin %q: %w", name, err)
	}
	// The uncompressed size is the gzip trailer's last four bytes (the
	// modules are far below 4 GiB): one allocation of the exact size.
	n := binary.LittleEndian.Uint32(gz[len(gz)-4:])
	mod := make([]byte, n)
	if _, err := io.ReadFull(zr, mod); err != nil {
		return nil, fmt.Errorf("built-in plugin %q: decompressing: %w", name, err)
	}
	if _, err := zr.Read(make([]byte, 1)); err != io.EOF {
		return nil, fmt.Errorf("built-in plugin %q: decompressing: longer than its trailer says (%v)", name, err)
	}
	return mod, nil
}
