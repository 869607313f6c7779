package main

import (
	"strings"
	"testing"
)

func TestHoldbackConfig(t *testing.T) {
	g, err := parseConfig([]byte(`{"markers": ["oaidalleapiprodscus.blob.core.windows.net", "files.example.com"],
		"case_insensitive": true, "mode": "buffer", "correction": "[cut]"}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.markers) != 2 || !g.caseInsensitive || g.mode != modeBuffer || g.correction != "[cut]" || g.ac == nil {
		t.Fatalf("%+v", g)
	}
	g, err = parseConfig([]byte(`{"markers": ["x.net"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if g.caseInsensitive || g.mode != modeHoldback || g.correction != defaultCorrection {
		t.Fatalf("defaults: %+v", g)
	}
	if g, err = parseConfig([]byte(`{"markers": ["x.net"], "correction": ""}`)); err != nil || g.correction != "" {
		t.Fatalf("an empty correction: %v %+v", err, g)
	}
}

func TestHoldbackConfigErrors(t *testing.T) {
	tests := []struct{ config, want string }{
		{`{}`, `"markers" must list at least one marker`},
		{`{"markers": []}`, `"markers" must list at least one marker`},
		{`{"markers": "x.net"}`, `"markers" must be a list of strings`},
		{`{"markers": ["x.net", ""]}`, `markers[1] is empty`},
		{`{"markers": ["x.net", 3]}`, `markers[1] must be a string`},
		{`{"markers": ["a b"]}`, `markers[0] "a b" contains ' ' at byte 1, which cannot be part of a URL`},
		{`{"markers": ["bücher.de"]}`, `markers[0] "bücher.de" contains the non-ASCII byte 0xc3 at byte 1`},
		{`{"markers": ["` + strings.Repeat("a", 513) + `"]}`, `markers[0] is 513 bytes long; at most 512 are allowed`},
		{`{"markers": [` + strings.Repeat(`"`+strings.Repeat("a", 500)+`",`, 17) + `"x"]}`, `"markers" add up to more than 8192 bytes`},
		{`{"markers": [` + strings.Repeat(`"a",`, 256) + `"x"]}`, `"markers" lists more than 256 markers`},
		{`{"markers": ["x.net"], "mode": "stream"}`, `"mode" is "stream"; it must be "holdback" or "buffer"`},
		{`{"markers": ["x.net"], "mode": 1}`, `"mode" must be "holdback" or "buffer"`},
		{`{"markers": ["x.net"], "case_insensitive": "yes"}`, `"case_insensitive" must be true or false`},
		{`{"markers": ["x.net"], "correction": 5}`, `"correction" must be a string`},
		{`{"markers": ["x.net"], "correction": "` + strings.Repeat("c", 4097) + `"}`, `"correction" is 4097 bytes long; at most 4096`},
		{`{"markers": ["x.net"], "marker": ["y"]}`, `unknown key "marker" (keys: markers, case_insensitive, mode, correction)`},
		{`[]`, `the config must be a JSON object`},
		{`{"markers": ["x.net"]} x`, `unexpected data after the value`},
	}
	for _, tt := range tests {
		_, err := parseConfig([]byte(tt.config))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60s: got %v, want %q", tt.config, err, tt.want)
		}
	}
}

func mustGuard(t testing.TB, config string) *guard {
	t.Helper()
	g, err := parseConfig([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	return g
}
