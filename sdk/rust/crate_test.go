package rustsdk

import (
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/sdk/abi"
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

// TestVerdictsMatchTheABI checks the crate's Verdict enum against the
// ABI's verdicts: every verdict the ABI defines, with its value and name.
func TestVerdictsMatchTheABI(t *testing.T) {
	src, err := os.ReadFile("src/abi.rs")
	if err != nil {
		t.Fatal(err)
	}
	enum := regexp.MustCompile(`(?s)pub enum Verdict \{(.*?)\n\}`).FindSubmatch(src)
	if enum == nil {
		t.Fatal("no enum Verdict in src/abi.rs")
	}
	values := map[string]uint32{}
	for _, m := range regexp.MustCompile(`(?m)^    (\w+) = (\d+),$`).FindAllSubmatch(enum[1], -1) {
		n, _ := strconv.ParseUint(string(m[2]), 10, 32)
		values[string(m[1])] = uint32(n)
	}
	names := map[string]string{}
	for _, m := range regexp.MustCompile(`Verdict::(\w+) => "(\w+)"`).FindAllSubmatch(src, -1) {
		names[string(m[1])] = string(m[2])
	}
	defined := 0
	for v := abi.Verdict(0); v.String() != "verdict("+strconv.Itoa(int(v))+")"; v++ {
		defined++
	}
	if defined < 10 || len(values) != defined || len(names) != defined {
		t.Fatalf("the ABI defines %d verdicts; the crate has %d values %v and %d names %v", defined, len(values), values, len(names), names)
	}
	for variant, n := range values {
		if got, want := names[variant], abi.Verdict(n).String(); got != want {
			t.Errorf("Verdict::%s = %d is named %q, the ABI's %d is %q", variant, n, got, n, want)
		}
	}
}

// TestLimitsMatchTheABI checks the crate's size limits against the ABI's.
func TestLimitsMatchTheABI(t *testing.T) {
	var src []byte
	for _, f := range []string{"src/phases.rs", "src/dispatch.rs"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	for name, want := range map[string]int64{
		"MAX_ANSWER":          abi.MaxAnswer,
		"MAX_ANSWER_EVENT":    abi.MaxAnswerEvent,
		"MAX_EXPECT_PREFIXES": abi.MaxExpectPrefixes,
		"MAX_EXPECT_PREFIX":   abi.MaxExpectPrefix,
	} {
		m := regexp.MustCompile(`pub const ` + name + `: usize = ([^;]+);`).FindSubmatch(src)
		if m == nil {
			t.Errorf("no const %s", name)
			continue
		}
		tv, err := types.Eval(token.NewFileSet(), nil, token.NoPos, string(m[1]))
		if err != nil {
			t.Errorf("%s = %s: %v", name, m[1], err)
			continue
		}
		if got, err := strconv.ParseInt(tv.Value.ExactString(), 10, 64); err != nil || got != want {
			t.Errorf("%s = %s (%d), the ABI's is %d", name, m[1], got, want)
		}
	}
}
