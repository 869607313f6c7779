package respcache

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func evs(lines ...string) [][]byte {
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = []byte(l)
	}
	return out
}

const hdr = `"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1"`

// Realistic OpenAI streams (stream_options.include_usage: usage null on
// every chunk but the last).
var streams = map[string][][]byte{
	"text": evs(
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"lo, \"w\u00f6rld\""},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"!\n"},"logprobs":null,"finish_reason":null}],"usage":null}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
		`{`+hdr+`,"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0}}}`,
	),
	"tool calls": evs(
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Pa"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ris\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"CET\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		`{`+hdr+`,"choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}`,
	),
	"two choices": evs(
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":1,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":1,"delta":{"content":"Bon"},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":1,"delta":{"content":"jour"},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":1,"delta":{},"logprobs":null,"finish_reason":"length"}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
		`{`+hdr+`,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`,
	),
	"refusal": evs(
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"refusal":"I'm sorry, "},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"refusal":"I can't help with that."},"logprobs":null,"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
	),
	"logprobs": evs(
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"content":"!"},"logprobs":{"content":[{"token":"!","logprob":-0.2,"bytes":[33],"top_logprobs":[]}],"refusal":null},"finish_reason":null}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`,
	),
	"completions": evs(
		`{"id":"cmpl-1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct","choices":[{"text":"Once","index":0,"logprobs":null,"finish_reason":null}]}`,
		`{"id":"cmpl-1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct","choices":[{"text":" upon","index":0,"logprobs":null,"finish_reason":null}]}`,
		`{"id":"cmpl-1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct","choices":[{"text":" a time","index":0,"logprobs":null,"finish_reason":"length"}]}`,
		`{"id":"cmpl-1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
	),
	"completions logprobs": evs(
		`{"id":"cmpl-2","object":"text_completion","created":1,"model":"i","choices":[{"text":"a","index":0,"logprobs":{"tokens":["a"],"token_logprobs":[-0.5],"top_logprobs":[{"a":-0.5}],"text_offset":[0]},"finish_reason":null}]}`,
		`{"id":"cmpl-2","object":"text_completion","created":1,"model":"i","choices":[{"text":"b","index":0,"logprobs":{"tokens":["b"],"token_logprobs":[-0.25],"top_logprobs":[{"b":-0.25}],"text_offset":[1]},"finish_reason":"stop"}]}`,
	),
}

var wholes = map[string]string{
	"text": `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hello, \"wörld\"!\n"},"logprobs":null,"finish_reason":"stop"}],
		"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0}}}`,
	"tool calls": `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
			{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]},
		"logprobs":null,"finish_reason":"tool_calls"}],
		"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}`,
	"two choices": `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":"stop"},
			{"index":1,"message":{"role":"assistant","content":"Bonjour"},"logprobs":null,"finish_reason":"length"}],
		"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`,
	"refusal": `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1",
		"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that."},"logprobs":null,"finish_reason":"stop"}]}`,
	"logprobs": `{"id":"chatcmpl-1","object":"chat.completion","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1",
		"choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop",
			"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"bytes":[72,105],"top_logprobs":[]},{"token":"!","logprob":-0.2,"bytes":[33],"top_logprobs":[]}],"refusal":null}}]}`,
	"completions": `{"id":"cmpl-1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct",
		"choices":[{"text":"Once upon a time","index":0,"logprobs":null,"finish_reason":"length"}],
		"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
	"completions logprobs": `{"id":"cmpl-2","object":"text_completion","created":1,"model":"i",
		"choices":[{"text":"ab","index":0,"finish_reason":"stop",
			"logprobs":{"tokens":["a","b"],"token_logprobs":[-0.5,-0.25],"top_logprobs":[{"a":-0.5},{"b":-0.25}],"text_offset":[0,1]}}]}`,
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if g, w := decode(t, got), decode(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func TestWholeFromEvents(t *testing.T) {
	t.Parallel()
	for name, s := range streams {
		got, err := WholeFromEvents(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameJSON(t, name, got, []byte(wholes[name]))
	}
}

// choiceTexts returns, per choice index, the text a stream's events carry.
func choiceTexts(t *testing.T, events [][]byte) map[float64]string {
	t.Helper()
	texts := map[float64]string{}
	for _, ev := range events {
		v := decode(t, ev).(map[string]any)
		for _, c := range v["choices"].([]any) {
			c := c.(map[string]any)
			i := c["index"].(float64)
			if d, ok := c["delta"].(map[string]any); ok {
				s, _ := d["content"].(string)
				texts[i] += s
			} else {
				s, _ := c["text"].(string)
				texts[i] += s
			}
		}
	}
	return texts
}

// TestEventsRoundTrip: a whole reply made a stream and assembled again is
// the same reply; the stream's text is the reply's content; every chunk
// carries the reply's identity.
func TestEventsRoundTrip(t *testing.T) {
	t.Parallel()
	for name, w := range wholes {
		events, err := EventsFromWhole([]byte(w))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := WholeFromEvents(events)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameJSON(t, name+": whole → events → whole", back, []byte(w))

		whole := decode(t, []byte(w)).(map[string]any)
		texts := choiceTexts(t, events)
		for _, c := range whole["choices"].([]any) {
			c := c.(map[string]any)
			var want string
			if m, ok := c["message"].(map[string]any); ok {
				want, _ = m["content"].(string)
			} else {
				want = c["text"].(string)
			}
			if got := texts[c["index"].(float64)]; got != want {
				t.Errorf("%s: choice %v: events' text %q, content %q", name, c["index"], got, want)
			}
		}
		wantObj := "chat.completion.chunk"
		if whole["object"] == "text_completion" {
			wantObj = "text_completion"
		}
		for i, ev := range events {
			v := decode(t, ev).(map[string]any)
			if v["id"] != whole["id"] || v["object"] != wantObj || v["created"] != whole["created"] ||
				v["model"] != whole["model"] || v["system_fingerprint"] != whole["system_fingerprint"] {
				t.Errorf("%s: event %d %s: identity differs from the reply", name, i, ev)
			}
			if _, ok := v["choices"].([]any); !ok {
				t.Errorf("%s: event %d has no choices array", name, i)
			}
		}
		last := decode(t, events[len(events)-1]).(map[string]any)
		if u, ok := whole["usage"]; ok {
			if !reflect.DeepEqual(last["usage"], u) || len(last["choices"].([]any)) != 0 {
				t.Errorf("%s: last event %s is not the usage chunk", name, events[len(events)-1])
			}
		} else if _, ok := last["usage"]; ok {
			t.Errorf("%s: usage chunk for a reply without usage", name)
		}
	}
}

// TestStreamRoundTrip: a stream assembled, made a stream again and
// assembled again gives the same whole reply.
func TestStreamRoundTrip(t *testing.T) {
	t.Parallel()
	for name, s := range streams {
		w, err := WholeFromEvents(s)
		if err != nil {
			t.Fatal(err)
		}
		events, err := EventsFromWhole(w)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		w2, err := WholeFromEvents(events)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameJSON(t, name, w2, w)
	}
}

func TestEventsFromWholeShape(t *testing.T) {
	t.Parallel()
	events, err := EventsFromWhole([]byte(wholes["tool calls"]))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]},"logprobs":null,"finish_reason":null}`,
		`{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}`,
	}
	if len(events) != len(want)+1 {
		t.Fatalf("%d events: %s", len(events), events)
	}
	for i, w := range want {
		var c struct{ Choices []json.RawMessage }
		if err := json.Unmarshal(events[i], &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("event %d %s", i, events[i])
		}
		sameJSON(t, "choice", c.Choices[0], []byte(w))
	}
	sameJSON(t, "usage chunk", events[3], []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1733000000,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":30,"total_tokens":110}}`))
}

