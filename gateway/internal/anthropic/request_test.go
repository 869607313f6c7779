package anthropic

import (
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

// requestTests are translations checked byte for byte; their inputs also
// seed FuzzAppendRequest.
var requestTests = []struct {
	name string
	in   string // OpenAI chat.completions body
	def  int    // defaultMaxTokens
	want string // exact Anthropic body
}{
	{
		name: "minimal, default max_tokens",
		in:   `{"model":"claude-x","messages":[{"role":"user","content":"Hello"}]}`,
		def:  1000,
		want: `{"model":"claude-x","max_tokens":1000,"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`,
	},
	{
		name: "default max_tokens <= 0 means DefaultMaxTokens",
		in:   `{"model":"claude-x","messages":[{"role":"user","content":"Hello"}]}`,
		want: `{"model":"claude-x","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`,
	},
	{
		name: "max_completion_tokens wins over max_tokens",
		in:   `{"model":"m","max_completion_tokens":50,"max_tokens":10,"messages":[{"role":"user","content":"x"}]}`,
		want: `{"model":"m","max_tokens":50,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
	{
		name: "system and developer messages hoisted and joined, string and parts",
		in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"system","content":"You are terse."},
				{"role":"user","content":"hi"},
				{"role":"developer","content":[{"type":"text","text":"Answer in French."},{"type":"text","text":""},{"type":"text","text":"No \"emoji\"."}]},
				{"role":"system","content":""},
				{"role":"system","content":null}]}`,
		want: `{"model":"m","max_tokens":5,"system":"You are terse.\nAnswer in French.\nNo \"emoji\".","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
	},
	{
		name: "user parts: text, data URL image, https image, image_url as string",
		in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
				{"type":"text","text":"What is this?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg"}},
				{"type":"image_url","image_url":"HTTP://example.com/dog.webp"},
				{"type":"image_url","image_url":{"url":"data:IMAGE/JPEG;charset=x;BASE64,/9j/4AAQ"}}]}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` +
			`{"type":"text","text":"What is this?"},` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},` +
			`{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},` +
			`{"type":"image","source":{"type":"url","url":"HTTP://example.com/dog.webp"}},` +
			`{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}}]}]}`,
	},
	{
		name: "tool call turn and tool results",
		in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"user","content":"Weather in SF and NYC?"},
				{"role":"assistant","content":"Let me check.","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"SF\", \"n\": [1, 2.5e3, true, null]}"}},
					{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"NYC\"}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"18C"},
				{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"25C"},{"type":"text","text":" humid"}]},
				{"role":"assistant","content":"SF 18C, NYC 25C."}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"Weather in SF and NYC?"}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"Let me check."},` +
			`{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"SF","n":[1,2.5e3,true,null]}},` +
			`{"type":"tool_use","id":"call_2","name":"get_weather","input":{"city":"NYC"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"18C"},` +
			`{"type":"tool_result","tool_use_id":"call_2","content":[{"type":"text","text":"25C"},{"type":"text","text":" humid"}]}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"SF 18C, NYC 25C."}]}]}`,
	},
	{
		name: "assistant with null content, empty and missing arguments",
		in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"a","type":"function","function":{"name":"noargs","arguments":""}},
					{"id":"b","function":{"name":"noargs2"}}]},
				{"role":"tool","tool_call_id":"a","content":""},
				{"role":"tool","tool_call_id":"b"}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"noargs","input":{}},{"type":"tool_use","id":"b","name":"noargs2","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b"}]}]}`,
	},
	{
		name: "tool results then a user message: one user turn, results first",
		in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},
				{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"a","content":"done"},
				{"role":"user","content":"and now?"}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"done"},{"type":"text","text":"and now?"}]}]}`,
	},
	{
		name: "a user message before a tool message still puts the result first",
		in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},
				{"role":"user","content":"note"},
				{"role":"tool","tool_call_id":"a","content":"r"}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"r"},{"type":"text","text":"note"}]}]}`,
	},
	{
		name: "consecutive same-role messages merged, empty ones dropped",
		in: `{"model":"m","max_tokens":5,"messages":[
				{"role":"user","content":"one"},{"role":"user","content":[{"type":"text","text":"two"}]},
				{"role":"assistant","content":""},
				{"role":"user","content":"three"},
				{"role":"assistant","content":"a1"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]},
				{"role":"user","content":null}]}`,
		want: `{"model":"m","max_tokens":5,"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two"},{"type":"text","text":"three"}]},` +
			`{"role":"assistant","content":[{"type":"text","text":"a1"},{"type":"text","text":"no"}]}]}`,
	},
	{
		name: "sampling: stop string, temperature capped, top_p, top_k, stream, user",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop":"END","temperature":1.7,"top_p":0.9,"top_k":40,"stream":true,"stream_options":{"include_usage":true},"user":"user-42"}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stop_sequences":["END"],"temperature":1,"top_p":0.9,"top_k":40,"stream":true,"metadata":{"user_id":"user-42"}}`,
	},
	{
		name: "stop array, temperature kept as written, stream false",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"stop":["a","","\n\nHuman:"],"temperature":0.25,"stream":false}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"stop_sequences":["a","\n\nHuman:"],"temperature":0.25}`,
	},
	{
		name: "tools and tool_choice auto",
		in: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],
				"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}},
				         {"type":"function","function":{"name":"now"}}],
				"tool_choice":"auto"}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],` +
			`"tools":[{"name":"get_weather","description":"Get the weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},` +
			`{"name":"now","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto"}}`,
	},
	{
		name: "tool_choice required, parallel off",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","parallel_tool_calls":false}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
	},
	{
		name: "tool_choice naming a function",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"f"}}`,
	},
	{
		name: "tool_choice none, and parallel off alone",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","parallel_tool_calls":false}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`,
	},
	{
		name: "parallel off without tool_choice",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
	},
	{
		name: "tool_choice auto or none without tools is dropped",
		in:   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tool_choice":"none","tools":[]}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
	{
		name: "ignored members; the last duplicate key wins",
		in: `{"model":"first","model":"m","max_tokens":5,"messages":[{"role":"user","content":"x","name":"alice"}],
				"frequency_penalty":0.5,"presence_penalty":0.1,"seed":7,"service_tier":"auto","store":true,"metadata":{"a":"b"},
				"n":1,"logprobs":false,"top_logprobs":null,"response_format":{"type":"text"},"logit_bias":{},"modalities":["text"],
				"reasoning_effort":"low","prediction":{"type":"content","content":"x"},"unknown_future_field":[1,2]}`,
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
	},
	{
		name: "strings are re-escaped: control characters, U+2028, invalid UTF-8",
		in:   "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0001b\\u2028c\xffd\\\"e\\\\f\\/g\"}]}",
		want: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a\u0001b\u2028c\ufffdd\"e\\f/g"}]}]}`,
	},
}

func TestAppendRequest(t *testing.T) {
	for _, tc := range requestTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendRequest([]byte("prefix:"), []byte(tc.in), tc.def)
			if err != nil {
				t.Fatalf("AppendRequest: %v", err)
			}
			body, ok := strings.CutPrefix(string(got), "prefix:")
			if !ok {
				t.Fatalf("dst prefix lost: %q", got)
			}
			if body != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", body, tc.want)
			}
			var r anthropicRequest
			decodeStrict(t, []byte(body), &r)
			if err := checkAnthropicRequest(&r); err != nil {
				t.Errorf("not a valid Messages API request: %v", err)
			}
		})
	}
}

const userMsg = `{"role":"user","content":"x"}`

// requestErrorTests are refused requests; their inputs also seed
// FuzzAppendRequest.
var requestErrorTests = []struct {
	name  string
	in    string
	param string
	msg   string // a substring of the message
}{
	{"not JSON", `{"model":`, "", "could not parse the JSON body"},
	{"bad number", `{"model":"m","messages":[` + userMsg + `],"temperature":nan}`, "", "could not parse"},
	{"not an object", `[1]`, "", "must be a JSON object"},
	{"no model", `{"messages":[` + userMsg + `]}`, "model", "required"},
	{"empty model", `{"model":"","messages":[` + userMsg + `]}`, "model", "non-empty"},
	{"no messages", `{"model":"m"}`, "messages", "required"},
	{"empty messages", `{"model":"m","messages":[]}`, "messages", "non-empty"},
	{"only system", `{"model":"m","messages":[{"role":"system","content":"s"}]}`, "messages", "at least one"},
	{"only empty", `{"model":"m","messages":[{"role":"user","content":""}]}`, "messages", "at least one"},
	{"system content number", `{"model":"m","messages":[{"role":"system","content":5},` + userMsg + `]}`, "messages[0].content", "text parts"},
	{"message not object", `{"model":"m","messages":[1]}`, "messages[0]", "object"},
	{"no role", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", "required"},
	{"function role", `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].role", "deprecated"},
	{"unknown role", `{"model":"m","messages":[` + userMsg + `,{"role":"robot","content":"x"}]}`, "messages[1].role", `"robot"`},
	{"content number", `{"model":"m","messages":[{"role":"user","content":5}]}`, "messages[0].content", "string"},
	{"part not object", `{"model":"m","messages":[{"role":"user","content":["x"]}]}`, "messages[0].content[0]", "object"},
	{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]}`, "messages[0].content[0].type", `"input_audio"`},
	{"file part", `{"model":"m","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`, "messages[0].content[0].type", `"file"`},
	{"text part without text", `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text", "string"},
	{"image without url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url", "required"},
	{"image ftp url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url", "http(s)"},
	{"image data URL not base64", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url", "base64"},
	{"image data URL no comma", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64"}}]}]}`, "messages[0].content[0].image_url.url", "comma"},
	{"image media type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AAAA"}}]}]}`, "messages[0].content[0].image_url.url", `"image/bmp"`},
	{"image in system", `{"model":"m","messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]},` + userMsg + `]}`, "messages[0].content[0].type", "only text"},
	{"image in assistant", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[1].content[0].type", "assistant"},
	{"image in tool", `{"model":"m","messages":[` + userMsg + `,{"role":"tool","tool_call_id":"a","content":[{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, "messages[1].content[0].type", "only text"},
	{"invalid arguments", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"city\":"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "not valid JSON"},
	{"arguments not object", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "JSON object"},
	{"arguments not string", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":{}}}]}]}`, "messages[1].tool_calls[0].function.arguments", "string"},
	{"arguments trailing garbage", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{} x"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "not valid JSON"},
	{"tool call without id", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[1].tool_calls[0].id", "required"},
	{"tool call without name", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"arguments":"{}"}}]}]}`, "messages[1].tool_calls[0].function.name", "required"},
	{"tool call custom type", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","tool_calls":[{"id":"a","type":"custom","custom":{"name":"f","input":"x"}}]}]}`, "messages[1].tool_calls[0].type", "function"},
	{"assistant function_call", `{"model":"m","messages":[` + userMsg + `,{"role":"assistant","function_call":{"name":"f","arguments":"{}"}}]}`, "messages[1].function_call", "deprecated"},
	{"tool without tool_call_id", `{"model":"m","messages":[` + userMsg + `,{"role":"tool","content":"r"}]}`, "messages[1].tool_call_id", "required"},
	{"n 2", `{"model":"m","messages":[` + userMsg + `],"n":2}`, "n", "must be 1"},
	{"logprobs", `{"model":"m","messages":[` + userMsg + `],"logprobs":true}`, "logprobs", "log probabilities"},
	{"top_logprobs", `{"model":"m","messages":[` + userMsg + `],"top_logprobs":3}`, "top_logprobs", "log probabilities"},
	{"json_schema", `{"model":"m","messages":[` + userMsg + `],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}`, "response_format", `"json_schema"`},
	{"json_object", `{"model":"m","messages":[` + userMsg + `],"response_format":{"type":"json_object"}}`, "response_format", `"json_object"`},
	{"logit_bias", `{"model":"m","messages":[` + userMsg + `],"logit_bias":{"50256":-100}}`, "logit_bias", "not supported"},
	{"functions", `{"model":"m","messages":[` + userMsg + `],"functions":[{"name":"f"}]}`, "functions", "use 'tools'"},
	{"function_call", `{"model":"m","messages":[` + userMsg + `],"function_call":"auto"}`, "function_call", "tool_choice"},
	{"audio", `{"model":"m","messages":[` + userMsg + `],"audio":{"voice":"alloy","format":"wav"}}`, "audio", "audio"},
	{"modalities audio", `{"model":"m","messages":[` + userMsg + `],"modalities":["text","audio"]}`, "modalities", `"text"`},
	{"web search", `{"model":"m","messages":[` + userMsg + `],"web_search_options":{}}`, "web_search_options", "not supported"},
	{"max_tokens zero", `{"model":"m","messages":[` + userMsg + `],"max_tokens":0}`, "max_tokens", "positive"},
	{"max_completion_tokens string", `{"model":"m","messages":[` + userMsg + `],"max_completion_tokens":"5"}`, "max_completion_tokens", "positive"},
	{"temperature negative", `{"model":"m","messages":[` + userMsg + `],"temperature":-1}`, "temperature", "between"},
	{"top_p above 1", `{"model":"m","messages":[` + userMsg + `],"top_p":1.5}`, "top_p", "between"},
	{"top_k zero", `{"model":"m","messages":[` + userMsg + `],"top_k":0}`, "top_k", "positive"},
	{"stop number", `{"model":"m","messages":[` + userMsg + `],"stop":5}`, "stop", "string"},
	{"stop array of numbers", `{"model":"m","messages":[` + userMsg + `],"stop":["a",5]}`, "stop", "stop[1]"},
	{"stream string", `{"model":"m","messages":[` + userMsg + `],"stream":"yes"}`, "stream", "boolean"},
	{"user number", `{"model":"m","messages":[` + userMsg + `],"user":5}`, "user", "string"},
	{"tools not array", `{"model":"m","messages":[` + userMsg + `],"tools":{}}`, "tools", "array"},
	{"tool custom type", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, "tools[0].type", `"custom"`},
	{"tool without function", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function"}]}`, "tools[0].function", "required"},
	{"tool without name", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"description":"d"}}]}`, "tools[0].function.name", "required"},
	{"tool parameters array", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters", "JSON Schema"},
	{"tool description number", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f","description":1}}]}`, "tools[0].function.description", "string"},
	{"tool_choice unknown string", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"}`, "tool_choice", `"always"`},
	{"tool_choice allowed_tools", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools"}}`, "tool_choice.type", `"allowed_tools"`},
	{"tool_choice without name", `{"model":"m","messages":[` + userMsg + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{}}}`, "tool_choice.function.name", "required"},
	{"tool_choice required without tools", `{"model":"m","messages":[` + userMsg + `],"tool_choice":"required"}`, "tool_choice", "requires 'tools'"},
	{"parallel_tool_calls string", `{"model":"m","messages":[` + userMsg + `],"parallel_tool_calls":"no"}`, "parallel_tool_calls", "boolean"},
}

func TestAppendRequestErrors(t *testing.T) {
	for _, tc := range requestErrorTests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendRequest(dst, []byte(tc.in), 100)
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *openai.Error; output %s", err, err, got)
			}
			if e.Status != 400 || e.Type != openai.TypeInvalidRequest || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %d %s param %q: %s\nwant 400 invalid_request_error param %q, message containing %q", e.Status, e.Type, e.Param, e.Message, tc.param, tc.msg)
			}
			if string(got) != "keep" {
				t.Errorf("dst changed to %q", got)
			}
		})
	}
}
