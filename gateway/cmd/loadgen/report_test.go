package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/testkit/loadgen"
)

func TestReportCommand(t *testing.T) {
	const ok = `{"mode":"latency","target":"direct","level":1,"round":1,"count":10,"latency_us":{"samples":10,"p50":100,"p95":150}}
{"mode":"latency","target":"tollgate","level":1,"round":1,"count":10,"latency_us":{"samples":10,"p50":300,"p95":450}}
`
	const failed = `{"mode":"latency","target":"tollgate","level":1,"round":2,"count":10,"failures":1,"errors":[{"message":"HTTP 502","count":1}],"latency_us":{"samples":9,"p50":300}}
`
	tests := []struct {
		name    string
		results string
		args    []string
		code    int
		want    []string // in the spliced document
	}{
		{"clean run", ok, []string{"-section", "latency:non-streaming:no delays", "-summary", "tollgate=no plugins"}, 0,
			[]string{"#### Non-streaming (no delays)", "| 1 | tollgate | 0 | 0/10 | 300 | 450 | 0 | +200 | +300 |", "**+200 µs** at c=1", "Failures: none (0 of 20"}},
		{"failures exit 3 after writing", ok + failed, nil, exitFailures,
			[]string{"#### Latency", "**FAILURES: 1 of 30 measured requests failed**", "HTTP 502"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "results.jsonl")
			doc := filepath.Join(dir, "BENCH.md")
			out := filepath.Join(dir, "out.md")
			if err := os.WriteFile(in, []byte(tt.results), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(doc, []byte("# Bench\n\n"+loadgen.MarkerBegin+"\nold\n"+loadgen.MarkerEnd+"\n\n## Kept\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			args := append(append([]string{"report", "-title", "T", "-into", doc, "-out", out}, tt.args...), in)
			if code := run(args, &stdout, &stderr); code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			got, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			s := string(got)
			if !strings.HasPrefix(s, "# Bench\n\n"+loadgen.MarkerBegin+"\n### T\n") || !strings.HasSuffix(s, loadgen.MarkerEnd+"\n\n## Kept\n") ||
				strings.Contains(s, "old") {
				t.Errorf("document not spliced as expected:\n%s", s)
			}
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("document lacks %q:\n%s", w, s)
				}
			}
			if standalone, err := os.ReadFile(out); err != nil || string(standalone) != stdout.String() {
				t.Errorf("-out file (%v) differs from stdout", err)
			}
		})
	}
}

func TestReportCommandRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"malformed line", []string{"report", bad}, 1},
		{"missing file", []string{"report", filepath.Join(dir, "none")}, 1},
		{"bad section", []string{"report", "-section", "nocolon", bad}, 2},
		{"bad level", []string{"report", "-summary-levels", "1,x", bad}, 2},
		{"two files", []string{"report", bad, bad}, 2},
		{"bad comparison", []string{"report", "-compare", "tollgate-mcp", bad}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tt.args, &stdout, &stderr); code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
		})
	}
}
