package wasmbuild_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// sdkModule returns the path, directory and go version of the module
// that provides the SDK in this checkout.
func sdkModule(t *testing.T) (path, dir, goVersion string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Module.Path}}\t{{.Module.Dir}}\t{{.Module.GoVersion}}", "github.com/tollgate/tollgate/sdk").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(f) != 3 {
		t.Fatalf("go list: %q", out)
	}
	return f[0], f[1], f[2]
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCachedOutsideTheCheckout builds a plugin in a module of its own in a
// temp dir (the SDK replaced by this checkout's, a second local module
// beside it), with no sdk/ folder of its own, and checks that the source
// hash follows what the build depends on and nothing else.
func TestCachedOutsideTheCheckout(t *testing.T) {
	modPath, modDir, goVersion := sdkModule(t)
	root := t.TempDir()
	plug, dep := filepath.Join(root, "myplug"), filepath.Join(root, "dep")
	write(t, filepath.Join(dep, "go.mod"), "module example.com/dep\n\ngo "+goVersion+"\n")
	write(t, filepath.Join(dep, "dep.go"), "package dep\n\nconst Status = 400\n")
	write(t, filepath.Join(plug, "go.mod"), "module example.com/myplug\n\ngo "+goVersion+"\n\n"+
		"require (\n\t"+modPath+" v0.0.0\n\texample.com/dep v0.0.0\n)\n\n"+
		"replace "+modPath+" => "+modDir+"\n\nreplace example.com/dep => ../dep\n")
	if sum, err := os.ReadFile(filepath.Join(modDir, "go.sum")); err == nil {
		write(t, filepath.Join(plug, "go.sum"), string(sum))
	}
	write(t, filepath.Join(plug, "main.go"), `package main

import (
	"example.com/dep"
	"github.com/tollgate/tollgate/sdk"
)

func main() {}

func init() {
	sdk.OnRequest(func(r *sdk.Request) sdk.Verdict {
		return r.Reject(dep.Status, "invalid_request_error", "no", "no")
	})
}
`)
	write(t, filepath.Join(plug, "main_test.go"), "package main\n")

	hash := func() string {
		t.Helper()
		h, err := wasmbuild.SourceHash(plug)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := hash()
	steps := []struct {
		name    string
		file    string
		content string
		changes bool
	}{
		{"a test file", filepath.Join(plug, "main_test.go"), "package main\n\n// changed\n", false},
		{"a package the build does not import", filepath.Join(plug, "sdk", "other.go"), "package sdk\n", false},
		{"a README", filepath.Join(plug, "README.md"), "# myplug\n", false},
		{"the plugin's source", filepath.Join(plug, "main.go"), "", true},
		{"a dependency's source", filepath.Join(dep, "dep.go"), "package dep\n\nconst Status = 403\n", true},
		{"the go.sum", filepath.Join(plug, "go.sum"), "", true},
	}
	prev := first
	for _, s := range steps {
		content := s.content
		if content == "" {
			b, err := os.ReadFile(s.file)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			content = string(b) + "\n// changed\n"
		}
		write(t, s.file, content)
		got := hash()
		if (got != prev) != s.changes {
			t.Errorf("changing %s: hash changed %v, want %v", s.name, got != prev, s.changes)
		}
		prev = got
	}

	wasm, err := wasmbuild.Cached(plug)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x00asm")) {
		t.Errorf("%s is not a wasm module (starts %q)", wasm, b[:min(8, len(b))])
	}
	if !strings.Contains(filepath.Base(wasm), "myplug-"+prev[:16]) {
		t.Errorf("cached as %s, want the name to carry the hash %s", wasm, prev[:16])
	}

	// The same sources in another place (a second clone or worktree) hash
	// alike, so its tests reuse the build; a change there still counts.
	other := filepath.Join(t.TempDir(), "elsewhere", "clone")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-r", root, other).CombinedOutput(); err != nil {
		t.Fatalf("copying %s: %v\n%s", root, err, out)
	}
	copied := filepath.Join(other, "myplug")
	if got, err := wasmbuild.SourceHash(copied); err != nil || got != prev {
		t.Errorf("the same sources in %s hash %s (%v), want %s as in %s", copied, got, err, prev, plug)
	}
	write(t, filepath.Join(other, "dep", "dep.go"), "package dep\n\nconst Status = 404\n")
	if got, err := wasmbuild.SourceHash(copied); err != nil || got == prev {
		t.Errorf("a changed dependency in the copy: hash %s (%v), want it changed", got, err)
	}
}
