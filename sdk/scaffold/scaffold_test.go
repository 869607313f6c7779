package scaffold_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/scaffold"
)

func TestWriteRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, plugin, lang string
		want                    string // a part of the error
	}{
		{"non-empty folder", full, "guard", "go", "keep.txt"},
		{"a file", file, "guard", "rust", "not a directory"},
		{"upper case", "", "Guard", "go", `plugin name "Guard"`},
		{"leading digit", "", "1guard", "go", `plugin name "1guard"`},
		{"dot", "", "my.guard", "go", `plugin name "my.guard"`},
		{"slash", "", "a/b", "rust", `plugin name "a/b"`},
		{"empty", "", "", "rust", `plugin name ""`},
		{"too long", "", "g" + strings.Repeat("x", 64), "go", "plugin name"},
		{"unknown language", "", "guard", "cobol", `language "cobol": the templates are go, rust`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir
			if dir == "" {
				dir = filepath.Join(t.TempDir(), "new")
			}
			err := scaffold.Write(dir, tt.plugin, tt.lang, scaffold.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if tt.dir == "" {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s was created (%v)", dir, err)
				}
			}
		})
	}
	err := scaffold.Write(full, "guard", "go", scaffold.Options{})
	if !errors.Is(err, scaffold.ErrNotEmpty) {
		t.Errorf("non-empty folder: %v, want ErrNotEmpty", err)
	}
}

func TestWriteNamesThePlugin(t *testing.T) {
	tests := []struct {
		lang  string
		files map[string][]string // file → strings it must contain
	}{
		{"go", map[string][]string{
			"go.mod":           {"module my-guard\n", "replace github.com/tollgate/tollgate/sdk => /opt/sdk\n"},
			"main.go":          {"Command my-guard is", `return "my-guard: " + e.msg`},
			"main_test.go":     {"package main"},
			"README.md":        {"# my-guard\n"},
			"plugin_test.json": {`"cases"`},
			".gitignore":       {"*.wasm"},
		}},
		{"rust", map[string][]string{
			"Cargo.toml":                  {`name = "my-guard"`, `tollgate = { path = "tollgate-sdk" }`},
			"src/lib.rs":                  {"//! my-guard, a Tollgate plugin", `"my-guard: unknown config field {:?}`, "export_plugin!(DenyGuard)"},
			"README.md":                   {"# my-guard\n", "--crate-name my_guard ", "-o my-guard.wasm"},
			"plugin_test.json":            {`"cases"`},
			"tollgate-sdk/Cargo.toml":     {`name = "tollgate"`},
			"tollgate-sdk/src/lib.rs":     {"mod records;"},
			"tollgate-sdk/src/plugin.rs":  {"macro_rules! export_plugin"},
			"tollgate-sdk/src/sys.rs":     {"fn request_messages("},
			"tollgate-sdk/src/records.rs": {"pub struct MessagePart"},
			"tollgate-sdk/README.md":      {"# tollgate"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			if err := os.Mkdir(dir, 0o755); err != nil { // an empty folder is fine
				t.Fatal(err)
			}
			if err := scaffold.Write(dir, "my-guard", tt.lang, scaffold.Options{GoSDK: "/opt/sdk"}); err != nil {
				t.Fatal(err)
			}
			for name, wants := range tt.files {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wants {
					if !strings.Contains(string(b), w) {
						t.Errorf("%s does not contain %q", name, w)
					}
				}
			}
			err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(p)
				if strings.Contains(string(b), "denyguard") {
					t.Errorf("%s still names the example", p)
				}
				if strings.HasSuffix(p, ".tmpl") {
					t.Errorf("%s kept its template suffix", p)
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWriteGoWithoutSDK(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p")
	if err := scaffold.Write(dir, "guard", "go", scaffold.Options{}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "replace") || !strings.Contains(string(b), "require github.com/tollgate/tollgate/sdk ") {
		t.Errorf("go.mod:\n%s", b)
	}
}
