package openai

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const chatBody = `{
  "model": "gpt-4o-mini",
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": [
      {"type": "text", "text": "Describe this image"},
      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    ]},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "42"}
  ],
  "stream": true,
  "max_tokens": 256,
  "temperature": 0.2
}`

func TestParseSuccess(t *testing.T) {
	tests := []struct {
		name string
		ep   Endpoint
		body string
		want Request
	}{
		{
			name: "chat full",
			ep:   ChatCompletions,
			body: chatBody,
			// chars: 14 + 19 + 2 = 35; 35/4 + 4*4 = 24
			want: Request{Model: []byte("gpt-4o-mini"), Stream: true, MaxTokens: 256, HasMaxTokens: true, Messages: 4, PromptChars: 35, EstimatedPromptTokens: 24},
		},
		{
			name: "chat minimal",
			ep:   ChatCompletions,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: Request{Model: []byte("m"), Messages: 1, PromptChars: 2, EstimatedPromptTokens: 4},
		},
		{
			name: "escaped model and content",
			ep:   ChatCompletions,
			body: `{"model":"a\u00e9\/b","messages":[{"role":"user","content":"\u65e5\n"}]}`,
			want: Request{Model: []byte("aé/b"), Messages: 1, PromptChars: 4, EstimatedPromptTokens: 5},
		},
		{
			name: "stream options include usage",
			ep:   ChatCompletions,
			body: `{"model":"m","messages":[{"role":"user"}],"stream":true,"stream_options":{"include_usage":true}}`,
			want: Request{Model: []byte("m"), Stream: true, HasStreamOptions: true, IncludeUsage: true, Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "stream options without include usage",
			ep:   ChatCompletions,
			body: `{"model":"m","messages":[{"role":"user"}],"stream":true,"stream_options":{}}`,
			want: Request{Model: []byte("m"), Stream: true, HasStreamOptions: true, Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "nulls are absent",
			ep:   ChatCompletions,
			body: `{"model":"m","messages":[{"role":"user","content":null}],"stream":null,"stream_options":null,"max_tokens":null}`,
			want: Request{Model: []byte("m"), Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "max completion tokens wins",
			ep:   ChatCompletions,
			body: `{"max_completion_tokens":100,"model":"m","messages":[{"role":"user"}],"max_tokens":5}`,
			want: Request{Model: []byte("m"), MaxTokens: 100, HasMaxTokens: true, Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "max tokens zero",
			ep:   ChatCompletions,
			body: `{"model":"m","messages":[{"role":"user"}],"max_tokens":0}`,
			want: Request{Model: []byte("m"), HasMaxTokens: true, Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "unchecked members may repeat and vary in case",
			ep:   ChatCompletions,
			body: `{"model":"m","user":"a","user":"b","Temperature":1,"temperature":0,"messages":[{"role":"user"}]}`,
			want: Request{Model: []byte("m"), Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "escaped key",
			ep:   ChatCompletions,
			body: `{"mod\u0065l":"m","messages":[{"role":"user"}]}`,
			want: Request{Model: []byte("m"), Messages: 1, EstimatedPromptTokens: 4},
		},
		{
			name: "completions string",
			ep:   Completions,
			body: ` {"model":"m","prompt":"Say this is a test","max_tokens":7} `,
			want: Request{Model: []byte("m"), MaxTokens: 7, HasMaxTokens: true, Messages: 1, PromptChars: 18, EstimatedPromptTokens: 4},
		},
		{
			name: "completions array",
			ep:   Completions,
			body: `{"model":"m","prompt":["abcd","efgh","ij"],"stream":true}`,
			want: Request{Model: []byte("m"), Stream: true, Messages: 3, PromptChars: 10, EstimatedPromptTokens: 2},
		},
		{
			name: "completions tokens",
			ep:   Completions,
			body: `{"model":"m","prompt":[1,2,3]}`,
			want: Request{Model: []byte("m"), Messages: 1, PromptTokens: 3, EstimatedPromptTokens: 3},
		},
		{
			name: "completions empty string",
			ep:   Completions,
			body: `{"model":"m","prompt":""}`,
			want: Request{Model: []byte("m"), Messages: 1, EstimatedPromptTokens: 1},
		},
		{
			name: "embeddings string",
			ep:   Embeddings,
			body: `{"model":"text-embedding-3-small","input":"The food was delicious","encoding_format":"float"}`,
			want: Request{Model: []byte("text-embedding-3-small"), Messages: 1, PromptChars: 22, EstimatedPromptTokens: 5},
		},
		{
			name: "embeddings token arrays",
			ep:   Embeddings,
			body: `{"model":"e","input":[[1,2],[3,4,5]]}`,
			want: Request{Model: []byte("e"), Messages: 2, PromptTokens: 5, EstimatedPromptTokens: 5},
		},
		{
			name: "embeddings array of strings",
			ep:   Embeddings,
			body: `{"model":"e","input":["a","bb"]}`,
			want: Request{Model: []byte("e"), Messages: 2, PromptChars: 3, EstimatedPromptTokens: 1},
		},
	}
	var p RequestParser
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Model: []byte("stale"), Stream: true, PromptChars: 99}
			if err := p.Parse([]byte(tc.body), tc.ep, &r); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !equalRequest(r, tc.want) {
				t.Fatalf("got  %+v (model %q)\nwant %+v (model %q)", r, r.Model, tc.want, tc.want.Model)
			}
		})
	}
}

// equalRequest compares all but Bound, which TestBoundFacts covers.
func equalRequest(a, b Request) bool {
	if string(a.Model) != string(b.Model) {
		return false
	}
	a.Model, b.Model = nil, nil
	a.Bound, b.Bound = BoundFacts{}, BoundFacts{}
	return reflect.DeepEqual(a, b)
}

func TestParseErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name  string
		ep    Endpoint
		body  string
		param string
		msg   string // exact message, or prefix when it ends with "..."
	}{
		{"empty", ChatCompletions, "", "", "We could not parse the JSON body of your request: the body is empty. (HINT: ..."},
		{"whitespace", ChatCompletions, " \n\t", "", "We could not parse the JSON body of your request: the body is empty. (HINT: ..."},
		{"bad json", ChatCompletions, `{"model":`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"trailing garbage", ChatCompletions, `{"model":"m"} x`, "", "We could not parse the JSON body of your request: unexpected tail: ..."},
		{"lenient number", ChatCompletions, `{"model":"m",` + msgs + `,"n":1-2}`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"leading zero", ChatCompletions, `{"model":"m",` + msgs + `,"n":01}`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"nan", ChatCompletions, `{"model":"m",` + msgs + `,"temperature":NaN}`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"raw control char", ChatCompletions, "{\"model\":\"m\x01\"," + msgs + "}", "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"raw control char before an escape", ChatCompletions, "{\"model\":\"m\x01\\n\"," + msgs + "}", "", "We could not parse the JSON body of your request: a string contains a raw control character ..."},
		{"bad escape", ChatCompletions, `{"model":"\q",` + msgs + `}`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"too deep", ChatCompletions, `{"model":"m",` + msgs + `,"x":` + strings.Repeat("[", 400) + strings.Repeat("]", 400) + `}`, "", "We could not parse the JSON body of your request: cannot parse JSON: ..."},
		{"array body", ChatCompletions, `[1]`, "", "the body must be a JSON object"},
		{"string body", ChatCompletions, `"x"`, "", "the body must be a JSON object"},
		{"duplicate model", ChatCompletions, `{"model":"first","model":"m",` + msgs + `}`, "model", `the member "model" appears more than once; send it once`},
		{"duplicate escaped model", ChatCompletions, `{"model":"m","mod\u0065l":"x",` + msgs + `}`, "model", `the member "model" appears more than once; send it once`},
		{"duplicate max_tokens", ChatCompletions, `{"model":"m",` + msgs + `,"max_tokens":1,"max_tokens":100000}`, "max_tokens", `the member "max_tokens" appears more than once; send it once`},
		{"duplicate stream", ChatCompletions, `{"model":"m","stream":false,` + msgs + `,"stream":true}`, "stream", `the member "stream" appears more than once; send it once`},
		{"model in upper case", ChatCompletions, `{"model":"m","MODEL":"x",` + msgs + `}`, "MODEL", `the member "MODEL" differs from a member the API reads only in case; ...`},
		{"max_tokens with the Kelvin sign", ChatCompletions, `{"model":"m",` + msgs + `,"max_to\u212aens":100000}`, "max_to\u212aens", "the member \"max_to\u212aens\" differs ..."},
		{"stream with a long s", ChatCompletions, `{"model":"m",` + msgs + `,"\u017ftream":true}`, "\u017ftream", "the member \"\u017ftream\" differs ..."},
		{"no model", ChatCompletions, `{` + msgs + `}`, "model", "'model' is a required property"},
		{"null model", ChatCompletions, `{"model":null,` + msgs + `}`, "model", "'model' is a required property"},
		{"number model", ChatCompletions, `{"model":4,` + msgs + `}`, "model", "'model' must be a string"},
		{"empty model", ChatCompletions, `{"model":"",` + msgs + `}`, "model", "'model' must be a non-empty string"},
		{"model checked first", ChatCompletions, `{"messages":1}`, "model", "'model' is a required property"},
		{"no messages", ChatCompletions, `{"model":"m"}`, "messages", "'messages' is a required property"},
		{"messages object", ChatCompletions, `{"model":"m","messages":{}}`, "messages", "'messages' must be an array"},
		{"messages empty", ChatCompletions, `{"model":"m","messages":[]}`, "messages", "'messages' must be a non-empty array"},
		{"message not object", ChatCompletions, `{"model":"m","messages":[{"role":"user"},"hi"]}`, "messages[1]", "'messages[1]' must be an object"},
		{"no role", ChatCompletions, `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "'messages[0].role' is a required property"},
		{"role number", ChatCompletions, `{"model":"m","messages":[{"role":1}]}`, "messages[0].role", "'messages[0].role' must be a string"},
		{"content number", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "'messages[0].content' must be a string, an array of content parts, or null"},
		{"part not object", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":["x"]}]}`, "messages[0].content[0]", "'messages[0].content[0]' must be an object"},
		{"text part without text", ChatCompletions, `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "'messages[0].content[0].text' must be a string"},
		{"stream string", ChatCompletions, `{"model":"m",` + msgs + `,"stream":"true"}`, "stream", "'stream' must be a boolean"},
		{"stream number", ChatCompletions, `{"model":"m",` + msgs + `,"stream":1}`, "stream", "'stream' must be a boolean"},
		{"stream options array", ChatCompletions, `{"model":"m",` + msgs + `,"stream_options":[]}`, "stream_options", "'stream_options' must be an object"},
		{"include usage string", ChatCompletions, `{"model":"m",` + msgs + `,"stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "'stream_options.include_usage' must be a boolean"},
		{"max tokens negative", ChatCompletions, `{"model":"m",` + msgs + `,"max_tokens":-1}`, "max_tokens", "'max_tokens' must be a non-negative integer"},
		{"max tokens float", ChatCompletions, `{"model":"m",` + msgs + `,"max_tokens":1.5}`, "max_tokens", "'max_tokens' must be a non-negative integer"},
		{"max tokens string", ChatCompletions, `{"model":"m",` + msgs + `,"max_tokens":"10"}`, "max_tokens", "'max_tokens' must be a non-negative integer"},
		{"max tokens huge", ChatCompletions, `{"model":"m",` + msgs + `,"max_tokens":99999999999999999999}`, "max_tokens", "'max_tokens' must be a non-negative integer"},
		{"max completion tokens", ChatCompletions, `{"model":"m",` + msgs + `,"max_completion_tokens":true}`, "max_completion_tokens", "'max_completion_tokens' must be a non-negative integer"},
		{"no prompt", Completions, `{"model":"m"}`, "prompt", "'prompt' is a required property"},
		{"prompt number", Completions, `{"model":"m","prompt":3}`, "prompt", "'prompt' must be a string, an array of strings, an array of tokens, or an array of token arrays"},
		{"prompt mixed", Completions, `{"model":"m","prompt":["a",1]}`, "prompt", "'prompt' must be a string, an array of strings, an array of tokens, or an array of token arrays"},
		{"prompt bad token array", Completions, `{"model":"m","prompt":[[1],["x"]]}`, "prompt", "'prompt' must be a string, an array of strings, an array of tokens, or an array of token arrays"},
		{"prompt empty array", Completions, `{"model":"m","prompt":[]}`, "prompt", "'prompt' must not be an empty array"},
		{"chat body on completions", Completions, `{"model":"m",` + msgs + `}`, "prompt", "'prompt' is a required property"},
		{"no input", Embeddings, `{"model":"m","prompt":"x"}`, "input", "'input' is a required property"},
		{"input object", Embeddings, `{"model":"m","input":{}}`, "input", "'input' must be a string, an array of strings, an array of tokens, or an array of token arrays"},
		{"input nested strings", Embeddings, `{"model":"m","input":[["a"]]}`, "input", "'input' must be a string, an array of strings, an array of tokens, or an array of token arrays"},
	}
	var p RequestParser
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Request{Model: []byte("stale"), Messages: 3}
			err := p.Parse([]byte(tc.body), tc.ep, &r)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Status != 400 || e.Type != TypeInvalidRequest || e.Code != "" {
				t.Fatalf("got %+v", *e)
			}
			if e.Param != tc.param {
				t.Errorf("param = %q, want %q", e.Param, tc.param)
			}
			if prefix, ok := strings.CutSuffix(tc.msg, "..."); ok {
				if !strings.HasPrefix(e.Message, prefix) {
					t.Errorf("message = %q, want prefix %q", e.Message, prefix)
				}
			} else if e.Message != tc.msg {
				t.Errorf("message = %q, want %q", e.Message, tc.msg)
			}
			// Errors found before any field is set leave r reset.
			if (tc.param == "" || tc.param == "model") && !equalRequest(r, Request{}) {
				t.Errorf("request not reset: %+v", r)
			}
		})
	}
}

