package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`
version: 1
upstreams:
  - name: a
    base_url: http://x/v1
  - name: b
    base_url: "not a url"
    timeout: 3s
routes:
  - models: [m]
    upstream: nope
`), 0o600)
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("version: 1\nupstreams: [{name: a, base_url: 'http://x/v1'}]\nroutes: [{models: [m], upstream: a}]\n"), 0o600)
	// A drain set shorter than the longest stream warns; one as long, or
	// left to its default (the longest stream), does not.
	short := filepath.Join(dir, "short.yaml")
	os.WriteFile(short, []byte("version: 1\nserver: {drain_timeout: 30s}\nupstreams: [{name: a, base_url: 'http://x/v1'}]\nroutes: [{models: [m], upstream: a}]\n"), 0o600)
	drained := filepath.Join(dir, "drained.yaml")
	os.WriteFile(drained, []byte("version: 1\nserver: {drain_timeout: 5m}\nupstreams: [{name: a, base_url: 'http://x/v1', timeouts: {total: 5m}}]\nroutes: [{models: [m], upstream: a}]\n"), 0o600)

	tests := []struct {
		name       string
		args       []string
		code       int
		wantOut    []string
		wantStderr []string
		notOut     string
	}{
		{"good file, default drain", []string{"validate", good}, 0, []string{good + ": ok"}, nil, "warning"},
		{"drain set shorter than the default total timeout", []string{"validate", short}, 0, []string{short + ": ok",
			`  warning: server.drain_timeout 30s is shorter than upstream "a"'s timeouts.total 10m0s`}, nil, ""},
		{"drain fits the longest stream", []string{"validate", drained}, 0, []string{drained + ": ok"}, nil, "warning"},
		{"bad file lists every problem", []string{"validate", good, bad}, 1, []string{good + ": ok"},
			[]string{bad + ": 1 problem(s):", "upstreams[1].timeout (line 8): unknown field"}, ""},
		{"missing file", []string{"validate", filepath.Join(dir, "none.yaml")}, 1, nil, []string{"no such file"}, ""},
		{"no file", []string{"validate"}, 2, nil, []string{"usage: tollgate validate FILE..."}, ""},
		{"unknown command", []string{"frobnicate"}, 2, nil, []string{`unknown command "frobnicate"`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			if tt.notOut != "" && strings.Contains(out.String(), tt.notOut) {
				t.Errorf("stdout has %q:\n%s", tt.notOut, out.String())
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}
}

// Semantic problems are listed all at once when decoding succeeds.
func TestValidateListsAllSemanticProblems(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(f, []byte(`
version: 1
upstreams:
  - {name: a, base_url: "ftp://x"}
  - {name: a, base_url: "http://y", timeouts: {first_byte: 2m, total: 1m}}
routes:
  - {models: [m], upstream: nope}
`), 0o600)
	var out, errb bytes.Buffer
	if code := run([]string{"validate", f}, &out, &errb); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"4 problem(s)", "upstreams[0].base_url", "upstreams[1].name", "upstreams[1].timeouts.first_byte", "routes[0].upstream"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, errb.String())
		}
	}
}

func TestPluginBuild(t *testing.T) {
	out := filepath.Join(t.TempDir(), "kg.wasm")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plugin", "build", "../../../plugins/keywordguard", "-o", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) < 1<<20 || string(b[:4]) != "\x00asm" {
		t.Fatalf("built module: %d bytes, %v", len(b), err)
	}
	if !strings.Contains(stdout.String(), "built "+out) {
		t.Errorf("stdout %q", stdout.String())
	}
	stderr.Reset()
	if code := run([]string{"plugin", "frob"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "tollgate plugin build DIR") {
		t.Errorf("usage: exit %d %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"plugin", "build", t.TempDir()}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "is not a plugin folder") {
		t.Errorf("empty dir: exit %d %q", code, stderr.String())
	}
}
