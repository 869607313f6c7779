package conformance

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/tollgate/tollgate/sdk/wasmhost"
)

// probe is one request of the battery: what the gateway would tell a
// plugin about it.
type probe struct {
	name     string
	endpoint string // chat/completions, completions, embeddings, messages
	body     string
	stream   bool
	messages int64
	headers  map[string]string // besides the battery's own
}

// event is one upstream event of a stream, as the chunk phase sees it.
type event struct {
	text      string
	flags     uint32
	toolCalls []byte // chunk_tool_calls records
	usage     bool   // the event reports usage (sets the request's usage)
}

// stream is one reply of the battery. A streamed reply ends with DONE,
// which the runner adds; a WHOLE reply is one event.
type stream struct {
	name   string
	whole  bool
	events []event
}

// defaultWord is split across events in every check, beside the words of
// the module's config.
const defaultWord = "tollgate"

// largeBody is the size of the large request's text.
const largeBody = 256 << 10

// requests is the request battery. Words from the config appear in a
// request of their own each, so a guard's REJECT is exercised too.
func requests(words []string) []probe {
	chat := func(content string) string {
		b, _ := json.Marshal(content)
		return `{"model":"conformance-model","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":` + string(b) + `}]}`
	}
	ps := []probe{
		{name: "chat", endpoint: "chat/completions", body: chat("Hello there, how are you?"), messages: 2},
		{name: "chat stream", endpoint: "chat/completions", stream: true, messages: 1,
			body: `{"model":"conformance-model","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"messages":[{"role":"user","content":"Count to three."}]}`},
		{name: "completions", endpoint: "completions", messages: 2,
			body: `{"model":"conformance-model","prompt":["Say hello","and goodbye"],"max_tokens":16}`},
		{name: "embeddings", endpoint: "embeddings", messages: 2,
			body: `{"model":"conformance-embed","input":["first text","second text"]}`},
		{name: "anthropic", endpoint: "messages", messages: 3,
			body: `{"model":"conformance-model","max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"What is in the image?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"q":"x"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"found it"}]}]}`},
		{name: "unicode", endpoint: "chat/completions", messages: 2, body: chat("Grüße, 世界 🌍 — עברית \u2028 \\u00e9 \"quoted\"")},
		{name: "empty messages", endpoint: "chat/completions", body: `{"model":"conformance-model","messages":[]}`},
		{name: "tool calls", endpoint: "chat/completions", messages: 3,
			body: `{"model":"conformance-model","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"18 C, "},{"type":"text","text":"sunny"}]}]}`},
		{name: "large body", endpoint: "chat/completions", messages: 2, body: chat(strings.Repeat("lorem ipsum dolor sit amet ", largeBody/27))},
	}
	for _, w := range words {
		ps = append(ps, probe{name: fmt.Sprintf("chat with %q", w), endpoint: "chat/completions", messages: 2,
			body: chat("Please tell me about " + w + ", thanks.")})
	}
	return ps
}

// streams is the stream battery: each word split at every byte (quick:
// in the middle only), one byte per event, WHOLE replies, tool-call
// events, usage and empty events.
func streams(words []string, quick bool) []stream {
	var ss []stream
	for _, w := range words {
		pre, post := "The word is ", " and more."
		splits := make([]int, 0, len(w))
		if quick {
			splits = append(splits, len(w)/2)
		} else {
			for k := 1; k < len(w); k++ {
				splits = append(splits, k)
			}
		}
		for _, k := range splits {
			ss = append(ss, stream{name: fmt.Sprintf("%q split at byte %d", w, k), events: []event{
				{text: pre + w[:k]}, {text: w[k:] + post}}})
		}
		bytewise := stream{name: fmt.Sprintf("%q one byte per event", w)}
		for i := range len(w) {
			bytewise.events = append(bytewise.events, event{text: w[i : i+1]})
		}
		ss = append(ss, bytewise,
			stream{name: fmt.Sprintf("%q whole", w), whole: true, events: []event{{text: pre + w + post}}})
	}
	calls := func(index int, name, args string) []byte {
		return wasmhost.AppendToolCallDelta(nil, index, []byte(name), []byte(args))
	}
	ss = append(ss,
		stream{name: "plain text", events: []event{{text: "Hello"}, {text: ", world"}, {text: "."}, {flags: wasmhost.ChunkFinish}}},
		stream{name: "unicode text", events: []event{{text: "Grüße "}, {text: "世界 🌍"}, {text: "\u2028 done"}}},
		stream{name: "empty text", events: []event{{}, {text: ""}, {text: "x"}, {}}},
		stream{name: "tool calls", events: []event{
			{flags: wasmhost.ChunkToolCalls, toolCalls: calls(0, "get_weather", `{"ci`)},
			{flags: wasmhost.ChunkToolCalls, toolCalls: calls(0, "", `ty":"Paris"}`)},
			{flags: wasmhost.ChunkToolCalls, toolCalls: append(calls(1, "lookup", `{}`), calls(2, "again", `{"q":1}`)...)},
			{flags: wasmhost.ChunkFinish}}},
		stream{name: "usage", events: []event{{text: "Done."}, {flags: wasmhost.ChunkFinish}, {flags: wasmhost.ChunkUsage, usage: true}}},
		stream{name: "whole plain", whole: true, events: []event{{text: "A whole reply."}}},
		stream{name: "whole with tool calls", whole: true, events: []event{{text: "", flags: wasmhost.ChunkToolCalls, toolCalls: calls(0, "get_weather", `{"city":"Paris"}`)}}},
		stream{name: "whole long text", whole: true, events: []event{{text: strings.Repeat("A long reply. ", largeBody/14)}}},
		stream{name: "long event", events: []event{{text: strings.Repeat("x", 64<<10)}, {text: "end"}}},
	)
	return ss
}

// configWords are the strings of a config (object values and array
// elements, at any depth), the likeliest to matter to a guard: deny terms,
// markers. At most 4, each 2 to 64 bytes, sorted, then the default word.
func configWords(config []byte) []string {
	var v any
	if json.Unmarshal(config, &v) != nil {
		return []string{defaultWord}
	}
	seen := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(v) >= 2 && len(v) <= 64 {
				seen[v] = true
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	words := make([]string, 0, len(seen)+1)
	for w := range seen {
		words = append(words, w)
	}
	sort.Strings(words)
	if len(words) > 4 {
		words = words[:4]
	}
	return append(words, defaultWord)
}
