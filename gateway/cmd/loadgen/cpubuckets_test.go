package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestCPUBuckets(t *testing.T) {
	const traces = "File: tollgate\n-----------+------\n      30ms   runtime._ExternalCode\n             runtime._System\n" +
		"-----------+------\n      10ms   runtime.memmove\n             github.com/valyala/fasthttp.appendBodyFixedSize\n"
	// The same samples, some inside plugins' callbacks.
	const labelled = "File: tollgate\n-----------+------\n  callback:  on_request\n    plugin:  budget\n      20ms   runtime._ExternalCode\n" +
		"-----------+------\n    plugin:  holdback\n      10ms   runtime._ExternalCode\n" +
		"-----------+------\n    plugin:  budget\n      10ms   github.com/tollgate/tollgate/sdk/wasmhost.(*Plugin).hostDispatch\n" +
		"-----------+------\n      10ms   runtime.memmove\n             github.com/valyala/fasthttp.appendBodyFixedSize\n"
	tests := []struct {
		name  string
		args  []string
		in    string
		code  int
		lines []string
	}{
		{"stdin", nil, traces, 0, []string{"guest 750\n", "memmove 250\n", "syscall 0\n", "sys_fasthttp 0\n", "samples 4\n"}},
		{"labelled", nil, labelled, 0, []string{"guest 600\n", "wasmhost 200\n", "memmove 200\n", "plugin:budget:guest 400\n",
			"plugin:budget:wasmhost 200\n", "plugin:holdback:guest 200\n", "samples 5\n"}},
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
