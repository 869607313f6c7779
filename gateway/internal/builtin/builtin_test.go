package builtin

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

var update = flag.Bool("update", false, "rebuild modules/ from plugins/ and sdk/ and rewrite modules/manifest.json")

// root is the repository's root, from this package's directory.
const root = "../../.."

// manifest is modules/manifest.json.
type manifest struct {
	// Go is the toolchain that built the modules (informational: another
	// toolchain builds other bytes from the same sources).
	Go      string          `json:"go"`
	Plugins []manifestEntry `json:"plugins"`
}

type manifestEntry struct {
	Name string `json:"name"`
	// SourcesSHA256 hashes the plugin's folder and sdk/ (sourcesHash).
	SourcesSHA256 string `json:"sources_sha256"`
	// ModuleSHA256 hashes the uncompressed module.
	ModuleSHA256 string `json:"module_sha256"`
	ModuleBytes  int    `json:"module_bytes"`
}

// sourcesHash hashes what a plugin's module is built from: the Go files
// that a wasip1 build of plugins/NAME compiles, in every package it
// depends on outside the standard library (the plugin, sdk, sdk/abi, ...),
// by path relative to the root and content. Tests and packages the plugin
// does not import (sdk/plugintest, the host runtime) are not part of it.
func sourcesHash(name string) (string, error) {
	cmd := exec.Command(goCommand(), "list", "-deps", "-f",
		"{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{end}}", "./plugins/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -deps ./plugins/%s: %w", name, err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	var files []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		rel, err := filepath.Rel(absRoot, fields[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			return "", fmt.Errorf("plugins/%s depends on %s, outside the repository", name, fields[0])
		}
		for _, f := range fields[1:] {
			files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	slices.Sort(files)
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// goCommand is $GO, else go from PATH.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func readManifest(t *testing.T) manifest {
	t.Helper()
	b, err := modules.ReadFile("modules/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("modules/manifest.json: %v", err)
	}
	return m
}

// TestModulesMatchSources fails when a built-in plugin's sources changed
// since its embedded module was built. With -update it rebuilds them.
func TestModulesMatchSources(t *testing.T) {
	if *update {
		regenerate(t)
		return
	}
	m := readManifest(t)
	var got []string
	for _, e := range m.Plugins {
		got = append(got, e.Name)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("manifest lists %v, want %v: run `make plugins`", got, names)
	}
	for _, e := range m.Plugins {
		t.Run(e.Name, func(t *testing.T) {
			want, err := sourcesHash(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			if e.SourcesSHA256 != want {
				t.Errorf("plugins/%s or sdk/ changed since the embedded module was built (sources %s…, built from %s…): "+
					"rebuild the built-in plugins with `make plugins` (or `go generate ./gateway/internal/builtin`) and commit gateway/internal/builtin/modules",
					e.Name, want[:12], e.SourcesSHA256[:min(12, len(e.SourcesSHA256))])
			}
			mod, err := Module(e.Name)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(mod)
			if hex.EncodeToString(sum[:]) != e.ModuleSHA256 || len(mod) != e.ModuleBytes {
				t.Errorf("modules/%s.wasm.gz decompresses to %d bytes (sha256 %x), the manifest says %d (%s): run `make plugins`",
					e.Name, len(mod), sum[:6], e.ModuleBytes, e.ModuleSHA256)
			}
		})
	}
}

// regenerate builds every built-in plugin with the plugin toolchain
// (wasmbuild, as `tollgate plugin build` does) into modules/ and rewrites
// the manifest.
func regenerate(t *testing.T) {
	m := manifest{Go: runtime.Version()}
	tmp := t.TempDir()
	for _, name := range names {
		out := filepath.Join(tmp, name+".wasm")
		if err := wasmbuild.Build(filepath.Join(root, "plugins", name), out); err != nil {
			t.Fatal(err)
		}
		mod, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(mod)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("modules", name+".wasm.gz"), gz.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := sourcesHash(name)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(mod)
		m.Plugins = append(m.Plugins, manifestEntry{Name: name, SourcesSHA256: src,
			ModuleSHA256: hex.EncodeToString(sum[:]), ModuleBytes: len(mod)})
		t.Logf("%s: %d KiB, %d KiB compressed", name, len(mod)>>10, gz.Len()>>10)
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile("modules/manifest.json", append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestModuleUnknown(t *testing.T) {
	tests := []string{"", "keywordguard", "Preflight", "../preflight", "preflight.wasm"}
	for _, name := range tests {
		t.Run(name, func(t *testing.T) {
			if Known(name) {
				t.Errorf("Known(%q) = true", name)
			}
			mod, err := Module(name)
			if !errors.Is(err, ErrUnknown) || mod != nil {
				t.Errorf("Module(%q) = %d bytes, %v; want ErrUnknown", name, len(mod), err)
			}
		})
	}
}

// TestModulesLoad loads each embedded module into the plugin host: it must
// speak this gateway's ABI version and take part in the phases its plugin
// registers.
func TestModulesLoad(t *testing.T) {
	// The cache a gateway uses by default: entries are keyed on the module
	// bytes, so a rerun with unchanged modules skips compiling (minutes
	// under -race on a busy machine).
	host, err := wasmhost.NewHost("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	tests := []struct {
		name   string
		config string
		phases wasmhost.Phase
	}{
		{"preflight", `{}`, wasmhost.PhaseRequest},
		{"ratelimit", `{"default_max_tokens":64}`, wasmhost.PhaseRequest},
		{"budget", `{"default_max_tokens":64}`, wasmhost.PhaseRequest | wasmhost.PhaseChunk},
		{"holdback", `{"markers":["example.invalid"]}`, wasmhost.PhaseChunk},
		{"pii", `{"mode":"mask-and-restore"}`, wasmhost.PhaseRequest | wasmhost.PhaseChunk},
		{"moderation", `{"endpoint":"http://127.0.0.1:9/v1/moderations"}`, wasmhost.PhaseRequest | wasmhost.PhaseChunk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod, err := Module(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := host.Load(context.Background(), wasmhost.Spec{Name: tt.name, Module: mod, Config: []byte(tt.config), Instances: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Phases() != tt.phases {
				t.Errorf("phases %v, want %v", p.Phases(), tt.phases)
			}
		})
	}
}
