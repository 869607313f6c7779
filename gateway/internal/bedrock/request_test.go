package bedrock

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

var requestTests = []struct {
	name, in, want string
}{
	{"minimal",
		`{"model":"m","messages":[{"role":"user","content":"Hi"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`},
	{"system hoisted, inference config",
		`{"model":"m","stream":true,"max_tokens":5,"max_completion_tokens":64,"temperature":1.5,"top_p":0.9,"stop":["END",""],"user":"u1","seed":3,
		  "messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"developer","content":[{"type":"text","text":"No emoji."}]}]}`,
		`{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"system":[{"text":"Be brief."},{"text":"No emoji."}],` +
			`"inferenceConfig":{"maxTokens":64,"temperature":1,"topP":0.9,"stopSequences":["END"]}}`},
	{"stop string, temperature kept",
		`{"model":"m","temperature":0.2,"stop":"\n\n","messages":[{"role":"user","content":"Hi"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"inferenceConfig":{"temperature":0.2,"stopSequences":["\n\n"]}}`},
	{"image and text parts",
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"data:image/PNG;base64,iVBORw0=","detail":"low"}}]}]}`,
		`{"messages":[{"role":"user","content":[{"text":"What is it?"},{"image":{"format":"png","source":{"bytes":"iVBORw0="}}}]}]}`},
	{"tool round trip",
		`{"model":"m","tool_choice":"required","parallel_tool_calls":false,
		  "tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},{"type":"function","function":{"name":"now"}}],
		  "messages":[{"role":"user","content":"Weather?"},
		    {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"call_2","type":"function","function":{"name":"now","arguments":""}}]},
		    {"role":"tool","tool_call_id":"call_1","content":"18C"},
		    {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"noon"}]},
		    {"role":"user","content":"Thanks"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"Weather?"}]},` +
			`{"role":"assistant","content":[{"toolUse":{"toolUseId":"call_1","name":"get_weather","input":{"city":"Paris"}}},{"toolUse":{"toolUseId":"call_2","name":"now","input":{}}}]},` +
			`{"role":"user","content":[{"toolResult":{"toolUseId":"call_1","content":[{"text":"18C"}]}},{"toolResult":{"toolUseId":"call_2","content":[{"text":"noon"}]}},{"text":"Thanks"}]}],` +
			`"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","description":"Weather","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}}}}}},` +
			`{"toolSpec":{"name":"now","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"any":{}}}}`},
	{"tool_choice function",
		`{"model":"m","tool_choice":{"type":"function","function":{"name":"f"}},"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object"}},"strict":true}}],"toolChoice":{"tool":{"name":"f"}}}}`},
	{"tool_choice auto",
		`{"model":"m","tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"auto":{}}}}`},
	{"tool_choice none drops the tools",
		`{"model":"m","tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"}]}]}`},
	{"structured output and service tier",
		`{"model":"m","service_tier":"priority","response_format":{"type":"json_schema","json_schema":{"name":"city","description":"A city","strict":true,"schema":{"type":"object","properties":{"name":{"type":"string"}}}}},"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"}]}],"outputConfig":{"textFormat":{"type":"json_schema","structure":{"jsonSchema":` +
			`{"schema":"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"}}}","name":"city","description":"A city"}}}},"serviceTier":{"type":"priority"}}`},
	{"text format and auto tier write nothing",
		`{"model":"m","service_tier":"auto","response_format":{"type":"text"},"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"text":"x"}]}]}`},
	{"consecutive turns merged, empty text dropped",
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":""},{"role":"user","content":[{"type":"text","text":"b"}]},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]}`,
		`{"messages":[{"role":"user","content":[{"text":"a"},{"text":"b"}]},{"role":"assistant","content":[{"text":"no"}]}]}`},
}

func TestAppendRequest(t *testing.T) {
	for _, tc := range requestTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendRequest([]byte("x"), []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "x"+tc.want {
				t.Fatalf("got  %s\nwant x%s", got, tc.want)
			}
		})
	}
}

