package policyschema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tollgate/tollgate/gateway/internal/config"
)

var update = flag.Bool("update", false, "rewrite policies/policy.schema.json from the config types")

const (
	root          = "../../../.."
	publishedPath = root + "/policies/policy.schema.json"
	// schemaComment is the first line of every shipped policy: it points
	// editors (the YAML language server) at the schema beside it.
	schemaComment = "# yaml-language-server: $schema=policy.schema.json"
)

// TestSchemaUpToDate fails when the published schema is not what the
// config types generate now.
func TestSchemaUpToDate(t *testing.T) {
	got, err := Generate(".")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(publishedPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(publishedPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("policies/policy.schema.json is not what the config types generate: refresh it with `go generate ./policies` "+
			"(or go test ./gateway/internal/config/policyschema -update)\n%s", firstDifference(got, want))
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  generated: " + gl + "\n  published: " + wl
		}
	}
	return ""
}

func published(t testing.TB) any {
	t.Helper()
	f, err := os.Open(publishedPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var doc any
	if err := json.NewDecoder(f).Decode(&doc); err != nil {
		t.Fatalf("%s: %v", publishedPath, err)
	}
	return doc
}

// TestShippedPolicies checks that every policy under policies/ names the
// schema on its first line and validates against it.
func TestShippedPolicies(t *testing.T) {
	s := compile(t, published(t))
	files, _ := filepath.Glob(root + "/policies/*.yaml")
	if len(files) == 0 {
		t.Fatal("no policies found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(string(data), "\n"); first != schemaComment {
				t.Errorf("first line is %q, want %q", first, schemaComment)
			}
			v, err := yamlToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("does not validate against the schema:\n%v", err)
			}
		})
	}
}

// TestDeployedPolicy checks the container image's policy. (The Helm
// chart's values hold part of a policy, which the chart completes; its
// rendered policy is checked by tools/deploycheck.)
func TestDeployedPolicy(t *testing.T) {
	s := compile(t, published(t))
	data, err := os.ReadFile(root + "/deploy/docker/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := yamlToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("deploy/docker/policy.yaml does not validate against the schema:\n%v", err)
	}
}

// TestDocumentedPolicies checks the policies shown in the documentation:
// every YAML block whose keys are all top-level policy keys must validate
// against the schema, the required keys aside (a block shows a part).
func TestDocumentedPolicies(t *testing.T) {
	doc := published(t).(map[string]any)
	topLevel := doc["properties"].(map[string]any)
	delete(doc, "required")
	s := compile(t, doc)
	files, _ := filepath.Glob(root + "/docs/*.md")
	files = append(files, root+"/README.md")
	checked := 0
	for _, f := range files {
		for _, b := range yamlBlocks(t, f) {
			var keys map[string]any
			if err := yaml.Unmarshal([]byte(b.text), &keys); err != nil || len(keys) == 0 {
				continue // not a mapping: not a policy
			}
			if !allKeysIn(keys, topLevel) {
				continue
			}
			checked++
			v, err := yamlToJSON([]byte(b.text))
			if err != nil {
				t.Errorf("%s:%d: %v", f, b.line, err)
				continue
			}
			if err := s.Validate(v); err != nil {
				t.Errorf("%s:%d: does not validate against the schema:\n%v", f, b.line, err)
			}
		}
	}
	if checked == 0 {
		t.Error("found no policy in the documentation")
	}
	t.Logf("%d documented policies checked", checked)
}

type block struct {
	line int // of the opening fence
	text string
}

