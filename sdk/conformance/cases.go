package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// CaseResult is the outcome of one case of a plugin_test.json.
type CaseResult struct {
	Name string
	OK   bool
	// Problem says what differed from the expectation (empty when OK).
	Problem string
	// Got is what the plugin did: "continue", "reject 400 content_blocked",
	// or the streamed text with its finish reason.
	Got string
}

// RunCases loads the module at wasmPath with the config of casesJSON (a
// plugin_test.json; see docs/PLUGINS.md) and runs its cases. The error is
// for a file that does not decode (it names the JSON path of the
// problem) and for a module that does not load; a case the plugin fails
// is a CaseResult that is not OK.
func RunCases(wasmPath string, casesJSON []byte) ([]CaseResult, error) {
	f, err := decodeCases(casesJSON)
	if err != nil {
		return nil, err
	}
	module, err := os.ReadFile(wasmPath)
	if err != nil {
		return nil, fmt.Errorf("reading plugin module: %w", err)
	}
	config := []byte(f.config)
	if len(config) == 0 {
		config = []byte("{}")
	}
	c := &checker{opts: Options{Deadline: wasmhost.DefaultDeadline, MemoryBytes: wasmhost.DefaultMemoryBytes}, module: module}
	defer func() {
		for _, f := range c.closers {
			f()
		}
	}()
	l, err := c.load(1, config)
	if err != nil {
		return nil, fmt.Errorf("loading %s with the config of the test cases: %w", wasmPath, err)
	}
	results := make([]CaseResult, 0, len(f.cases))
	for _, tc := range f.cases {
		if tc.isStream || tc.whole != nil {
			results = append(results, runStreamCase(l.pipe, tc))
		} else {
			results = append(results, runRequestCase(l.pipe, tc))
		}
	}
	return results, nil
}

func runRequestCase(pl *wasmhost.Pipeline, tc testCase) CaseResult {
	res := CaseResult{Name: tc.name}
	r := newRequest(tc.request.probe())
	defer wasmhost.ReleaseRequest(r)
	err := pl.Request(r)
	verdict, status, code := "continue", 0, ""
	var rej *wasmhost.RejectError
	var an *wasmhost.Answered
	switch {
	case errors.As(err, &rej):
		verdict, status, code = "reject", rej.Status, rej.Code
		res.Got = fmt.Sprintf("reject %d %s", status, code)
	case errors.As(err, &an):
		verdict, status = "respond", r.Answer.Status
		res.Got = fmt.Sprintf("respond %d", status)
	case err != nil:
		res.Got, res.Problem = "failure", err.Error()
		return res
	default:
		res.Got = "continue"
	}
	var problems []string
	if verdict != tc.expect.verdict {
		problems = append(problems, fmt.Sprintf("verdict %s, want %s", verdict, tc.expect.verdict))
	}
	if tc.expect.status != 0 && status != tc.expect.status {
		problems = append(problems, fmt.Sprintf("status %d, want %d", status, tc.expect.status))
	}
	if tc.expect.code != "" && code != tc.expect.code {
		problems = append(problems, fmt.Sprintf("code %q, want %q", code, tc.expect.code))
	}
	res.Problem, res.OK = strings.Join(problems, "; "), len(problems) == 0
	return res
}

func runStreamCase(pl *wasmhost.Pipeline, tc testCase) CaseResult {
	res := CaseResult{Name: tc.name}
	s := stream{name: tc.name}
	for _, d := range tc.stream {
		s.events = append(s.events, event{text: d})
	}
	if tc.whole != nil {
		s.whole, s.events = true, []event{{text: *tc.whole}}
	}
	sr := newStreamRun(s, tc.request.probe())
	for sr.step(pl) {
	}
	o := &sr.out
	switch {
	case sr.rejected != nil:
		res.Got = fmt.Sprintf("reject %d %s", sr.rejected.Status, sr.rejected.Code)
		res.Problem = "the request phase rejected the request, so no reply was streamed: give the case a request the plugin lets through"
		return res
	case o.err != nil:
		res.Got, res.Problem = "failure", o.err.Error()
		return res
	}
	text := o.text.String()
	res.Got = fmt.Sprintf("%q finish_reason %s", text, o.finish)
	var problems []string
	if e := tc.expect.text; e != nil && text != *e {
		problems = append(problems, fmt.Sprintf("text %q, want %q", text, *e))
	}
	if e := tc.expect.finishReason; e != "" && o.finish != e {
		problems = append(problems, fmt.Sprintf("finish_reason %s, want %s", o.finish, e))
	}
	if e := tc.expect.stopped; e != nil && o.stopped != *e {
		problems = append(problems, fmt.Sprintf("stopped %v, want %v", o.stopped, *e))
	}
	res.Problem, res.OK = strings.Join(problems, "; "), len(problems) == 0
	return res
}

