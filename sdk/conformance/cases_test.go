package conformance

import (
	"os"
	"strings"
	"testing"
)

func TestRunCases(t *testing.T) {
	cases, err := os.ReadFile("testdata/goodguard/plugin_test.json")
	if err != nil {
		t.Fatal(err)
	}
	wasmPath := build(t, "testdata/goodguard")
	got, err := RunCases(wasmPath, cases)
	if err != nil {
		t.Fatal(err)
	}
	want := []CaseResult{
		{Name: "clean request", OK: true, Got: "continue"},
		{Name: "request with the word", OK: true, Got: "reject 400 content_blocked"},
		{Name: "clean stream", OK: true, Got: `"Hello" finish_reason stop`},
		{Name: "word split across events", OK: true, Got: `"a sec[blocked]" finish_reason content_filter`},
		{Name: "whole reply with the word", OK: true, Got: `"[blocked]" finish_reason content_filter`},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("case %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	// The same cases with wrong expectations fail, each saying why.
	wrong := strings.NewReplacer(`"verdict": "continue"`, `"verdict": "reject"`,
		`"code": "content_blocked"`, `"code": "other"`,
		`"text": "Hello"`, `"text": "Hi"`,
		`"stopped": true`, `"stopped": false`).Replace(string(cases))
	got, err = RunCases(wasmPath, []byte(wrong))
	if err != nil {
		t.Fatal(err)
	}
	problems := []string{
		"verdict continue, want reject",
		`code "content_blocked", want "other"`,
		`text "Hello", want "Hi"`,
		"stopped true, want false",
	}
	for i, p := range problems {
		if got[i].OK || got[i].Problem != p {
			t.Errorf("case %d: got %+v, want the problem %q", i, got[i], p)
		}
	}
}

func TestDecodeCasesErrors(t *testing.T) {
	tests := []struct {
		name, json, err string
	}{
		{"not an object", `[]`, "the file: want a JSON object"},
		{"unknown top field", `{"cases":[],"extra":1}`, `extra: unknown field "extra"`},
		{"no cases", `{"cases":[]}`, "cases: no cases"},
		{"cases not an array", `{"cases":{}}`, "cases: object is not a []json.RawMessage"},
		{"config not an object", `{"config":[1],"cases":[]}`, "config: want a JSON object"},
		{"case without name", `{"cases":[{"request":{"body":"{}"},"expect":{"verdict":"continue"}}]}`, "cases[0].name: missing"},
		{"unknown case field", `{"cases":[{"name":"a","reqest":{}}]}`, `cases[0].reqest: unknown field "reqest"`},
		{"neither request nor stream", `{"cases":[{"name":"a","expect":{"verdict":"continue"}}]}`, "cases[0]: a case has a request, a reply (stream or whole), or both"},
		{"stream and whole", `{"cases":[{"name":"a","stream":["x"],"whole":"x","expect":{"text":"x"}}]}`, "cases[0]: a case has a stream or a whole reply, not both"},
		{"whole not a string", `{"cases":[{"name":"a","whole":["x"],"expect":{"text":"x"}}]}`, "cases[0].whole: array is not a string"},
		{"bad body", `{"cases":[{"name":"a","request":{"body":"{"},"expect":{"verdict":"continue"}}]}`, "cases[0].request.body: not valid JSON"},
		{"body not a string", `{"cases":[{"name":"a","request":{"body":{}},"expect":{"verdict":"continue"}}]}`, "cases[0].request.body: object is not a string"},
		{"bad verdict", `{"cases":[{"name":"a","request":{"body":"{}"},"expect":{"verdict":"hold"}}]}`, `cases[0].expect.verdict: "hold"`},
		{"status with continue", `{"cases":[{"name":"a","request":{"body":"{}"},"expect":{"verdict":"continue","status":400}}]}`, `cases[0].expect: status and code go with the verdict "reject"`},
		{"bad status", `{"cases":[{"name":"a","request":{"body":"{}"},"expect":{"verdict":"reject","status":200}}]}`, "cases[0].expect.status: 200"},
		{"stream expect with verdict", `{"cases":[{"name":"a","stream":["x"],"expect":{"verdict":"continue"}}]}`, `cases[0].expect.verdict: unknown field "verdict"`},
		{"stream expects nothing", `{"cases":[{"name":"a","stream":["x"],"expect":{}}]}`, "cases[0].expect: expects nothing"},
		{"stream not strings", `{"cases":[{"name":"a","stream":[1],"expect":{"text":"x"}}]}`, "cases[0].stream: number is not a string"},
		{"duplicate name", `{"cases":[{"name":"a","stream":["x"],"expect":{"text":"x"}},{"name":"a","stream":["x"],"expect":{"text":"x"}}]}`, `cases[1].name: "a" is the name of an earlier case`},
		{"bad endpoint", `{"cases":[{"name":"a","request":{"body":"{}","endpoint":"chat"},"expect":{"verdict":"continue"}}]}`, `cases[0].request.endpoint: "chat"`},
		{"headers not strings", `{"cases":[{"name":"a","request":{"body":"{}","headers":{"a":1}},"expect":{"verdict":"continue"}}]}`, "cases[0].request.headers: number is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeCases([]byte(tt.json))
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
				t.Errorf("error %v, want one starting with %q", err, tt.err)
			}
		})
	}
}

func FuzzDecodeCases(f *testing.F) {
	if b, err := os.ReadFile("testdata/goodguard/plugin_test.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"cases":[{"name":"a","stream":["x"],"expect":{"text":"x"}}]}`))
	f.Add([]byte(`{"config":null,"cases":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := decodeCases(b)
		if err != nil {
			return
		}
		// A decoded file has cases, each named, each with an expectation
		// of its kind.
		if len(file.cases) == 0 {
			t.Fatal("decoded a file without cases")
		}
		for _, tc := range file.cases {
			if tc.name == "" {
				t.Fatal("decoded a case without a name")
			}
			if !tc.isStream && tc.whole == nil && tc.expect.verdict != "continue" && tc.expect.verdict != "reject" {
				t.Fatalf("request case %q with verdict %q", tc.name, tc.expect.verdict)
			}
		}
	})
}