// yamlBlocks returns the fenced ```yaml blocks of a Markdown file.
func yamlBlocks(t *testing.T, file string) []block {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	var cur *block
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur = &block{line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

func allKeysIn(m map[string]any, known map[string]any) bool {
	for k := range m {
		if _, ok := known[k]; !ok {
			return false
		}
	}
	return true
}

var wantLine = regexp.MustCompile(`^# want: (\S+)\n`)

// TestInvalidPolicies checks that each policy under testdata/invalid fails
// both the schema and the loader (what `tollgate validate` runs) at the
// YAML path its first line names, and nowhere else: an unknown key, a
// wrong type, a value outside an enum and a missing required key, at
// several depths.
func TestInvalidPolicies(t *testing.T) {
	s := compile(t, published(t))
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 12 {
		t.Fatalf("found %d invalid policies, want at least 12", len(files))
	}
	// The fixtures' plugins are guard.wasm, relative to the policy: the
	// loader only checks that the file exists. The one variable they name
	// is set.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "guard.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) { return "set", k == "ACME_KEY" }
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m := wantLine.FindSubmatch(data)
			if m == nil {
				t.Fatal(`the first line must be "# want: <YAML path of the problem>"`)
			}
			want := string(m[1])

			v, err := yamlToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); err == nil {
				t.Errorf("the schema accepts it, want a problem at %s", want)
			} else if got := schemaProblems(v, err); len(got) != 1 || got[want] == "" {
				t.Errorf("the schema reports problems at %v, want one at %s:\n%v", slices.Sorted(maps.Keys(got)), want, err)
			}

			_, err = config.ParseIn(data, dir, env)
			var ps config.Problems
			switch {
			case err == nil:
				t.Errorf("the loader accepts it, want a problem at %s", want)
			case !errors.As(err, &ps):
				t.Errorf("the loader fails with %v, want Problems", err)
			default:
				for _, p := range ps {
					if !slices.Contains(loaderPaths(p), want) {
						t.Errorf("the loader reports %s, want a problem at %s only", p, want)
					}
				}
			}
		})
	}
}

// loaderPaths lists the YAML paths a problem of the loader names. The
// tenants section reports its own problems inside the message, relative to
// it ("tenants: plans[0].id: ..."), one per line.
func loaderPaths(p config.Problem) []string {
	out := []string{p.Path}
	if p.Path != "tenants" {
		return out
	}
	for _, line := range strings.Split(p.Message, "\n") {
		if sub, _, ok := strings.Cut(line, ": "); ok && !strings.Contains(sub, " ") {
			out = append(out, p.Path+"."+sub)
		}
	}
	return out
}

// The schema of each Go type the policy can hold, and the types it cannot
// describe.
func TestTypeSchemas(t *testing.T) {
	type decodesItself struct{ config.ByteSize }
	tests := []struct {
		name string
		t    reflect.Type
		want string // JSON, or an error's text
	}{
		{"string", reflect.TypeFor[string](), `{"type":"string"}`},
		{"int", reflect.TypeFor[int](), `{"type":"integer"}`},
		{"int32", reflect.TypeFor[int32](), `{"type":"integer","minimum":-2147483648,"maximum":2147483647}`},
		{"int8", reflect.TypeFor[int8](), `{"type":"integer","minimum":-128,"maximum":127}`},
		{"uint", reflect.TypeFor[uint](), `{"type":"integer","minimum":0}`},
		{"uint16", reflect.TypeFor[uint16](), `{"type":"integer","minimum":0,"maximum":65535}`},
		{"float", reflect.TypeFor[float64](), `{"type":"number"}`},
		{"pointer to bool", reflect.TypeFor[*bool](), `{"type":["boolean","null"]}`},
		{"list", reflect.TypeFor[[]string](), `{"type":"array","items":{"type":"string"}}`},
		{"map", reflect.TypeFor[map[string]string](), `{"type":"object","additionalProperties":{"type":"string"}}`},
		{"free-form", reflect.TypeFor[any](), `{}`},
		{"duration", reflect.TypeFor[time.Duration](), `{"$ref":"#/$defs/duration"}`},
		{"pointer to duration", reflect.TypeFor[*time.Duration](), `{"anyOf":[{"$ref":"#/$defs/duration"},{"type":"null"}]}`},
		{"size", reflect.TypeFor[config.ByteSize](), `{"$ref":"#/$defs/byteSize"}`},
		{"time", reflect.TypeFor[time.Time](), `{"$ref":"#/$defs/timestamp"}`},
		{"untagged struct", reflect.TypeFor[struct{ A int }](), `{"type":"object","properties":{},"additionalProperties":false}`},
		{"own decoder", reflect.TypeFor[decodesItself](), "decodes itself"},
		{"channel", reflect.TypeFor[chan int](), "no JSON Schema for a chan"},
		{"int keys", reflect.TypeFor[map[int]string](), "map keys must be strings"},
	}
	docs, err := newSourceDocs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &generator{docs: docs, defs: &properties{}, used: map[string]bool{}}
			s, err := g.of(tt.t, "x")
			if err != nil {
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %q, want one saying %q", err, tt.want)
				}
				return
			}
			got, _ := json.Marshal(s)
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A rule for a key the types do not have (a renamed or moved field) fails
// the generation instead of going unused.
func TestStaleRuleFails(t *testing.T) {
	rules["upstreams[].no_such_key"] = rule{required: true}
	defer delete(rules, "upstreams[].no_such_key")
	_, err := Generate(".")
	if err == nil || !strings.Contains(err.Error(), "upstreams[].no_such_key") {
		t.Fatalf("Generate = %v, want an error naming the stale rule", err)
	}
}