func TestParseUnknownEndpoint(t *testing.T) {
	var p RequestParser
	var r Request
	err := p.Parse([]byte(`{"model":"m"}`), Endpoint(0), &r)
	var e *Error
	if !errors.As(err, &e) || e.Status != 500 {
		t.Fatalf("err = %v", err)
	}
}

func TestParseModelBorrowsFromParser(t *testing.T) {
	var p RequestParser
	var r Request
	body := []byte(`{"model":"m1","messages":[{"role":"user"}]}`)
	if err := p.Parse(body, ChatCompletions, &r); err != nil {
		t.Fatal(err)
	}
	// The parser copies the body: mutating it must not change Model.
	copy(body[10:], "zz")
	if string(r.Model) != "m1" {
		t.Fatalf("Model = %q", r.Model)
	}
}

func TestEndpointString(t *testing.T) {
	if ChatCompletions.String() != "/v1/chat/completions" || Completions.String() != "/v1/completions" ||
		Embeddings.String() != "/v1/embeddings" || Endpoint(9).String() != "unknown" {
		t.Fatal("Endpoint.String")
	}
}

func TestCheckMembers(t *testing.T) {
	members := [][]byte{[]byte("model"), []byte("max_tokens")}
	tests := []struct {
		body, param string
	}{
		{`{"model":"a","max_tokens":1,"other":1,"other":2,"Other":3}`, ""},
		{`{"model":"a","model":"b"}`, "model"},
		{`{"model":"a","mod\u0065l":"b"}`, "model"},
		{`{"Model":"a","model":"b"}`, "Model"},
		{`{"max_tokens":1,"max_to\u212aens":2}`, "max_to\u212aens"},
	}
	for _, tt := range tests {
		var p RequestParser
		v, err := p.p.Parse(tt.body)
		if err != nil {
			t.Fatal(err)
		}
		obj, _ := v.Object()
		err = CheckMembers(obj, members)
		var e *Error
		switch {
		case tt.param == "" && err != nil:
			t.Errorf("%s: %v", tt.body, err)
		case tt.param != "" && (!errors.As(err, &e) || e.Status != 400 || e.Param != tt.param):
			t.Errorf("%s: %v, want a 400 naming %q", tt.body, err, tt.param)
		}
	}
}
