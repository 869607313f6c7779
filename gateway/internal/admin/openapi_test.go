package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/tollgate/gateway/internal/admin"
)

type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type operation struct {
	Responses map[string]struct {
		Ref     string `json:"$ref"`
		Content map[string]struct {
			Schema map[string]any `json:"schema"`
		} `json:"content"`
	} `json:"responses"`
}

var methods = []string{"get", "put", "post", "patch", "delete"}

// docOperations returns "METHOD /path" of every documented operation.
func docOperations(t *testing.T) (openAPIDoc, []string) {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(admin.OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var ops []string
	for p, item := range doc.Paths {
		for m := range item {
			if slices.Contains(methods, m) {
				ops = append(ops, strings.ToUpper(m)+" "+p)
			}
		}
	}
	slices.Sort(ops)
	return doc, ops
}

// TestOpenAPIRoutes: every route of the admin mux is documented, and every
// documented operation is a route or pending.
func TestOpenAPIRoutes(t *testing.T) {
	t.Parallel()
	doc, ops := docOperations(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	served := map[string]bool{}
	for _, pat := range admin.RoutePatterns() {
		op := strings.ReplaceAll(pat, "...}", "}")
		served[op] = true
		if !slices.Contains(ops, op) {
			t.Errorf("route %q is not in openapi.json", pat)
		}
	}
	for _, op := range ops {
		if !served[op] {
			t.Errorf("openapi.json documents %q, which is not a route", op)
		}
	}
	if len(served) < 30 {
		t.Errorf("%d routes: the table looks truncated", len(served))
	}
}

// TestOpenAPIServed: the document is served as it is embedded.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	h := admin.NewHandler(nil, nil, token, nil)
	req := httptest.NewRequest("GET", "/v1/admin/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), admin.OpenAPI()) || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET openapi.json: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

// schemaChecker validates answers against the document's response schemas.
type schemaChecker struct {
	doc   openAPIDoc
	paths []pathMatcher
	mu    sync.Mutex
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
	// seen counts the checked answers by "METHOD /path STATUS".
	seen map[string]int
}

type pathMatcher struct {
	path string
	re   *regexp.Regexp
	lit  int // literal characters: more wins
}

const docURL = "https://tollgate.invalid/admin/openapi.json"

var checker = sync.OnceValues(func() (*schemaChecker, error) {
	var doc openAPIDoc
	if err := json.Unmarshal(admin.OpenAPI(), &doc); err != nil {
		return nil, err
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(admin.OpenAPI()))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, raw); err != nil {
		return nil, err
	}
	sc := &schemaChecker{doc: doc, c: c, cache: map[string]*jsonschema.Schema{}, seen: map[string]int{}}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for p := range doc.Paths {
		// {model} may hold slashes (GET /v1/admin/prices/{model...}).
		expr := strings.NewReplacer(`\{model\}`, `.+`).Replace(regexp.QuoteMeta(p))
		expr = regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(expr, `[^/]+`)
		sc.paths = append(sc.paths, pathMatcher{path: p, re: regexp.MustCompile("^" + expr + "$"), lit: len(param.ReplaceAllString(p, ""))})
	}
	slices.SortFunc(sc.paths, func(a, b pathMatcher) int { return b.lit - a.lit })
	return sc, nil
})

func (sc *schemaChecker) schema(ref string) (*jsonschema.Schema, error) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if s, ok := sc.cache[ref]; ok {
		return s, nil
	}
	s, err := sc.c.Compile(docURL + ref)
	if err != nil {
		return nil, err
	}
	sc.cache[ref] = s
	return s, nil
}

// check validates an answer: an error status against the Error schema,
// a success against the operation's documented schema for that status
// (which must be documented).
func (sc *schemaChecker) check(method, path string, status int, body []byte) error {
	path, _, _ = strings.Cut(path, "?")
	if status >= 400 {
		return sc.validate("#/components/schemas/Error", body)
	}
	var docPath string
	for _, m := range sc.paths {
		if m.re.MatchString(path) {
			docPath = m.path
			break
		}
	}
	if docPath == "" {
		return fmt.Errorf("%s %s answered %d but is not documented", method, path, status)
	}
	raw, ok := sc.doc.Paths[docPath][strings.ToLower(method)]
	if !ok {
		return fmt.Errorf("%s %s (%s) answered %d but the method is not documented", method, path, docPath, status)
	}
	var op operation
	if err := json.Unmarshal(raw, &op); err != nil {
		return err
	}
	resp, ok := op.Responses[fmt.Sprint(status)]
	if !ok {
		return fmt.Errorf("%s %s answered %d, not a documented status", method, docPath, status)
	}
	sc.mu.Lock()
	sc.seen[fmt.Sprintf("%s %s %d", method, docPath, status)]++
	sc.mu.Unlock()
	ct, ok := resp.Content["application/json"]
	if !ok {
		if len(body) > 0 {
			return fmt.Errorf("%s %s %d: a body where none is documented", method, docPath, status)
		}
		return nil
	}
	ref, _ := ct.Schema["$ref"].(string)
	if ref == "" {
		ref = "#/paths/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(docPath) + "/" + strings.ToLower(method) +
			"/responses/" + fmt.Sprint(status) + "/content/application~1json/schema"
	}
	if err := sc.validate(ref, body); err != nil {
		return fmt.Errorf("%s %s %d: %w", method, docPath, status, err)
	}
	return nil
}

func (sc *schemaChecker) validate(ref string, body []byte) error {
	s, err := sc.schema(ref)
	if err != nil {
		return fmt.Errorf("compiling %s: %w", ref, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("answer is not JSON: %w: %q", err, body)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("answer %s does not match %s: %v", body, ref, err)
	}
	return nil
}

// checkAnswer fails t unless the answer matches the document.
func checkAnswer(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	sc, err := checker()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if err := sc.check(method, path, status, body); err != nil {
		t.Error(err)
	}
}

// TestOpenAPICheckerRefuses: the checker the other tests rely on refuses
// answers that do not match.
func TestOpenAPICheckerRefuses(t *testing.T) {
	t.Parallel()
	sc, err := checker()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/v1/admin/plans/pro", 200, `{"id":"pro"}`},
		{"GET", "/v1/admin/plans/pro", 201, `{}`},
		{"GET", "/v1/admin/nothing", 200, `{}`},
		{"GET", "/v1/admin/tenants/acme", 200, `{"id":"acme","plan_id":"pro","status":"gone","plugins":{},"created_at":null,"keys_active":0,"spend_month_usd":"0","spend_month_micros":0}`},
		{"GET", "/v1/admin/prices/openai/gpt-4o", 200, `{"model":"m","input_usd_per_mtok":1,"output_usd_per_mtok":"1","effective_from":null}`},
		{"GET", "/v1/admin/overview", 200, `{"window_seconds":300}`},
		{"POST", "/v1/admin/plans", 400, `{"error":{"message":"x"}}`},
	} {
		if err := sc.check(tc.method, tc.path, tc.status, []byte(tc.body)); err == nil {
			t.Errorf("%s %s %d %s: accepted", tc.method, tc.path, tc.status, tc.body)
		}
	}
	ok := `{"id":"acme","plan_id":"pro","status":"active","plugins":{},"created_at":"2026-01-01T00:00:00Z","keys_active":0,"spend_month_usd":"0","spend_month_micros":0}`
	if err := sc.check("GET", "/v1/admin/tenants/acme", 200, []byte(ok)); err != nil {
		t.Errorf("a valid tenant refused: %v", err)
	}
}