func TestCommentText(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"one line", "// A is b.\n", "A is b."},
		{"paragraph", "// A is b,\n// and c.\n", "A is b, and c."},
		{"paragraphs", "// A.\n//\n// B.\n", "A.\n\nB."},
		{"code", "// A:\n//\n//\tx: 1\n//\ty: 2\n//\n// B.\n", "A:\n\n  x: 1\n  y: 2\n\nB."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := commentText(parseComment(t, tt.src))
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// parseComment returns the doc comment src gives a declaration.
func parseComment(t *testing.T, src string) *ast.CommentGroup {
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package p\n"+src+"type T int\n", parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return f.Decls[0].(*ast.GenDecl).Doc
}

// TestEnvironmentReferences checks both ways where ${VAR:-default} may
// stand: the loader expands it before decoding, so it works where the value
// is decoded from a string (strings, durations, sizes, fixed sets), and not
// where YAML must read a number or a boolean.
func TestEnvironmentReferences(t *testing.T) {
	const base = "version: 1\nroutes: [{models: [m], upstream: a}]\n"
	upstream := func(extra string) string {
		return "upstreams:\n  - name: a\n    base_url: ${BASE:-http://127.0.0.1:9/v1}\n" + extra
	}
	tests := []struct {
		name, policy string
		ok           bool
	}{
		{"string", upstream(""), true},
		{"duration", upstream("    timeouts:\n      connect: ${CONNECT:-3s}\n"), true},
		{"duration inside a string", upstream("    timeouts:\n      total: ${MINUTES:-10}m\n"), true},
		{"size", upstream("") + "server:\n  max_body_bytes: ${MAX_BODY:-8MiB}\n", true},
		{"enum", upstream("    provider: ${PROVIDER:-anthropic}\n"), true},
		{"store kind", upstream("") + "store:\n  kind: ${STORE:-memory}\n", true},
		{"integer", upstream("    max_connections: ${CONNS:-10}\n"), false},
		{"boolean", upstream("") + "server:\n  access_log: ${ACCESS_LOG:-true}\n", false},
		{"number", upstream("") + "tracing:\n  sample_ratio: ${RATIO:-0.5}\n", false},
	}
	s := compile(t, published(t))
	unset := func(string) (string, bool) { return "", false }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(base + tt.policy)
			v, err := yamlToJSON(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Validate(v); (err == nil) != tt.ok {
				t.Errorf("schema: %v, want ok=%v", err, tt.ok)
			}
			if _, err := config.Parse(data, unset); (err == nil) != tt.ok {
				t.Errorf("loader: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestBaseURLDefaulted: bedrock, gemini and vertex upstreams default
// base_url from their settings, so the schema, like the loader, does not
// ask for it there; an interpolated provider is left to the loader.
func TestBaseURLDefaulted(t *testing.T) {
	s := compile(t, published(t))
	for _, up := range []string{
		"{name: b, provider: bedrock, bedrock: {region: us-east-1}}",
		"{name: g, provider: gemini, api_key_env: GEMINI_API_KEY}",
		"{name: v, provider: vertex, vertex: {project: p, location: us-central1}}",
		"{name: e, provider: '${PROVIDER:-bedrock}', bedrock: {region: us-east-1}}",
	} {
		doc := "version: 1\nupstreams:\n  - " + up + "\nroutes:\n  - models: [m]\n    upstream: x\n"
		v, err := yamlToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s without base_url does not validate:\n%v", up, err)
		}
	}
}
