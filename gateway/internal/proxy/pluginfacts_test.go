package proxy

import (
	"bytes"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/responses"
	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// factsCorpus are bodies the gateway accepts, per endpoint, with the facts
// plugins must be told about them.
var factsCorpus = []struct {
	name string
	ep   openai.Endpoint
	body string
	want wasmhost.RequestFacts
}{
	{"chat", openai.ChatCompletions, `{"model":"gpt-4o","messages":[{"role":"user","content":"hello there"}]}`,
		wasmhost.RequestFacts{Model: []byte("gpt-4o"), MaxTokens: -1, Messages: 1, PromptChars: 11, PromptTokens: 6, Bound: bound(`{"model":"gpt-4o","messages":[{"role":"user","content":"hello there"}]}`, 0, 0)}},
	{"chat stream and max_tokens", openai.ChatCompletions, `{"model":"m","stream":true,"max_tokens":7,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		wasmhost.RequestFacts{Model: []byte("m"), Stream: true, MaxTokens: 7, Messages: 2, PromptChars: 12, PromptTokens: 11, Bound: bound(`{"model":"m","stream":true,"max_tokens":7,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, -1, 1)}},
	{"max_completion_tokens wins", openai.ChatCompletions, `{"max_completion_tokens":9,"model":"m","max_tokens":7,"messages":[{"role":"user","content":null}]}`,
		wasmhost.RequestFacts{Model: []byte("m"), MaxTokens: 9, Messages: 1, PromptTokens: 4, Bound: bound(`{"max_completion_tokens":9,"model":"m","max_tokens":7,"messages":[{"role":"user","content":null}]}`, 0, 0)}},
	{"max_tokens zero", openai.ChatCompletions, `{"model":"m","max_tokens":0,"stream":false,"messages":[{"role":"user"}]}`,
		wasmhost.RequestFacts{Model: []byte("m"), MaxTokens: 0, Messages: 1, PromptTokens: 4, Bound: bound(`{"model":"m","max_tokens":0,"stream":false,"messages":[{"role":"user"}]}`, 0, 0)}},
	{"escapes", openai.ChatCompletions, `{"model":"m\u00e9\/x","messages":[{"role":"user","content":"\ud83d\ude00 \ud800 \ud800\u0041"}]}`,
		wasmhost.RequestFacts{Model: []byte("mé/x"), MaxTokens: -1, Messages: 1, PromptChars: 15, PromptTokens: 7, Bound: bound(`{"model":"m\u00e9\/x","messages":[{"role":"user","content":"\ud83d\ude00 \ud800 \ud800\u0041"}]}`, 0, 0)}},
	{"first of repeated content", openai.ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"ab","content":"abcdefgh"}]}`,
		wasmhost.RequestFacts{Model: []byte("m"), MaxTokens: -1, Messages: 1, PromptChars: 2, PromptTokens: 4, Bound: bound(`{"model":"m","messages":[{"role":"user","content":"ab","content":"abcdefgh"}]}`, 0, 0)}},
	{"completion strings", openai.Completions, `{"model":"m","prompt":["abcd","efgh"],"max_tokens":3}`,
		wasmhost.RequestFacts{Model: []byte("m"), MaxTokens: 3, Messages: 2, PromptChars: 8, PromptTokens: 2, Bound: bound(`{"model":"m","prompt":["abcd","efgh"],"max_tokens":3}`, 0, 0)}},
	{"completion tokens", openai.Completions, `{"model":"m","prompt":[1,2,3,4,5]}`,
		wasmhost.RequestFacts{Model: []byte("m"), MaxTokens: -1, Messages: 1, PromptTokens: 5, Bound: bound(`{"model":"m","prompt":[1,2,3,4,5]}`, 0, 0)}},
	{"embedding token arrays", openai.Embeddings, `{"model":"e","input":[[1,2],[3]]}`,
		wasmhost.RequestFacts{Model: []byte("e"), MaxTokens: -1, Messages: 2, PromptTokens: 3, Bound: bound(`{"model":"e","input":[[1,2],[3]]}`, 0, 0)}},
	{"embedding string", openai.Embeddings, `{"model":"e","input":"some text here"}`,
		wasmhost.RequestFacts{Model: []byte("e"), MaxTokens: -1, Messages: 1, PromptChars: 14, PromptTokens: 3, Bound: bound(`{"model":"e","input":"some text here"}`, 0, 0)}},
	{"anthropic", endpointMessages, `{"model":"claude","max_tokens":100,"stream":true,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"result"}]}]},{"role":"assistant","content":"ok"}]}`,
		wasmhost.RequestFacts{Model: []byte("claude"), Stream: true, MaxTokens: 100, Messages: 2, PromptChars: 13, PromptTokens: 11, Bound: bound(`{"model":"claude","max_tokens":100,"stream":true,"system":[{"type":"text","text":"sys"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"result"}]}]},{"role":"assistant","content":"ok"}]}`, 0, 0)}},
	{"responses", endpointResponses, `{"model":"r","stream":true,"max_output_tokens":9,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hello"},{"type":"input_image","image_url":"data:abc"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"42"}]}`,
		wasmhost.RequestFacts{Model: []byte("r"), Stream: true, MaxTokens: 9, Messages: 4, PromptChars: 17, PromptTokens: 20,
			Bound: wasmhost.BoundFacts{PromptBytes: int64(len(`{"model":"r","stream":true,"max_output_tokens":9,"instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hello"},{"type":"input_image","image_url":"data:abc"}]},{"type":"function_call","arguments":"{}"},{"type":"function_call_output","output":"42"}]}`)) - 8, Images: 1, Choices: 1}}},
	{"responses string input, previous response", endpointResponses, `{"model":"r","input":"hi","previous_response_id":"resp_1","tools":[{"type":"function","name":"f"},{"type":"web_search_preview"},{"type":"computer_use_preview"}]}`,
		wasmhost.RequestFacts{Model: []byte("r"), MaxTokens: -1, Messages: 1, PromptChars: 2, PromptTokens: 4,
			Bound: wasmhost.BoundFacts{PromptBytes: int64(len(`{"model":"r","input":"hi","previous_response_id":"resp_1","tools":[{"type":"function","name":"f"},{"type":"web_search_preview"},{"type":"computer_use_preview"}]}`)), Unbounded: 2, Tools: 3, BuiltinTools: 1, Choices: 1}}},
	{"anthropic ignores max_completion_tokens", endpointMessages, `{"model":"c","max_completion_tokens":5,"messages":[{"role":"user","content":"x"}]}`,
		wasmhost.RequestFacts{Model: []byte("c"), MaxTokens: -1, Messages: 1, PromptChars: 1, PromptTokens: 4, Bound: bound(`{"model":"c","max_completion_tokens":5,"messages":[{"role":"user","content":"x"}]}`, 0, 0)}},
}

