package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCPUBuckets(t *testing.T) {
	const traces = "File: tollgate\n-----------+------\n      30ms   runtime._ExternalCode\n             runtime._System\n" +
		"-----------+------\n      10ms   runtime.memmove\n             github.com/valyala/fasthttp.appendBodyFixedSize\n"
	tests := []struct {
		name  string
		args  []string
		in    string
		code  int
		lines []string
	}{
		{"stdin", nil, traces, 0, []string{"guest 750\n", "memmove 250\n", "syscall 0\n", "sys_fasthttp 0\n", "samples 4\n"}},
		{"a bad sample", nil, "-----------+\n      xms   runtime.memmove\n", 1, nil},
		{"a missing file", []string{"/nonexistent/traces.txt"}, "", 1, nil},
		{"two files", []string{"a", "b"}, "", 2, nil},
		{"help", []string{"-h"}, "", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := cpuBuckets(tt.args, strings.NewReader(tt.in), &out, &errOut); code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, errOut.String())
			}
			for _, l := range tt.lines {
				if !strings.Contains(out.String(), l) {
					t.Errorf("output lacks %q:\n%s", l, out.String())
				}
			}
		})
	}
}
