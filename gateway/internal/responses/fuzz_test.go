package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// requestSeeds are Responses request bodies for the request fuzz targets.
var requestSeeds = []string{
	`{"model":"m","instructions":"be brief","input":"hi","max_output_tokens":50,"stream":true}`,
	`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"https://x"}]},` +
		`{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}],` +
		`"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":"auto","text":{"format":{"type":"json_object"}}}`,
	`{"model":"m","input":"x","tools":[{"type":"web_search"}]}`,
	`{"model":"m","input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"},{"type":"refusal","refusal":"no"}]}]}`,
	`{"model":"","input":5}`,
	`[]`,
}

// FuzzRequestParse: Parse never panics, refuses with a 400 naming a
// member, and what it accepts has a model and a positive estimate.
func FuzzRequestParse(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var p RequestParser
		var r openai.Request
		if err := p.Parse(body, &r); err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if len(r.Model) == 0 || r.EstimatedPromptTokens < 1 || r.PromptChars < 0 || r.MaxTokens < 0 {
			t.Fatalf("accepted %q as %+v", body, r)
		}
	})
}

// FuzzAppendChatRequest: the translation never panics nor changes its
// input; a refusal is a 400 that leaves dst alone; what it accepts is a
// JSON chat request with the body's model whose messages the gateway's
// own chat parser accepts.
func FuzzAppendChatRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		out, err := AppendChatRequest([]byte("dst"), body)
		if !bytes.Equal(body, orig) {
			t.Fatal("AppendChatRequest modified its input")
		}
		if err != nil {
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != 400 || string(out) != "dst" {
				t.Fatalf("error %v (dst %q)", err, out)
			}
			return
		}
		chat := out[3:]
		var req struct {
			Model    json.RawMessage   `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(chat, &req); err != nil {
			t.Fatalf("translated %q into invalid JSON %q: %v", body, chat, err)
		}
		// The model as encoding/json reads it (invalid UTF-8 as U+FFFD,
		// which is what the translation writes for it).
		var in, got struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &in) == nil && (json.Unmarshal(chat, &got) != nil || in.Model != got.Model) {
			t.Fatalf("model %q became %q", in.Model, got.Model)
		}
		var m struct {
			Model string `json:"model"`
		}
		if len(req.Messages) > 0 && json.Unmarshal(chat, &m) == nil && m.Model != "" {
			var p openai.RequestParser
			var r openai.Request
			if err := p.Parse(chat, openai.ChatCompletions, &r); err != nil && !strings.Contains(err.Error(), "max_tokens") {
				t.Fatalf("the chat parser refuses the translation %s: %v", chat, err)
			}
		}
	})
}

// FuzzTranslator: chat chunk data, one event per line of the input, are
// translated without panicking into well-formed Responses events numbered
// from 0, and View reads back exactly the text and tool-call arguments
// the chunks carried (read by openai.ChunkParser, the oracle), invalid
// UTF-8 read back as U+FFFD.
func FuzzTranslator(f *testing.F) {
	f.Add(strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(chatStream, "data: ", "")), "\n\n", "\n"))
	f.Add("{\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"length\"}]}\n{\"error\":{\"message\":\"x\"}}\n[DONE]")
	f.Add("{\"choices\":[{\"delta\":{\"content\":\"\xe2\x80\",\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"n\",\"arguments\":\"\x92\"}}]}}]}")
	f.Add("{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"a\",\"function\":{\"name\":\"n\",\"arguments\":\"{\"}},{\"index\":0,\"function\":{\"arguments\":\"x\"}}]}}]}\n[DONE]")
	f.Fuzz(func(t *testing.T, in string) {
		var tr Translator
		tr.Reset([]byte("m"), []byte("resp_1"), 1)
		var out []byte
		var wantText, wantArgs []byte
		var p openai.ChunkParser
		var c openai.Chunk
		for _, line := range strings.Split(in, "\n") {
			if tr.Done() {
				break
			}
			var err error
			if out, err = tr.Append(out, []byte(line)); err != nil {
				continue // not a JSON object: the reader ends the stream
			}
			if p.Parse([]byte(line), &c) == nil && !c.Error && !c.Done {
				wantText = append(wantText, c.Text...)
				for _, tc := range c.ToolCalls {
					wantArgs = append(wantArgs, tc.Arguments...)
				}
			}
		}
		var v View
		var gotText, gotArgs []byte
		rd := sse.NewReader(bytes.NewReader(out), 0)
		seq := int64(0)
		for {
			raw, err := rd.Next()
			if err != nil {
				break
			}
			data, _ := sse.AppendData(nil, raw)
			if !json.Valid(data) {
				t.Fatalf("event %q is not JSON", data)
			}
			ev, err := v.Parse(data, &c)
			if err != nil || ev.Type == EventUnknown || ev.Seq != seq || string(EventName(raw)) != eventName(data) {
				t.Fatalf("event %q: %+v %v (want number %d)", raw, ev, err, seq)
			}
			seq++
			gotText = append(gotText, c.Text...)
			if ev.Type == EventArgsDelta {
				for _, tc := range c.ToolCalls {
					gotArgs = append(gotArgs, tc.Arguments...)
				}
			}
		}
		// The events are JSON whatever the upstream sent: each byte that is
		// not UTF-8 is written as U+FFFD (as encoding/json does).
		wantText, wantArgs = []byte(string([]rune(string(wantText)))), []byte(string([]rune(string(wantArgs))))
		if !bytes.Equal(gotText, wantText) || !bytes.Equal(gotArgs, wantArgs) {
			t.Fatalf("text %q args %q read back, the chunks carried %q %q", gotText, gotArgs, wantText, wantArgs)
		}
	})
}

func eventName(data []byte) string {
	var e struct{ Type string }
	json.Unmarshal(data, &e)
	return e.Type
}

// FuzzReplies: the whole-reply translations never panic and write JSON.
func FuzzReplies(f *testing.F) {
	f.Add([]byte(`{"id":"chatcmpl-9","model":"m","choices":[{"message":{"content":"hi","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"id":"resp_1","object":"response","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[{"type":"message","content":[{"type":"output_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"n","arguments":"{}"}],"usage":{"input_tokens":2,"output_tokens":3}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, err := AppendResponse(nil, b, ""); err == nil && !json.Valid(out) {
			t.Fatalf("AppendResponse(%q) = %q", b, out)
		}
		if out, err := AppendChatView(nil, b); err == nil && !json.Valid(out) {
			t.Fatalf("AppendChatView(%q) = %q", b, out)
		}
		if !json.Valid(b) {
			return // the rewrites read replies that passed the view
		}
		if out, err := AppendWithText(nil, b, []byte("t\x00\""), "content_filter"); err == nil && !json.Valid(out) {
			t.Fatalf("AppendWithText(%q) = %q", b, out)
		}
		var o Output
		o.Reset([]byte("resp_1"), []byte("m"), 1)
		o.Add(false).Text = []byte("x")
		if out := o.AppendTerminal(nil, b, 7); !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("AppendTerminal(%q) = %q", b, out)
		}
	})
}

// FuzzAppendWithSeq: the number is set, and nothing else changes.
func FuzzAppendWithSeq(f *testing.F) {
	f.Add([]byte("event: x\ndata: {\"type\":\"x\",\"sequence_number\":12}\n\n"), int64(3))
	f.Add([]byte("data: {\"sequence_number\": 5, \"a\":\"\\\"sequence_number\\\":9\"}\n\n"), int64(5))
	f.Fuzz(func(t *testing.T, raw []byte, seq int64) {
		if seq < 0 {
			seq = -seq
		}
		out, numbered := AppendWithSeq(nil, raw, seq)
		i := bytes.LastIndex(raw, seqKey)
		if !numbered {
			if !bytes.Equal(out, raw) {
				t.Fatalf("an event without a number changed: %q", out)
			}
			return
		}
		if !bytes.Equal(out[:i], raw[:i]) || !bytes.Contains(out[i:], []byte(seqKey)) {
			t.Fatalf("%q became %q", raw, out)
		}
		again, _ := AppendWithSeq(nil, out, seq)
		if !bytes.Equal(again, out) {
			t.Fatalf("numbering %q again changed it: %q", out, again)
		}
	})
}
