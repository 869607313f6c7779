package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
)

// TestPluginErrors checks that each way a plugin command fails says what
// went wrong and what to do next.
func TestPluginErrors(t *testing.T) {
	empty := t.TempDir()
	taken := t.TempDir()
	if err := os.WriteFile(filepath.Join(taken, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	nomod := t.TempDir()
	if err := os.WriteFile(filepath.Join(nomod, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "go.mod"), []byte("module broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { x := }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rust := t.TempDir()
	if err := os.WriteFile(filepath.Join(rust, "Cargo.toml"), []byte("[package]\nname = \"r\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"unknown command", []string{"plugin", "frob"}, 2, []string{`unknown command "frob"`, "tollgate plugin new NAME"}},
		{"build without a folder", []string{"plugin", "build"}, 2, []string{"usage: tollgate plugin build DIR"}},
		{"build a missing folder", []string{"plugin", "build", filepath.Join(empty, "nope")}, 1, []string{"is not a folder", "tollgate plugin new NAME"}},
		{"build an empty folder", []string{"plugin", "build", empty}, 1, []string{"is not a plugin folder", "Cargo.toml", ".go files"}},
		{"build Go files outside a module", []string{"plugin", "build", nomod}, 1, []string{"no go.mod in it or above", "go mod init"}},
		{"build a Go error", []string{"plugin", "build", broken}, 1, []string{"syntax error", "fix the errors above, then run `tollgate plugin build " + broken + "` again"}},
		{"build a Rust plugin without its SDK", []string{"plugin", "build", rust}, 1, []string{"then run `tollgate plugin build " + rust + "` again"}},
		{"test an empty folder", []string{"plugin", "test", empty}, 1, []string{"is not a plugin folder"}},
		{"test without a folder", []string{"plugin", "test", "-v"}, 2, []string{"usage: tollgate plugin test DIR"}},
		{"new without a name", []string{"plugin", "new"}, 2, []string{"usage: tollgate plugin new NAME"}},
		{"new in another language", []string{"plugin", "new", "g", "-lang", "cobol"}, 2, []string{`-lang "cobol"`, "-lang go or -lang rust"}},
		{"new with a bad name", []string{"plugin", "new", "My Guard", "-lang", "rust", "-dir", filepath.Join(empty, "g")}, 1, []string{`plugin name "My Guard"`, "lower-case letters"}},
		{"new into a folder that has files", []string{"plugin", "new", "g", "-lang", "rust", "-dir", taken}, 1, []string{"not empty", "notes.txt", "-dir DIR"}},
		{"new with a wrong -sdk", []string{"plugin", "new", "g", "-dir", filepath.Join(empty, "g"), "-sdk", empty}, 1, []string{"no go.mod of module github.com/tollgate/tollgate/sdk", "leave -sdk out"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

func TestUnpackModule(t *testing.T) {
	src := fstest.MapFS{
		"go.mod":          {Data: []byte("module github.com/tollgate/tollgate/sdk\n")},
		"doc.go":          {Data: []byte("package sdk\n")},
		"abi/abi.go":      {Data: []byte("package abi\n")},
		"plugintest/x.go": {Data: []byte("package plugintest\n")},
		"x_test.go":       {Data: []byte("package sdk\n")},
	}
	parent := t.TempDir()
	dir, err := unpackModule(src, parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x_test.go")); err == nil {
		t.Errorf("x_test.go unpacked: tests are left out")
	}
	for name, f := range src {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil || !bytes.Equal(b, f.Data) {
			t.Errorf("%s: %q, %v; want %q", name, b, err, f.Data)
		}
	}
	again, err := unpackModule(src, parent)
	if err != nil || again != dir {
		t.Errorf("second unpack: %s, %v; want %s", again, err, dir)
	}
	src["doc.go"] = &fstest.MapFile{Data: []byte("package sdk // changed\n")}
	other, err := unpackModule(src, parent)
	if err != nil || other == dir {
		t.Errorf("changed source unpacked into %s (%v), want a folder other than %s", other, err, dir)
	}
	entries, _ := os.ReadDir(parent)
	if len(entries) != 2 {
		t.Errorf("%d entries in %s, want 2 (no temporary folders left)", len(entries), parent)
	}
}