func TestConvertRefused(t *testing.T) {
	t.Parallel()
	badStreams := map[string][][]byte{
		"none":         nil,
		"not json":     evs(`data: x`),
		"array":        evs(`[]`),
		"whole reply":  evs(wholes["text"]),
		"no object":    evs(`{"choices":[]}`),
		"mixed kinds":  evs(string(streams["text"][0]), string(streams["completions"][0])),
		"bad logprobs": evs(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"logprobs":{"content":3}}]}`),
	}
	for name, s := range badStreams {
		if _, err := WholeFromEvents(s); err == nil {
			t.Errorf("WholeFromEvents: %s accepted", name)
		}
	}
	for name, b := range map[string]string{
		"chunk":      string(streams["text"][0]),
		"not json":   `{`,
		"no object":  `{"choices":[]}`,
		"no message": `{"object":"chat.completion","choices":[{"index":0}]}`,
	} {
		if _, err := EventsFromWhole([]byte(b)); err == nil {
			t.Errorf("EventsFromWhole: %s accepted", name)
		}
	}
	if !strings.Contains(func() string { _, err := EventsFromWhole([]byte(`{"object":"x"}`)); return err.Error() }(), `"x"`) {
		t.Error("error does not name the object")
	}
}

// TestWholeKeepsText: the assembled reply keeps <, > and & as the upstream
// wrote them, and skips Azure's prompt-filter chunk.
func TestWholeKeepsText(t *testing.T) {
	t.Parallel()
	w, err := WholeFromEvents(evs(
		`{"id":"","object":"","created":0,"model":"","choices":[],"prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`,
		`{`+hdr+`,"choices":[{"index":0,"delta":{"role":"assistant","content":"<b>a & b</b>"},"finish_reason":"stop"}]}`,
	))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(w), `"content":"<b>a & b</b>"`) || !strings.Contains(string(w), `"id":"chatcmpl-1"`) {
		t.Fatalf("whole %s", w)
	}
	if _, err := WholeFromEvents(evs(`{"id":"","object":"","choices":[]}`)); err == nil {
		t.Fatal("a stream of only a filter chunk accepted")
	}
}

// FuzzWholeFromEvents: the conversions never panic, and a stream they
// assemble survives the round trip through EventsFromWhole.
func FuzzWholeFromEvents(f *testing.F) {
	for _, s := range streams {
		f.Add(bytes.Join(s, []byte("\n")))
	}
	f.Fuzz(func(t *testing.T, joined []byte) {
		w, err := WholeFromEvents(bytes.Split(joined, []byte("\n")))
		if err != nil {
			return
		}
		events, err := EventsFromWhole(w)
		if err != nil {
			t.Fatalf("EventsFromWhole(%s): %v", w, err)
		}
		w2, err := WholeFromEvents(events)
		if err != nil {
			t.Fatalf("WholeFromEvents(EventsFromWhole(%s)): %v", w, err)
		}
		sameJSON(t, "round trip", w2, w)
	})
}
