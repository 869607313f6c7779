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
		{"new with flags first", []string{"plugin", "new", "-lang", "cobol", "g"}, 2, []string{`-lang "cobol"`}},
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

// TestPluginToolchainMissing checks the hints for a missing go or rustc.
func TestPluginToolchainMissing(t *testing.T) {
	goDir := t.TempDir()
	for name, content := range map[string]string{"go.mod": "module g\n", "main.go": "package main\n"} {
		if err := os.WriteFile(filepath.Join(goDir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rustDir := filepath.Join(t.TempDir(), "r")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plugin", "new", "-lang", "rust", "-dir", rustDir, "r"}, &stdout, &stderr); code != 0 {
		t.Fatalf("plugin new: exit %d\n%s", code, stderr.String())
	}
	tests := []struct {
		name, env, value, dir string
		want                  []string
	}{
		{"go", "GO", "/nonexistent/go", goDir, []string{"the go command is not installed", "https://go.dev/dl/"}},
		{"rustc", "RUSTC", "/nonexistent/rustc", rustDir, []string{"apt-get install", "libstd-rust-dev-wasm32", "then run `tollgate plugin build " + rustDir + "` again"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(tt.env, tt.value)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"plugin", "build", tt.dir}, &stdout, &stderr); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}

// TestPluginTestReportsFailedCases makes a Go plugin against this
// checkout's SDK, breaks one expectation of its plugin_test.json, and
// checks that plugin test names the case, what the plugin did, and what
// to do.
func TestPluginTestReportsFailedCases(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "g")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plugin", "new", "-dir", dir, "-sdk", "../../../sdk", "g"}, &stdout, &stderr); code != 0 {
		t.Fatalf("plugin new: exit %d\n%s", code, stderr.String())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err != nil || !bytes.Contains(b, []byte("replace github.com/tollgate/tollgate/sdk => ")) {
		t.Fatalf("go.mod: %s %v", b, err)
	}
	cases := filepath.Join(dir, "plugin_test.json")
	b, err := os.ReadFile(cases)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"expect": {"verdict": "continue"}`), []byte(`"expect": {"verdict": "reject", "status": 400, "code": "content_blocked"}`), 1)
	if err := os.WriteFile(cases, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"plugin", "test", dir, "-run", "^$"}, &stdout, &stderr); code != 1 {
		t.Fatalf("plugin test: exit %d, want 1\n%s\n%s", code, stdout.String(), stderr.String())
	}
	for _, w := range []string{"FAIL  clean request:", "(got continue"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
		}
	}
	if w := "1 of 14 cases in " + cases + " failed: fix the plugin (or the case), then run `tollgate plugin test " + dir + "` again"; !strings.Contains(stderr.String(), w) {
		t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
	}
}

// TestPluginNewWithoutTheProxy checks the hint when go mod tidy cannot
// fetch the SDK's dependencies.
func TestPluginNewWithoutTheProxy(t *testing.T) {
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOMODCACHE", t.TempDir())
	t.Setenv("GOFLAGS", "-modcacherw")
	dir := filepath.Join(t.TempDir(), "g")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plugin", "new", "-dir", dir, "g"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	for _, w := range []string{"go mod tidy in " + dir, "GOPROXY=off", "check the network or GOPROXY, then run `go mod tidy` in " + dir} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "main.go")); err != nil {
		t.Errorf("the plugin was not written: %v", err)
	}
}
