package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	published, err := os.ReadFile("../../../policies/policy.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "schema.json")
	tests := []struct {
		name       string
		args       []string
		code       int
		wantStdout []byte // exactly, when set
		wantStderr string
	}{
		// The schema the sources generate is the published one (which
		// the policyschema tests also check), on standard output or in
		// a file.
		{"stdout", nil, 0, published, ""},
		{"file", []string{"-o", out}, 0, nil, ""},
		{"source outside a module", []string{"-src", "/"}, 1, nil, "no go.mod"},
		{"extra argument", []string{"x"}, 2, nil, "unexpected arguments"},
		{"unknown flag", []string{"-x"}, 2, nil, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit code %d, want %d (stderr: %s)", code, tt.code, stderr.String())
			}
			if tt.wantStdout != nil && !bytes.Equal(stdout.Bytes(), tt.wantStdout) {
				t.Errorf("printed %d bytes, not the %d of policies/policy.schema.json", stdout.Len(), len(tt.wantStdout))
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
	written, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(written, published) {
		t.Errorf("-o wrote %d bytes (%v), want the %d of policies/policy.schema.json", len(written), err, len(published))
	}
}
