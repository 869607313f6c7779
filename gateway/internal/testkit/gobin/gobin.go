// Package gobin builds the repository's programs once for a test binary
// whose tests start them as processes (signals, a crash, a browser against
// the real binary).
package gobin

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Main is a TestMain: it builds pkgs (as `go build` takes them, relative
// to the test's package directory) into a new temporary directory, sets
// *dir to it, runs m, removes the directory and exits with m's code. A
// failed build exits 1 before any test runs.
func Main(m *testing.M, dir *string, pkgs ...string) {
	d, err := os.MkdirTemp("", "tollgate-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*dir = d
	cmd := exec.Command("go", append([]string{"build", "-o", d + "/"}, pkgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building", pkgs, ":", err)
		os.RemoveAll(d)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}