// The decoded plugin_test.json.
type (
	casesFile struct {
		config json.RawMessage
		cases  []testCase
	}
	testCase struct {
		name     string
		request  caseRequest
		stream   []string
		isStream bool
		whole    *string
		expect   caseExpect
	}
	caseRequest struct {
		endpoint, body string
		headers        map[string]string
	}
	caseExpect struct {
		verdict, code, finishReason string
		status                      int
		text                        *string
		stopped                     *bool
	}
)

// defaultCaseBody is the request of a reply case that gives none.
const defaultCaseBody = `{"model":"test-model","stream":true,"messages":[{"role":"user","content":"Hello"}]}`

func (cr caseRequest) probe() probe {
	p := probe{name: "case", endpoint: cr.endpoint, body: cr.body, headers: cr.headers}
	if p.body == "" {
		p.body = defaultCaseBody
	}
	if p.endpoint == "" {
		p.endpoint = "chat/completions"
	}
	var shape struct {
		Stream   bool              `json:"stream"`
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal([]byte(p.body), &shape) == nil {
		p.stream, p.messages = shape.Stream, int64(len(shape.Messages))
	}
	return p
}

// decodeCases decodes strictly: unknown fields, wrong types and missing
// required fields are errors naming their JSON path.
func decodeCases(b []byte) (*casesFile, error) {
	var f casesFile
	top, err := object(b, "", "config", "cases")
	if err != nil {
		return nil, err
	}
	if raw, ok := top["config"]; ok {
		if _, err := object(raw, "config"); err != nil && !errors.Is(err, errAnyKeys) {
			return nil, err
		}
		f.config = raw
	}
	var cases []json.RawMessage
	if err := field(top, "", "cases", &cases, true); err != nil {
		return nil, err
	}
	if len(cases) == 0 {
		return nil, errors.New("cases: no cases")
	}
	names := map[string]bool{}
	for i, raw := range cases {
		tc, err := decodeCase(raw, fmt.Sprintf("cases[%d]", i))
		if err != nil {
			return nil, err
		}
		if names[tc.name] {
			return nil, fmt.Errorf("cases[%d].name: %q is the name of an earlier case", i, tc.name)
		}
		names[tc.name] = true
		f.cases = append(f.cases, tc)
	}
	return &f, nil
}

func decodeCase(raw json.RawMessage, path string) (testCase, error) {
	var tc testCase
	obj, err := object(raw, path, "name", "request", "stream", "whole", "expect")
	if err != nil {
		return tc, err
	}
	if err := field(obj, path, "name", &tc.name, true); err != nil {
		return tc, err
	}
	if tc.name == "" {
		return tc, fmt.Errorf("%s.name: empty", path)
	}
	_, tc.isStream = obj["stream"]
	if err := field(obj, path, "stream", &tc.stream, false); err != nil {
		return tc, err
	}
	if err := field(obj, path, "whole", &tc.whole, false); err != nil {
		return tc, err
	}
	if tc.isStream && tc.whole != nil {
		return tc, fmt.Errorf("%s: a case has a stream or a whole reply, not both", path)
	}
	reply := tc.isStream || tc.whole != nil
	if r, ok := obj["request"]; ok {
		if tc.request, err = decodeRequest(r, path+".request"); err != nil {
			return tc, err
		}
	} else if !reply {
		return tc, fmt.Errorf("%s: a case has a request, a reply (stream or whole), or both", path)
	}
	e, ok := obj["expect"]
	if !ok {
		return tc, fmt.Errorf("%s.expect: missing", path)
	}
	tc.expect, err = decodeExpect(e, path+".expect", reply)
	return tc, err
}

func decodeRequest(raw json.RawMessage, path string) (caseRequest, error) {
	var cr caseRequest
	obj, err := object(raw, path, "body", "headers", "endpoint")
	if err != nil {
		return cr, err
	}
	if err := field(obj, path, "body", &cr.body, true); err != nil {
		return cr, err
	}
	if !json.Valid([]byte(cr.body)) {
		return cr, fmt.Errorf("%s.body: not valid JSON (the gateway answers such a request itself; plugins never see it)", path)
	}
	if err := field(obj, path, "headers", &cr.headers, false); err != nil {
		return cr, err
	}
	if err := field(obj, path, "endpoint", &cr.endpoint, false); err != nil {
		return cr, err
	}
	switch cr.endpoint {
	case "", "chat/completions", "completions", "embeddings", "messages":
	default:
		return cr, fmt.Errorf("%s.endpoint: %q; one of chat/completions, completions, embeddings, messages", path, cr.endpoint)
	}
	return cr, nil
}

func decodeExpect(raw json.RawMessage, path string, reply bool) (caseExpect, error) {
	var e caseExpect
	if reply {
		obj, err := object(raw, path, "text", "finish_reason", "stopped")
		if err != nil {
			return e, err
		}
		if err := field(obj, path, "text", &e.text, false); err != nil {
			return e, err
		}
		if err := field(obj, path, "finish_reason", &e.finishReason, false); err != nil {
			return e, err
		}
		if err := field(obj, path, "stopped", &e.stopped, false); err != nil {
			return e, err
		}
		if e.text == nil && e.finishReason == "" && e.stopped == nil {
			return e, fmt.Errorf("%s: expects nothing; give text, finish_reason or stopped", path)
		}
		return e, nil
	}
	obj, err := object(raw, path, "verdict", "status", "code")
	if err != nil {
		return e, err
	}
	if err := field(obj, path, "verdict", &e.verdict, true); err != nil {
		return e, err
	}
	if e.verdict != "continue" && e.verdict != "reject" && e.verdict != "respond" {
		return e, fmt.Errorf("%s.verdict: %q; want \"continue\", \"reject\" or \"respond\"", path, e.verdict)
	}
	if err := field(obj, path, "status", &e.status, false); err != nil {
		return e, err
	}
	if e.verdict == "reject" && e.status != 0 && (e.status < 400 || e.status > 599) {
		return e, fmt.Errorf("%s.status: %d; a rejection's status is 400 to 599", path, e.status)
	}
	if e.verdict == "respond" && e.status != 0 && (e.status < 200 || e.status > 599) {
		return e, fmt.Errorf("%s.status: %d; an answer's status is 200 to 599", path, e.status)
	}
	if err := field(obj, path, "code", &e.code, false); err != nil {
		return e, err
	}
	if e.verdict == "continue" && (e.status != 0 || e.code != "") {
		return e, fmt.Errorf("%s: status and code go with the verdict \"reject\"", path)
	}
	if e.verdict == "respond" && e.code != "" {
		return e, fmt.Errorf("%s: code goes with the verdict \"reject\"", path)
	}
	return e, nil
}

var errAnyKeys = errors.New("any keys")

// object decodes raw as a JSON object whose keys must be among known (no
// known: any key, reported as errAnyKeys after a successful decode).
func object(raw []byte, path string, known ...string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s: want a JSON object: %v", where(path), jsonProblem(raw, err))
	}
	if len(known) == 0 {
		return obj, errAnyKeys
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(known, k) {
			return nil, fmt.Errorf("%s: unknown field %q (known: %s)", join2(path, k), k, strings.Join(known, ", "))
		}
	}
	return obj, nil
}

// field decodes obj[name] into v with encoding/json's rules.
func field(obj map[string]json.RawMessage, path, name string, v any, required bool) error {
	raw, ok := obj[name]
	if !ok {
		if required {
			return fmt.Errorf("%s: missing", join2(path, name))
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %v", join2(path, name), jsonProblem(raw, err))
	}
	return nil
}

func jsonProblem(raw []byte, err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return "null"
	case errors.As(err, &te):
		return fmt.Sprintf("%s is not a %s", te.Value, te.Type)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

func where(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

func join2(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
