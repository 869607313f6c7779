package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/sdk/wasmbuild"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

const valid = `
version: 1
upstreams:
  - name: a
    base_url: http://127.0.0.1:9/v1/
routes:
  - models: [m1, "g-*"]
    upstream: a
`

func TestParseValidAppliesDefaults(t *testing.T) {
	p, err := Parse([]byte(valid), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.Server.Listen != DefaultListen || p.Server.MaxBodyBytes != DefaultMaxBodyBytes || p.Server.DrainTimeout != DefaultTotalTimeout {
		t.Errorf("server defaults not applied: %+v", p.Server)
	}
	if w := p.DrainWarnings(); w != nil {
		t.Errorf("the default drain warns: %q", w)
	}
	u := p.Upstreams[0]
	if u.Provider != ProviderOpenAI || u.Timeouts.FirstByte != DefaultFirstByteTimeout || u.MaxConnections != DefaultUpstreamConns {
		t.Errorf("upstream defaults not applied: %+v", u)
	}
	if u.URL.Path != "/v1" {
		t.Errorf("base path = %q, want /v1 (trailing slash trimmed)", u.URL.Path)
	}
}

func TestPluginModule(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "own.wasm"), []byte("\x00asm own"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := ParseIn([]byte(valid+"plugins: [{name: a, builtin: holdback}, {name: b, path: own.wasm}]\n"), dir, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		file     string
		wantHead string
		wantMin  int
	}{
		{"a", "", "\x00asm\x01\x00\x00\x00", 1 << 20}, // the embedded holdback module
		{"b", filepath.Join(dir, "own.wasm"), "\x00asm own", 8},
	}
	for i, tt := range tests {
		pl := &p.Plugins[i]
		if pl.Name != tt.name || pl.File != tt.file {
			t.Errorf("plugins[%d] = %q, file %q; want %q, file %q", i, pl.Name, pl.File, tt.name, tt.file)
		}
		mod, err := pl.Module()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !strings.HasPrefix(string(mod), tt.wantHead) || len(mod) < tt.wantMin {
			t.Errorf("%s: module of %d bytes starting %q; want at least %d starting %q", tt.name, len(mod), mod[:min(8, len(mod))], tt.wantMin, tt.wantHead)
		}
	}
}

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // each must appear in the error, in order
	}{
		{"unknown top-level field", valid + "extra: 1\n", nil, []string{"extra (line 9): unknown field"}},
		{"unknown nested field with index", `
version: 1
upstreams:
  - name: a
    base_url: http://x/v1
  - name: b
    bse_url: http://y/v1
routes: [{models: [m], upstream: a}]
`, nil, []string{"upstreams[1].bse_url (line 7): unknown field (known: anthropic_version, api_key_env, azure, base_url,"}},
		{"every problem listed", `
version: 2
upstreams:
  - name: a
    base_url: ftp://x
    provider: nope
  - name: a
    base_url: http://y
routes:
  - models: []
    upstream: missing
  - models: ["[bad"]
    upstream: a
`, nil, []string{
			"version: must be 1",
			"upstreams[0].provider: unknown provider \"nope\"",
			"upstreams[0].base_url: scheme must be http or https",
			"upstreams[1].name: \"a\" is already used by upstreams[0]",
			"routes[0].models: at least one model",
			"routes[0].upstream: names no upstream: \"missing\"",
			"routes[1].models[0]: invalid glob pattern",
		}},
		{"wrong type carries path", `
version: 1
server:
  drain_timeout: soon
upstreams: [{name: a, base_url: "http://x"}]
routes: [{models: [m], upstream: a}]
`, nil, []string{"server.drain_timeout (line 4): cannot unmarshal"}},
		{"bad byte size", `
version: 1
server: {max_body_bytes: 4 parsecs}
upstreams: [{name: a, base_url: "http://x"}]
routes: [{models: [m], upstream: a}]
`, nil, []string{"server.max_body_bytes (line 3): invalid size unit"}},
		{"api key env unset", `
version: 1
upstreams: [{name: a, base_url: "http://x", api_key_env: OPENAI_KEY}]
routes: [{models: [m], upstream: a}]
`, nil, []string{"upstreams[0].api_key_env: environment variable OPENAI_KEY is not set"}},
		{"env reference without default", `
version: 1
upstreams: [{name: a, base_url: "${UP_URL}"}]
routes: [{models: [m], upstream: a}]
`, nil, []string{"upstreams[0].base_url (line 3): environment variable UP_URL is not set"}},
		{"duplicate model", `
version: 1
upstreams: [{name: a, base_url: "http://x"}]
routes: [{models: [m], upstream: a}, {models: [m], upstream: a}]
`, nil, []string{"routes[1].models[0]: \"m\" is already routed by routes[0].models[0]"}},
		{"header injection in configured header", `
version: 1
upstreams: [{name: a, base_url: "http://x", headers: {"X-A": "v\r\nEvil: 1"}}]
routes: [{models: [m], upstream: a}]
`, nil, []string{"upstreams[0].headers.X-A: value must not contain CR, LF or NUL"}},
		{"unknown built-in plugin", valid + "plugins: [{name: a, builtin: preflight}, {name: b, builtin: keywordguard}]\n", nil,
			[]string{"plugins[1].builtin: unknown built-in plugin \"keywordguard\" (built-in: preflight, ratelimit, budget, holdback, pii, moderation, cache)"}},
		{"built-in and path", valid + "plugins: [{name: a, builtin: budget, path: x.wasm}]\n", nil,
			[]string{"plugins[0].builtin: cannot be set with path"}},
		{"neither built-in nor path", valid + "plugins: [{name: a}]\n", nil,
			[]string{"plugins[0].path: is required (the plugin's .wasm file), or builtin: one of preflight, ratelimit, budget, holdback, pii, moderation"}},
		{"empty file", "", nil, []string{"the policy is empty"}},
		{"not yaml", "version: [1\n", nil, []string{"not valid YAML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), env(tt.env))
			if err == nil {
				t.Fatal("want error, got none")
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("error %T is not Problems: %v", err, err)
			}
			msg := err.Error()
			at := 0
			for _, w := range tt.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order) in:\n%s", w, msg)
				}
				at += i + len(w)
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	y := `
version: 1
upstreams:
  - name: a
    base_url: ${UP_URL:-http://127.0.0.1:1/v1}
    api_key_env: KEY
    headers: {X-Price: "$$5"}
routes: [{models: [m], upstream: a}]
`
	p, err := Parse([]byte(y), env(map[string]string{"KEY": "sk-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Upstreams[0].BaseURL; got != "http://127.0.0.1:1/v1" {
		t.Errorf("default not used: %q", got)
	}
	if p.Upstreams[0].APIKey != "sk-secret" {
		t.Errorf("api key not resolved")
	}
	if got := p.Upstreams[0].Headers["X-Price"]; got != "$5" {
		t.Errorf("$$ not unescaped: %q", got)
	}
	p, err = Parse([]byte(y), env(map[string]string{"KEY": "k", "UP_URL": "https://api.example/v1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Upstreams[0].URL.Host; got != "api.example" {
		t.Errorf("env not used: %q", got)
	}
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		bad  bool
	}{
		{"1024", 1024, false}, {"4MiB", 4 << 20, false}, {"512 KiB", 512 << 10, false}, {"10MB", 10e6, false},
		{"1GiB", 1 << 30, false}, {"-1", 0, true}, {"4 parsecs", 0, true}, {"MiB", 0, true}, {"99999999999999GiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d, bad=%v", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

// The example policies are golden inputs: each must load. Plugins they
// name under bin/plugins/ are built from plugins/ first (as `make plugins`
// does).
func TestExamplePoliciesLoad(t *testing.T) {
	files, _ := filepath.Glob("../../../policies/*.yaml")
	if len(files) == 0 {
		t.Fatal("no example policies found")
	}
	root, _ := filepath.Abs("../../..")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`bin/plugins/([a-z0-9_-]+)\.wasm`).FindAllStringSubmatch(string(data), -1) {
			out := filepath.Join(root, "bin/plugins", m[1]+".wasm")
			if _, err := os.Stat(out); err != nil {
				if err := wasmbuild.Build(filepath.Join(root, "plugins", m[1]), out); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := ParseIn(data, filepath.Dir(f), env(map[string]string{"OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "x", "AZURE_OPENAI_API_KEY": "x", "DEMO_KEY": "tg_demo_123",
			"TOLLGATE_DEMO_KEY": "tg_demo_1", "ACME_KEY": "tg_acme_1", "GLOBEX_KEY": "tg_globex_1", "TOLLGATE_DEMO_LIMITED_KEY": "tg_demo_2", "TOLLGATE_DEMO_SPENT_KEY": "tg_demo_3",
			"TOLLGATE_DATABASE_URL": "postgres://tollgate@127.0.0.1/tollgate", "TOLLGATE_ADMIN_TOKEN": "t"})); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func FuzzPolicyParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("version: 1\nserver: {listen: ':1', drain_timeout: 1s, max_body_bytes: 1KiB}\n"))
	f.Add([]byte("upstreams: [{name: a, base_url: '${X:-http://a}', timeouts: {total: 1s, first_byte: 2s}}]"))
	f.Add([]byte("a: &x [1]\nb: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, env(nil))
		if err == nil && (p == nil || len(p.Upstreams) == 0 || p.Upstreams[0].URL == nil) {
			t.Fatalf("accepted an incomplete policy: %+v", p)
		}
	})
}

// Unset, server.drain_timeout lets the longest stream finish (at least
// 30s); set, it is kept, and a drain shorter than a stream warns.
func TestDrainTimeoutDefault(t *testing.T) {
	const head = "version: 1\nroutes: [{models: [m], upstream: a}]\n"
	tests := []struct {
		name, yaml string
		want       time.Duration
		warns      bool
	}{
		{"default total", head + "upstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\"}]\n", DefaultTotalTimeout, false},
		{"longest of two", head + "upstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\", timeouts: {total: 5m}}, {name: b, base_url: \"http://127.0.0.1:9/v1/\", timeouts: {total: 45m}}]\n", 45 * time.Minute, false},
		{"at least 30s", head + "upstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\", timeouts: {first_byte: 5s, total: 10s}}]\n", DefaultDrainTimeout, false},
		{"set shorter", head + "server: {drain_timeout: 1m}\nupstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\", timeouts: {total: 5m}}]\n", time.Minute, true},
		{"set longer", head + "server: {drain_timeout: 20m}\nupstreams: [{name: a, base_url: \"http://127.0.0.1:9/v1/\"}]\n", 20 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.yaml), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if p.Server.DrainTimeout != tt.want {
				t.Errorf("drain_timeout = %v, want %v", p.Server.DrainTimeout, tt.want)
			}
			if got := p.DrainWarnings() != nil; got != tt.warns {
				t.Errorf("warns = %v, want %v (%q)", got, tt.warns, p.DrainWarnings())
			}
		})
	}
}
