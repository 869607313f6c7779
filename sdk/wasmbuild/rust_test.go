package wasmbuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRustc writes a script answering --print sysroot with root.
func fakeRustc(t *testing.T, root string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rustc")
	if err := os.WriteFile(p, []byte("#!/bin/sh\necho "+root+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func touch(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestBuildRustSaysWhatToInstall(t *testing.T) {
	noTarget := t.TempDir()
	touch(t, filepath.Join(noTarget, "lib", "rustlib", "x86_64-unknown-linux-gnu", "lib", "libstd-1.rlib"))
	noLinker := t.TempDir()
	touch(t, filepath.Join(noLinker, "lib", "rustlib", rustTarget, "lib", "libstd-1.rlib"))
	bundled := t.TempDir()
	touch(t, filepath.Join(bundled, "lib", "rustlib", rustTarget, "lib", "libstd-1.rlib"))
	touch(t, filepath.Join(bundled, "lib", "rustlib", "x86_64-unknown-linux-gnu", "bin", "rust-lld"))

	tests := []struct {
		name, rustc string
		want        string // a part of the error; "" for a toolchain that passes the checks
	}{
		{"no compiler", filepath.Join(t.TempDir(), "rustc"), "not found"},
		{"no wasm32 standard library", fakeRustc(t, noTarget), "has no standard library for wasm32-unknown-unknown"},
		{"no linker", fakeRustc(t, noLinker), "no linker for wasm32-unknown-unknown (rust-lld"},
		{"rustup's layout", fakeRustc(t, bundled), ""},
	}
	t.Setenv("PATH", t.TempDir()) // no rust-lld on PATH
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("RUSTC", tt.rustc)
			_, err := findRustc()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrNoRust) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrNoRust containing %q", err, tt.want)
			}
			for _, hint := range []string{"apt-get install rustc libstd-rust-dev-wasm32 lld-14", "rustup target add wasm32-unknown-unknown"} {
				if !strings.Contains(err.Error(), hint) {
					t.Errorf("the error does not say %q: %v", hint, err)
				}
			}
		})
	}
}

func TestBuildRustNeedsTheVendoredSDK(t *testing.T) {
	if _, err := findRustc(); err != nil {
		t.Fatal(err) // the toolchain is a test dependency (make test-deps)
	}
	dir := t.TempDir()
	touch(t, filepath.Join(dir, "src", "lib.rs"))
	err := BuildRust(dir, filepath.Join(t.TempDir(), "p.wasm"))
	if err == nil || !strings.Contains(err.Error(), "tollgate-sdk") {
		t.Fatalf("error %v, want one naming tollgate-sdk", err)
	}
}

func TestCrateName(t *testing.T) {
	tests := []struct{ toml, want string }{
		{"[package]\nname = \"my-guard\"\n", "my_guard"},
		{"[package]\nversion = \"1\"\nname=\"g\"\n[lib]\nname = \"other\"\n", "g"},
		{"[lib]\nname = \"x\"\n[package]\n", "plugin"},
		{"[package]\nname = \"1bad\"\n", "plugin"},
		{"[package]\nname = \"a.b\"\n", "plugin"},
		{"", "plugin"},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte(tt.toml), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := crateName(dir); got != tt.want {
			t.Errorf("crateName(%q) = %q, want %q", tt.toml, got, tt.want)
		}
	}
	if got := crateName(t.TempDir()); got != "plugin" {
		t.Errorf("without Cargo.toml: %q", got)
	}
}
