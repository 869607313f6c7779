package scaffold_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tollgate/tollgate/sdk/scaffold"
)

// TestRustTemplateUnitTests runs the Rust example's own unit tests on the
// host, against the SDK crate Write vendored, as its README says to.
func TestRustTemplateUnitTests(t *testing.T) {
	rustc := os.Getenv("RUSTC")
	if rustc == "" {
		rustc = "/usr/bin/rustc"
	}
	if _, err := exec.LookPath(rustc); err != nil {
		t.Fatalf("%s not found: the Rust template's tests need it: apt-get install rustc libstd-rust-dev-wasm32 lld-14", rustc)
	}
	dir := filepath.Join(t.TempDir(), "p")
	if err := scaffold.Write(dir, "my-guard", "rust", scaffold.Options{}); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	rlib := filepath.Join(tmp, "libtollgate.rlib")
	run(rustc, "--edition", "2021", "--crate-type=rlib", "--crate-name", "tollgate", "tollgate-sdk/src/lib.rs", "-o", rlib)
	bin := filepath.Join(tmp, "tests")
	run(rustc, "--edition", "2021", "--test", "-D", "warnings", "--extern", "tollgate="+rlib, "-L", tmp, "src/lib.rs", "-o", bin)
	out := run(bin)
	if !regexp.MustCompile(`test result: ok\. [1-9]\d* passed; 0 failed`).Match(out) {
		t.Fatalf("no passing result in:\n%s", out)
	}
}
