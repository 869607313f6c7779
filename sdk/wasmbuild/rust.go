package wasmbuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The Rust toolchain BuildRust needs, and how to get it.
const (
	rustTarget = "wasm32-unknown-unknown"
	rustHint   = "install Debian's Rust with its wasm32 standard library and linker: " +
		"apt-get install rustc libstd-rust-dev-wasm32 lld-14 " +
		"(rustup's rustc instead needs: rustup target add " + rustTarget + ", and RUSTC set to it)"
)

// ErrNoRust is wrapped by BuildRust's error when the Rust compiler, its
// wasm32 standard library or the linker is missing.
var ErrNoRust = errors.New("no Rust toolchain for " + rustTarget)

// BuildRust compiles the Rust plugin in dir into out with rustc alone (no
// cargo, no registry): first the vendored SDK crate dir/tollgate-sdk into
// an rlib, then dir/src/lib.rs into a cdylib for wasm32-unknown-unknown —
// optimised, with panic=abort (a panic traps), LTO, one codegen unit, and
// symbols stripped. The compiler is $RUSTC, else /usr/bin/rustc (Debian's:
// the rustc on PATH is often rustup's, which has no wasm32 target unless
// added).
func BuildRust(dir, out string) error {
	rustc, err := findRustc()
	if err != nil {
		return err
	}
	sdk := filepath.Join(dir, "tollgate-sdk", "src", "lib.rs")
	if _, err := os.Stat(sdk); err != nil {
		return fmt.Errorf("building Rust plugin %s: the SDK crate: %w (`tollgate plugin new` vendors it there)", dir, err)
	}
	tmp, err := os.MkdirTemp("", "tollgate-rust-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return err
	}
	srcDir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	common := []string{
		"--edition", "2021", "--target", rustTarget, "-O",
		"-C", "panic=abort", "-C", "codegen-units=1",
		// Panic messages carry source paths: keep the builder's out.
		"--remap-path-prefix", srcDir + "=.",
	}
	rlib := filepath.Join(tmp, "libtollgate.rlib")
	sdkArgs := append([]string{"--crate-type=rlib", "--crate-name", "tollgate", "-o", rlib, sdk}, common...)
	if err := runRustc(rustc, dir, sdkArgs); err != nil {
		return fmt.Errorf("building the Rust SDK of %s: %w", dir, err)
	}
	lib := filepath.Join(dir, "src", "lib.rs")
	pluginArgs := append([]string{
		"--crate-type=cdylib", "--crate-name", crateName(dir),
		"-C", "lto", "-C", "strip=symbols",
		"--extern", "tollgate=" + rlib, "-L", tmp, "-o", abs, lib,
	}, common...)
	if err := runRustc(rustc, dir, pluginArgs); err != nil {
		return fmt.Errorf("building Rust plugin %s: %w", dir, err)
	}
	return nil
}

// findRustc finds the compiler and checks that it can build and link for
// wasm32: the target's standard library and rust-lld.
func findRustc() (string, error) {
	rustc := os.Getenv("RUSTC")
	if rustc == "" {
		rustc = "/usr/bin/rustc"
	}
	if _, err := exec.LookPath(rustc); err != nil {
		return "", fmt.Errorf("%w: %s not found: %s", ErrNoRust, rustc, rustHint)
	}
	sysroot, err := exec.Command(rustc, "--print", "sysroot").Output()
	if err != nil {
		return "", fmt.Errorf("%w: %s --print sysroot: %v: %s", ErrNoRust, rustc, err, rustHint)
	}
	root := strings.TrimSpace(string(sysroot))
	std, _ := filepath.Glob(filepath.Join(root, "lib", "rustlib", rustTarget, "lib", "libstd-*.rlib"))
	if len(std) == 0 {
		return "", fmt.Errorf("%w: %s has no standard library for %s: %s", ErrNoRust, rustc, rustTarget, rustHint)
	}
	if !haveRustLLD(root) {
		return "", fmt.Errorf("%w: no linker for %s (rust-lld, from lld-14 on Debian): %s", ErrNoRust, rustTarget, rustHint)
	}
	return rustc, nil
}

// haveRustLLD reports whether rustc will find rust-lld: beside its host
// libraries (rustup) or on PATH (Debian's /usr/bin/rust-lld, a link to
// lld-14, which Stat follows: a dangling link does not count).
func haveRustLLD(sysroot string) bool {
	bundled, _ := filepath.Glob(filepath.Join(sysroot, "lib", "rustlib", "*", "bin", "rust-lld"))
	for _, p := range bundled {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	p, err := exec.LookPath("rust-lld")
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

func runRustc(rustc, dir string, args []string) error {
	cmd := exec.Command(rustc, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", rustc, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// crateName is the package name in dir/Cargo.toml with '-' as '_' (what
// cargo names the library), else "plugin".
func crateName(dir string) string {
	f, err := os.Open(filepath.Join(dir, "Cargo.toml"))
	if err != nil {
		return "plugin"
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			section = line
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if section != "[package]" || !ok || strings.TrimSpace(k) != "name" {
			continue
		}
		name := strings.ReplaceAll(strings.Trim(strings.TrimSpace(v), `"`), "-", "_")
		if validCrate(name) {
			return name
		}
	}
	return "plugin"
}

func validCrate(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