var requestErrorTests = []struct {
	name, in, param string
}{
	{"not JSON", `{"model":`, ""},
	{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
	{"no messages", `{"model":"m"}`, "messages"},
	{"only system", `{"model":"m","messages":[{"role":"system","content":"x"}]}`, "messages"},
	{"n", `{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "n"},
	{"logprobs", `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, "logprobs"},
	{"response_format", `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"x"}]}`, "response_format"},
	{"json_schema without schema", `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x"}},"messages":[{"role":"user","content":"x"}]}`, "response_format.json_schema.schema"},
	{"service_tier", `{"model":"m","service_tier":"scale","messages":[{"role":"user","content":"x"}]}`, "service_tier"},
	{"top_k", `{"model":"m","top_k":5,"messages":[{"role":"user","content":"x"}]}`, "top_k"},
	{"logit_bias", `{"model":"m","logit_bias":{"1":2},"messages":[{"role":"user","content":"x"}]}`, "logit_bias"},
	{"functions", `{"model":"m","functions":[],"messages":[{"role":"user","content":"x"}]}`, "functions"},
	{"audio", `{"model":"m","audio":{},"messages":[{"role":"user","content":"x"}]}`, "audio"},
	{"modalities", `{"model":"m","modalities":["text","audio"],"messages":[{"role":"user","content":"x"}]}`, "modalities"},
	{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
	{"temperature", `{"model":"m","temperature":3,"messages":[{"role":"user","content":"x"}]}`, "temperature"},
	{"top_p", `{"model":"m","top_p":1.5,"messages":[{"role":"user","content":"x"}]}`, "top_p"},
	{"stop", `{"model":"m","stop":[1],"messages":[{"role":"user","content":"x"}]}`, "stop"},
	{"image URL", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url"},
	{"image type", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AA=="}}]}]}`, "messages[0].content[0].image_url.url"},
	{"audio part", `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "messages[0].content[0].type"},
	{"function role", `{"model":"m","messages":[{"role":"function","content":"x"}]}`, "messages[0].role"},
	{"bad arguments", `{"model":"m","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
	{"tool without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
	{"tool history without tools", `{"model":"m","messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`, "tools"},
	{"none with tool history", `{"model":"m","tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"tool","tool_call_id":"c","content":"x"}]}`, "tool_choice"},
	{"required without tools", `{"model":"m","tool_choice":"required","messages":[{"role":"user","content":"x"}]}`, "tool_choice"},
	{"tool type", `{"model":"m","tools":[{"type":"web_search"}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].type"},
	{"parameters", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":[]}}],"messages":[{"role":"user","content":"x"}]}`, "tools[0].function.parameters"},
}

func TestAppendRequestRefusals(t *testing.T) {
	for _, tc := range requestErrorTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppendRequest([]byte("dst"), []byte(tc.in))
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 || e.Type != openai.TypeInvalidRequest || e.Param != tc.param {
				t.Fatalf("err = %#v, want a 400 naming %q", err, tc.param)
			}
			if string(got) != "dst" {
				t.Fatalf("dst changed: %q", got)
			}
		})
	}
}

func TestAppendPath(t *testing.T) {
	tests := []struct {
		id     string
		stream bool
		want   string
	}{
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", false, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
		{"us.amazon.nova-lite-v1:0", true, "/model/us.amazon.nova-lite-v1%3A0/converse-stream"},
		{"arn:aws:bedrock:us-east-1:123:inference-profile/us.x", false, "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Ainference-profile%2Fus.x/converse"},
	}
	for _, tc := range tests {
		if got := string(AppendPath(nil, tc.id, tc.stream)); got != tc.want {
			t.Errorf("AppendPath(%q, %v) = %q, want %q", tc.id, tc.stream, got, tc.want)
		}
	}
}
