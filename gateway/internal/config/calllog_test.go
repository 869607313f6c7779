package config

import (
	"strings"
	"testing"
)

func TestCallLogWAL(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want CallLogWAL
	}{
		{"durable against a kill by default", "", CallLogWAL{Mode: "write"}},
		{"every field", "call_log: {wal: {mode: write, max_bytes: 64MiB, segment_bytes: 1MiB}}\n",
			CallLogWAL{Mode: "write", MaxBytes: 64 << 20, SegmentBytes: 1 << 20}},
		{"off", "call_log: {wal: {mode: \"off\"}}\n", CallLogWAL{Mode: "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(valid+tt.yaml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if p.CallLog.WAL != tt.want {
				t.Errorf("got %+v, want %+v", p.CallLog.WAL, tt.want)
			}
		})
	}
}

func TestCallLogWALProblems(t *testing.T) {
	tests := []struct {
		yaml string
		want string
	}{
		{"call_log: {wal: {mode: always}}\n", `call_log.wal.mode: must be fsync, write or off, got "always"`},
		{"call_log: {wal: {segment_bytes: 1KiB}}\n", "call_log.wal.segment_bytes: must be between 4KiB and 1GiB, got 1024"},
		{"call_log: {wal: {segment_bytes: 2GiB}}\n", "call_log.wal.segment_bytes: must be between"},
		{"call_log: {wal: {max_bytes: 1000}}\n", "call_log.wal.max_bytes: must be at least 16KiB, got 1000"},
		{"call_log: {wal: {dir: /tmp}}\n", "call_log.wal.dir"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(valid+tt.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: got %v, want %q", tt.yaml, err, tt.want)
		}
	}
}
