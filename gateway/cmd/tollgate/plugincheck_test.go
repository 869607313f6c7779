package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

func TestPluginCheck(t *testing.T) {
	build := func(name string) string {
		p, err := wasmbuild.Cached(filepath.Join("../../../sdk/conformance/testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	good, leak := build("goodguard"), build("leak")
	cfgFile := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgFile, []byte(`{"word": "secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		code       int
		wantOut    []string
		wantStderr []string
	}{
		{"no module", []string{"plugin", "check"}, 2, nil, []string{"usage: tollgate plugin check"}},
		{"config not JSON", []string{"plugin", "check", "-config", "{", good}, 2, nil, []string{"-config: not valid JSON"}},
		{"config file missing", []string{"plugin", "check", "-config", "@" + cfgFile + ".none", good}, 2, nil, []string{"no such file"}},
		{"module missing", []string{"plugin", "check", "none.wasm"}, 1, nil, []string{"reading plugin module"}},
		{"conforming module", []string{"plugin", "check", "-quick", good, "-config", "@" + cfgFile}, 0,
			[]string{"state.interleaved  ok", "limits.deadline    ok", "cold compile", "conforms\n"}, nil},
		{"failing module and side by side", []string{"plugin", "check", "-quick", "-config", `{"word": "secret"}`, good, leak}, 1,
			[]string{"limits.growth      FAIL", "does not conform", "module size", "chunk callback"}, nil},
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
			for _, w := range tt.wantStderr {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errb.String())
				}
			}
		})
	}

	// Without -config: the config of the plugin_test.json beside the
	// module, else {} and, when that is refused, a hint.
	copyTo := func(dir string) string {
		b, err := os.ReadFile(good)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "goodguard.wasm")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withCases := t.TempDir()
	if err := os.WriteFile(filepath.Join(withCases, "plugin_test.json"), []byte(`{"config": {"word": "secret"}, "cases": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		dir     string
		code    int
		wantOut []string
	}{
		{"config from plugin_test.json", withCases, 0, []string{"config: the one in " + filepath.Join(withCases, "plugin_test.json"), "conforms\n"}},
		{"no config anywhere", t.TempDir(), 1, []string{"the module did not load with the given config", "the module refused the config {}: give it the config it runs with"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{"plugin", "check", "-quick", copyTo(tt.dir)}, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out.String(), errb.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"plugin", "check", "-quick", "-json", "-config", `{"word": "secret"}`, good}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var reps []struct {
			Module  string `json:"module"`
			Results []struct {
				Name string `json:"name"`
				OK   bool   `json:"ok"`
			} `json:"results"`
			Measurements struct {
				ModuleBytes    int    `json:"module_bytes"`
				InstanceMemory uint64 `json:"instance_memory_bytes"`
			} `json:"measurements"`
		}
		if err := json.Unmarshal(out.Bytes(), &reps); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		st, _ := os.Stat(good)
		if len(reps) != 1 || reps[0].Module != good || len(reps[0].Results) != 9 ||
			reps[0].Measurements.ModuleBytes != int(st.Size()) || reps[0].Measurements.InstanceMemory == 0 {
			t.Errorf("report %+v", reps)
		}
	})
}
