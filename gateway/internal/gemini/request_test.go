package gemini

import (
	"encoding/json"
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
	want string // exact Gemini body
}{
	{
		name: "minimal",
		in:   `{"model":"gemini-x","messages":[{"role":"user","content":"Hello"}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}`,
	},
	{
		name: "generation config; max_completion_tokens wins over max_tokens",
		in: `{"model":"m","max_completion_tokens":50,"max_tokens":10,"n":1,"temperature":1.5,"top_p":0.9,"top_k":40,
				"seed":7,"presence_penalty":0.5,"frequency_penalty":-0.25,"stop":["END","","\n\n"],"stream":true,
				"messages":[{"role":"user","content":"x"}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"candidateCount":1,"maxOutputTokens":50,` +
			`"temperature":1.5,"topP":0.9,"presencePenalty":0.5,"frequencyPenalty":-0.25,"topK":40,"seed":7,"stopSequences":["END","\n\n"]}}`,
	},
	{
		name: "stop as a string",
		in:   `{"model":"m","stop":"###","messages":[{"role":"user","content":"x"}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"stopSequences":["###"]}}`,
	},
	{
		name: "system and developer messages become systemInstruction, wherever they stand",
		in: `{"model":"m","messages":[
				{"role":"system","content":"You are terse."},
				{"role":"user","content":"hi"},
				{"role":"developer","content":[{"type":"text","text":"Answer in French."},{"type":"text","text":""}]},
				{"role":"system","content":null}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],` +
			`"systemInstruction":{"parts":[{"text":"You are terse."},{"text":"Answer in French."}]}}`,
	},
	{
		name: "user parts: text, data URL image, image URLs, audio, file",
		in: `{"model":"m","messages":[{"role":"user","content":[
				{"type":"text","text":"What is this?"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
				{"type":"image_url","image_url":{"url":"https://example.com/cat.JPG?size=2"}},
				{"type":"image_url","image_url":"gs://bucket/dog.webp"},
				{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}}]}]}`,
		want: `{"contents":[{"role":"user","parts":[` +
			`{"text":"What is this?"},` +
			`{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},` +
			`{"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/cat.JPG?size=2"}},` +
			`{"fileData":{"mimeType":"image/webp","fileUri":"gs://bucket/dog.webp"}},` +
			`{"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}},` +
			`{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]}`,
	},
	{
		name: "tool call turn and tool results matched by name",
		in: `{"model":"m","messages":[
				{"role":"user","content":"Weather in SF and NYC?"},
				{"role":"assistant","content":"Let me check.","tool_calls":[
					{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"SF\", \"n\": [1, 2.5e3, true, null]}"}},
					{"id":"call_2","type":"function","function":{"name":"get_time","arguments":""}}]},
				{"role":"tool","tool_call_id":"call_2","content":"12:00"},
				{"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 18}"},
				{"role":"assistant","content":"SF 18C at noon."},
				{"role":"user","content":"thanks"}]}`,
		want: `{"contents":[` +
			`{"role":"user","parts":[{"text":"Weather in SF and NYC?"}]},` +
			`{"role":"model","parts":[{"text":"Let me check."},` +
			`{"functionCall":{"name":"get_weather","args":{"city":"SF","n":[1,2.5e3,true,null]}},"thoughtSignature":"skip_thought_signature_validator"},` +
			`{"functionCall":{"name":"get_time","args":{}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp":18}}},` +
			`{"functionResponse":{"name":"get_time","response":{"output":"12:00"}}}]},` +
			`{"role":"model","parts":[{"text":"SF 18C at noon."}]},` +
			`{"role":"user","parts":[{"text":"thanks"}]}]}`,
	},
	{
		// Gemini pairs results with calls by name and order: the second
		// call's result sent first must still answer the second call.
		name: "tool results go in the order of their calls, not of the tool messages",
		in: `{"model":"m","messages":[{"role":"user","content":"q"},
				{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
					{"id":"b","type":"function","function":{"name":"f","arguments":"{\"x\":2}"}}]},
				{"role":"tool","tool_call_id":"b","content":"two"},{"role":"tool","tool_call_id":"a","content":"one"},
				{"role":"user","content":"go"},
				{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"g","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"c","content":"three"}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"q"}]},` +
			`{"role":"model","parts":[{"functionCall":{"name":"f","args":{"x":1}},"thoughtSignature":"skip_thought_signature_validator"},` +
			`{"functionCall":{"name":"f","args":{"x":2}}}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"output":"one"}}},` +
			`{"functionResponse":{"name":"f","response":{"output":"two"}}},{"text":"go"}]},` +
			`{"role":"model","parts":[{"functionCall":{"name":"g","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},` +
			`{"role":"user","parts":[{"functionResponse":{"name":"g","response":{"output":"three"}}}]}]}`,
	},
	{
		name: "consecutive turns of one role merge; empty messages dropped",
		in: `{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]},
				{"role":"assistant","content":""},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]},{"role":"model","parts":[{"text":"no"}]}]}`,
	},
	{
		name: "tools, schema rewritten, tool_choice required",
		in: `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required","parallel_tool_calls":false,"tools":[
				{"type":"function","function":{"name":"get_weather","description":"Weather.","strict":true,"parameters":{
					"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,
					"properties":{"city":{"type":"string","description":"City"},"unit":{"type":["string","null"],"enum":["c","f"]},
					"days":{"type":"array","items":{"type":"integer","minimum":1},"maxItems":7}},"required":["city"]}}},
				{"type":"function","function":{"name":"now","parameters":{"type":"object","properties":{}}}},
				{"type":"function","function":{"name":"ping"}}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[` +
			`{"name":"get_weather","description":"Weather.","parameters":{"type":"OBJECT","properties":{"city":{"type":"STRING","description":"City"},` +
			`"unit":{"type":"STRING","nullable":true,"enum":["c","f"]},"days":{"type":"ARRAY","items":{"type":"INTEGER","minimum":1},"maxItems":7}},"required":["city"]}},` +
			`{"name":"now"},{"name":"ping"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`,
	},
	{
		name: "tool_choice naming a function; none; auto",
		in: `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"f"}},
				"tools":[{"type":"function","function":{"name":"f"}}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}],` +
			`"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}}`,
	},
	{
		name: "tool_choice none without tools says nothing",
		in:   `{"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"none"}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
	},
	{
		name: "response_format json_object",
		in:   `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json"}}`,
	},
	{
		name: "response_format json_schema",
		in: `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"r","strict":true,
				"schema":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"number"}]}},"required":["a"],"additionalProperties":false}}}}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"responseMimeType":"application/json","responseSchema":` +
			`{"type":"OBJECT","properties":{"a":{"anyOf":[{"type":"STRING"},{"type":"NUMBER"}]}},"required":["a"]}}}`,
	},
	{
		name: "ignored members; text response_format",
		in: `{"model":"m","messages":[{"role":"user","content":"x","name":"bob"}],"user":"u1","store":true,"metadata":{"a":"b"},
				"stream_options":{"include_usage":true},"logprobs":false,"top_logprobs":0,"logit_bias":{},"modalities":["text"],
				"response_format":{"type":"text"},"reasoning_effort":"low","service_tier":"auto"}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`,
	},
	{
		name: "escapes re-encoded",
		in:   `{"model":"m","messages":[{"role":"user","content":"a\u2028b\u0001\"\\ \ud83d\ude00"}]}`,
		want: `{"contents":[{"role":"user","parts":[{"text":"a\u2028b\u0001\"\\ 😀"}]}]}`,
	},
}

