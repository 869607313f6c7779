package scaffold_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/sdk/plugintest"
	"github.com/tollgate/tollgate/sdk/scaffold"
	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

// caseFile is plugin_test.json: the cases every language's example guard
// passes.
type caseFile struct {
	Config json.RawMessage `json:"config"`
	Cases  []testCase      `json:"cases"`
}

// testCase is a request and the verdict it gets, or a reply — streamed
// events, or a whole non-streamed text — and what the client receives.
type testCase struct {
	Name    string       `json:"name"`
	Request *caseRequest `json:"request"`
	Stream  []string     `json:"stream"`
	Whole   *string      `json:"whole"`
	Expect  caseExpect   `json:"expect"`
}

type caseRequest struct {
	Body    string            `json:"body"`
	Headers map[string]string `json:"headers"`
}

type caseExpect struct {
	Verdict      string  `json:"verdict"` // request cases: "continue" or "reject"
	Status       int     `json:"status"`
	Code         string  `json:"code"`
	Text         *string `json:"text"` // reply cases
	FinishReason string  `json:"finish_reason"`
	Stopped      bool    `json:"stopped"`
}

func loadCases(t *testing.T) caseFile {
	t.Helper()
	b, err := os.ReadFile("templates/plugin_test.json")
	if err != nil {
		t.Fatal(err)
	}
	var f caseFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("plugin_test.json: %v", err)
	}
	if len(f.Cases) < 10 {
		t.Fatalf("plugin_test.json has %d cases", len(f.Cases))
	}
	return f
}

// buildTemplate writes the lang template as "my-guard" into a temporary
// folder, the Go one with its SDK replaced by this checkout's, and builds
// it.
func buildTemplate(t *testing.T, lang string) string {
	t.Helper()
	sdkDir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my-guard")
	if err := scaffold.Write(dir, "my-guard", lang, scaffold.Options{GoSDK: sdkDir}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "my-guard.wasm")
	switch lang {
	case "go":
		err = wasmbuild.Build(dir, out)
	case "rust":
		err = wasmbuild.BuildRust(dir, out)
	}
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes", lang, st.Size())
	return out
}

// TestTemplatesPassTheCases runs every case of plugin_test.json against
// the example guard in each language: the same cases, the same
// expectations.
func TestTemplatesPassTheCases(t *testing.T) {
	cases := loadCases(t)
	for _, lang := range scaffold.Langs {
		t.Run(lang, func(t *testing.T) {
			p := plugintest.Load(t, buildTemplate(t, lang), string(cases.Config))
			for _, c := range cases.Cases {
				t.Run(c.Name, func(t *testing.T) { runCase(t, p, c) })
			}
		})
	}
}

func runCase(t *testing.T, p *plugintest.Plugin, c testCase) {
	var req plugintest.Request
	if c.Request != nil {
		req.Body, req.Headers = c.Request.Body, c.Request.Headers
	}
	var res plugintest.StreamResult
	switch {
	case c.Stream != nil:
		res = p.Stream(req, c.Stream)
	case c.Whole != nil:
		res = p.Whole(req, *c.Whole)
	default:
		got := p.Request(req)
		verdict := "continue"
		if got.Rejected {
			verdict = "reject"
		}
		if got.Err != nil || verdict != c.Expect.Verdict || got.Rejected && (got.Status != c.Expect.Status || got.Code != c.Expect.Code) {
			t.Errorf("got %+v, want %+v", got, c.Expect)
		}
		return
	}
	finish := "stop" // what the upstream sent, when no plugin stopped the reply
	if res.Stopped {
		finish = res.FinishReason
	}
	if res.Err != nil || c.Expect.Text == nil || res.Text != *c.Expect.Text || res.Stopped != c.Expect.Stopped || finish != c.Expect.FinishReason {
		t.Errorf("got %+v (finish_reason %q), want %+v", res, finish, c.Expect)
	}
}

// TestTemplatesRefuseBadConfigs checks that both languages refuse the same
// configs, each with a message naming the plugin and the problem.
func TestTemplatesRefuseBadConfigs(t *testing.T) {
	tests := []struct{ config, want string }{
		{`{"deny": `, "not JSON"},
		{`["secret"]`, "not an object"},
		{`{}`, `"deny" is missing`},
		{`{"deny": []}`, `"deny" is empty`},
		{`{"deny": "secret"}`, "not an array"},
		{`{"deny": [""]}`, "deny[0] is 0 bytes long"},
		{`{"deny": ["a", 1]}`, "not a string"},
		{`{"deny": ["` + strings.Repeat("x", 257) + `"]}`, "deny[0] is 257 bytes long"},
		{`{"deny": ["a"], "replacement": 1}`, "not a string"},
		{`{"deny": ["a"], "mode": 1}`, `unknown config field "mode"`},
	}
	for _, lang := range scaffold.Langs {
		t.Run(lang, func(t *testing.T) {
			wasm := buildTemplate(t, lang)
			for _, tt := range tests {
				_, err := plugintest.LoadErr(t, wasm, tt.config)
				if err == nil || !strings.Contains(err.Error(), "my-guard: ") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("config %.40s: error %v, want one containing %q", tt.config, err, tt.want)
				}
			}
		})
	}
}