// bound is the BoundFacts of a body without unbounded parts, tools or n:
// its length less imageBytes, and images images.
func bound(body string, imageBytes, images int64) wasmhost.BoundFacts {
	return wasmhost.BoundFacts{PromptBytes: int64(len(body)) + imageBytes, Images: images, Choices: 1}
}

// gatewayFacts parses body as the proxy does for ep and returns the facts
// it hands plugins, or ok false when the gateway refuses the body.
func gatewayFacts(body []byte, ep openai.Endpoint) (wasmhost.RequestFacts, bool) {
	var r openai.Request
	var p providerState
	var err error
	switch ep {
	case endpointMessages:
		err = p.native.Parse(body, &r)
	case endpointResponses:
		var rp responses.RequestParser
		err = rp.Parse(body, &r)
	default:
		var op openai.RequestParser
		err = op.Parse(body, ep, &r)
	}
	if err != nil {
		return wasmhost.RequestFacts{}, false
	}
	return pluginFacts(&r), true
}

func sameFacts(a, b wasmhost.RequestFacts) bool {
	return bytes.Equal(a.Model, b.Model) && a.Stream == b.Stream && a.MaxTokens == b.MaxTokens &&
		a.Messages == b.Messages && a.PromptChars == b.PromptChars && a.PromptTokens == b.PromptTokens && a.Bound == b.Bound
}

func TestPluginFactsAgree(t *testing.T) {
	for _, tt := range factsCorpus {
		t.Run(tt.name, func(t *testing.T) {
			gw, ok := gatewayFacts([]byte(tt.body), tt.ep)
			if !ok {
				t.Fatalf("the gateway refuses the body")
			}
			if !sameFacts(gw, tt.want) {
				t.Errorf("gateway: %+v (model %q), want %+v", gw, gw.Model, tt.want)
			}
			got, ok := wasmhost.ReadRequestFacts([]byte(tt.body), string(endpointNames[tt.ep]))
			if !ok || !sameFacts(got, tt.want) {
				t.Errorf("ReadRequestFacts: %+v (model %q), ok %v, want %+v", got, got.Model, ok, tt.want)
			}
		})
	}
}

// FuzzPluginFacts checks that for every body the gateway accepts,
// wasmhost.ReadRequestFacts reads the facts the gateway hands plugins.
func FuzzPluginFacts(f *testing.F) {
	for _, tt := range factsCorpus {
		f.Add([]byte(tt.body), uint8(tt.ep))
	}
	for _, tt := range boundFactsCases {
		f.Add([]byte(tt.body), uint8(tt.ep))
	}
	f.Fuzz(func(t *testing.T, body []byte, epn uint8) {
		ep := openai.Endpoint(epn%5) + openai.ChatCompletions
		switch ep {
		case openai.Embeddings + 1:
			ep = endpointMessages
		case openai.Embeddings + 2:
			ep = endpointResponses
		}
		got, _ := wasmhost.ReadRequestFacts(body, string(endpointNames[ep]))
		gw, ok := gatewayFacts(body, ep)
		if !ok {
			return
		}
		if !sameFacts(got, gw) {
			t.Fatalf("%s %q:\nReadRequestFacts %+v (model %q)\ngateway          %+v (model %q)", endpointNames[ep], body, got, got.Model, gw, gw.Model)
		}
	})
}

// TestParsersRefuseRawControl: every endpoint's parser refuses a body with
// a raw control character in a string, also before an escape sequence,
// which fastjson's validator misses.
func TestParsersRefuseRawControl(t *testing.T) {
	for _, ep := range []openai.Endpoint{openai.ChatCompletions, openai.Completions, openai.Embeddings, endpointMessages, endpointResponses} {
		for _, body := range []string{
			"{\"model\":\"m\",\"messages\":[{\"role\":\"\x10\\b0000\",\"content\":\"x\"}],\"prompt\":\"p\",\"input\":\"i\"}",
			"{\"model\":\"m\x01\\n\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"prompt\":\"p\",\"input\":\"i\"}",
		} {
			if _, ok := gatewayFacts([]byte(body), ep); ok {
				t.Errorf("%s accepts %q", endpointNames[ep], body)
			}
		}
	}
}