func TestAppendRequest(t *testing.T) {
	for _, tc := range requestTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendRequest([]byte("prefix:"), []byte(tc.in))
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			body, ok := strings.CutPrefix(string(got), "prefix:")
			if !ok {
				t.Fatalf("dst not extended: %q", got)
			}
			if body != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", body, tc.want)
			}
			if !json.Valid([]byte(body)) {
				t.Fatalf("invalid JSON: %s", body)
			}
		})
	}
}

func TestAppendRequestRefusals(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"x"}]`
	tests := []struct {
		name, in, param string
	}{
		{"not JSON", `{"model":`, ""},
		{"not an object", `[]`, ""},
		{"no messages", `{"model":"m"}`, "messages"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages"},
		{"only system", `{"model":"m","messages":[{"role":"system","content":"s"}]}`, "messages"},
		{"n 2", `{"n":2,` + user + `}`, "n"},
		{"logprobs", `{"logprobs":true,` + user + `}`, "logprobs"},
		{"top_logprobs", `{"top_logprobs":2,` + user + `}`, "top_logprobs"},
		{"logit_bias", `{"logit_bias":{"1":2},` + user + `}`, "logit_bias"},
		{"functions", `{"functions":[],` + user + `}`, "functions"},
		{"function_call", `{"function_call":"auto",` + user + `}`, "function_call"},
		{"audio", `{"audio":{},` + user + `}`, "audio"},
		{"modalities audio", `{"modalities":["text","audio"],` + user + `}`, "modalities"},
		{"web search", `{"web_search_options":{},` + user + `}`, "web_search_options"},
		{"temperature", `{"temperature":3,` + user + `}`, "temperature"},
		{"top_p", `{"top_p":-1,` + user + `}`, "top_p"},
		{"top_k", `{"top_k":0,` + user + `}`, "top_k"},
		{"seed", `{"seed":1e12,` + user + `}`, "seed"},
		{"max_tokens", `{"max_tokens":0,` + user + `}`, "max_tokens"},
		{"stream", `{"stream":"yes",` + user + `}`, "stream"},
		{"stop", `{"stop":[1],` + user + `}`, "stop"},
		{"role function", `{"messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
		{"role unknown", `{"messages":[{"role":"bot","content":"x"}]}`, "messages[0].role"},
		{"image in system", `{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"x"}}]},{"role":"user","content":"x"}]}`, "messages[0].content[0].type"},
		{"image URL without extension", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/img"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"image ftp", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"data URL not base64", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"data URL not image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain;base64,abc"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"audio format", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"ogg"}}]}]}`, "messages[0].content[0].input_audio.format"},
		{"file by id", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f"}}]}]}`, "messages[0].content[0].file.file_data"},
		{"unknown part", `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages[0].content[0].type"},
		{"tool result without call", `{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c9","content":"r"}]}`, "messages[1].tool_call_id"},
		{"tool result without id", `{"messages":[{"role":"tool","content":"r"}]}`, "messages[0].tool_call_id"},
		{"bad arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"array arguments", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{"call without id", `{"messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].id"},
		{"assistant function_call", `{"messages":[{"role":"assistant","function_call":{}}]}`, "messages[0].function_call"},
		{"tool type", `{"tools":[{"type":"code_interpreter"}],` + user + `}`, "tools[0].type"},
		{"tool without name", `{"tools":[{"type":"function","function":{}}],` + user + `}`, "tools[0].function.name"},
		{"schema $ref", `{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/x"}}}}}],` + user + `}`, "tools[0].function.parameters.properties.a.$ref"},
		{"schema oneOf", `{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"oneOf":[]}}}}}],` + user + `}`, "tools[0].function.parameters.properties.a.oneOf"},
		{"schema two types", `{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":["string","number"]}}}}}],` + user + `}`, "tools[0].function.parameters.properties.a.type"},
		{"schema additionalProperties schema", `{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}}}],` + user + `}`, "tools[0].function.parameters.additionalProperties"},
		{"schema numeric enum", `{"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"integer","enum":[1,2]}}},` + user + `}`, "response_format.json_schema.schema.enum"},
		{"schema const", `{"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"k":{"const":"x"}}}}},` + user + `}`, "response_format.json_schema.schema.properties.k.const"},
		{"json_schema missing", `{"response_format":{"type":"json_schema"},` + user + `}`, "response_format.json_schema"},
		{"response_format type", `{"response_format":{"type":"xml"},` + user + `}`, "response_format.type"},
		{"tool_choice required without tools", `{"tool_choice":"required",` + user + `}`, "tool_choice"},
		{"tool_choice bad", `{"tool_choice":"sometimes",` + user + `}`, "tool_choice"},
		{"tool_choice function without name", `{"tool_choice":{"type":"function","function":{}},"tools":[{"type":"function","function":{"name":"f"}}],` + user + `}`, "tool_choice.function.name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := AppendRequest(dst, []byte(tc.in))
			var oe *openai.Error
			if !errors.As(err, &oe) {
				t.Fatalf("err = %v (%T), want *openai.Error; body %s", err, err, got)
			}
			if oe.Status != 400 || oe.Type != openai.TypeInvalidRequest || oe.Param != tc.param || oe.Message == "" {
				t.Fatalf("error = %+v, want 400 invalid_request_error param %q", oe, tc.param)
			}
			if string(got) != "keep" {
				t.Fatalf("dst changed on error: %q", got)
			}
		})
	}
}
