package rustsdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// rustc is the compiler the tests use: $RUSTC, else Debian's.
func rustc(t *testing.T) string {
	t.Helper()
	r := os.Getenv("RUSTC")
	if r == "" {
		r = "/usr/bin/rustc"
	}
	if _, err := exec.LookPath(r); err != nil {
		t.Fatalf("%s not found: the Rust SDK's tests need it: apt-get install rustc libstd-rust-dev-wasm32 lld-14", r)
	}
	return r
}

// TestCrateUnitTests runs the crate's own tests (buffers, record parsers,
// JSON) on the host, warnings being errors.
func TestCrateUnitTests(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tests")
	cmd := exec.Command(rustc(t), "--edition", "2021", "--test", "--crate-name", "tollgate", "-D", "warnings", "src/lib.rs", "-o", bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compiling the tests: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`test result: ok\. (\d+) passed; 0 failed`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no passing result in:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n < 12 {
		t.Errorf("%d tests passed, want at least 12:\n%s", n, out)
	}
}

// TestCrateBuildsForWasm compiles the crate as the plugin build does,
// warnings (missing docs included) being errors.
func TestCrateBuildsForWasm(t *testing.T) {
	out := filepath.Join(t.TempDir(), "libtollgate.rlib")
	cmd := exec.Command(rustc(t), "--edition", "2021", "--crate-type=rlib", "--crate-name", "tollgate",
		"--target", "wasm32-unknown-unknown", "-O", "-C", "panic=abort", "-D", "warnings", "src/lib.rs", "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Fatalf("no rlib: %v", err)
	}
}

// TestFilesHoldTheCrate checks that the embedded files are the crate's.
func TestFilesHoldTheCrate(t *testing.T) {
	for _, p := range []string{"Cargo.toml", "README.md", "src/lib.rs", "src/sys.rs", "src/exchange.rs", "src/phases.rs", "src/plugin.rs", "src/records.rs", "src/json.rs"} {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Files.ReadFile(p)
		if err != nil || string(got) != string(want) {
			t.Errorf("Files: %s differs from the file (%v)", p, err)
		}
	}
}
