package anthropic

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
)

func TestRequestParser(t *testing.T) {
	tests := []struct {
		name string
		body string
		want openai.Request // Model compared as a string
		// param is the expected error's Param; "" means no error.
		param  string
		hasErr bool
	}{
		{name: "minimal", body: `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"Hello, Claude"}]}`,
			want: openai.Request{Model: []byte("claude-x"), MaxTokens: 64, HasMaxTokens: true, Messages: 1, PromptChars: 13, EstimatedPromptTokens: 3 + 4}},
		{name: "stream, system blocks, text and tool_result blocks", body: `{"model":"m","stream":true,"system":[{"type":"text","text":"be brief"}],
			"messages":[{"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image","source":{"type":"url","url":"http://x"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"12345678"},{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"xy"}]}]}]}`,
			want: openai.Request{Model: []byte("m"), Stream: true, IncludeUsage: true, Messages: 3, PromptChars: 8 + 4 + 8 + 2, EstimatedPromptTokens: 22/4 + 12}},
		{name: "system string, no max_tokens", body: `{"model":"m","system":"0123456789abcdef","messages":[{"role":"user","content":"hi"}]}`,
			want: openai.Request{Model: []byte("m"), Messages: 1, PromptChars: 18, EstimatedPromptTokens: 4 + 4}},
		{name: "stream false, null members", body: `{"model":"m","stream":false,"max_tokens":null,"system":null,"messages":[{"role":"user","content":null}]}`,
			want: openai.Request{Model: []byte("m"), Messages: 1, EstimatedPromptTokens: 4}},
		{name: "not JSON", body: `{"model":`, hasErr: true},
		{name: "not an object", body: `[1]`, hasErr: true},
		{name: "no model", body: `{"messages":[{"role":"user","content":"x"}]}`, param: "model", hasErr: true},
		{name: "empty model", body: `{"model":"","messages":[{"role":"user","content":"x"}]}`, param: "model", hasErr: true},
		{name: "stream not a boolean", body: `{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, param: "stream", hasErr: true},
		{name: "negative max_tokens", body: `{"model":"m","max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`, param: "max_tokens", hasErr: true},
		{name: "fractional max_tokens", body: `{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]}`, param: "max_tokens", hasErr: true},
		{name: "no messages", body: `{"model":"m"}`, param: "messages", hasErr: true},
		{name: "empty messages", body: `{"model":"m","messages":[]}`, param: "messages", hasErr: true},
		{name: "message not an object", body: `{"model":"m","messages":["hi"]}`, param: "messages.0", hasErr: true},
		{name: "no role", body: `{"model":"m","messages":[{"content":"hi"}]}`, param: "messages.0.role", hasErr: true},
		{name: "content a number", body: `{"model":"m","messages":[{"role":"user","content":1}]}`, param: "messages.0.content", hasErr: true},
		{name: "text block without text", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`, param: "messages.0.content", hasErr: true},
		{name: "system a number", body: `{"model":"m","system":3,"messages":[{"role":"user","content":"x"}]}`, param: "system", hasErr: true},
	}
	var p RequestParser
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r openai.Request
			err := p.Parse([]byte(tt.body), &r)
			if tt.hasErr {
				e, ok := err.(*openai.Error)
				if !ok || e.Status != 400 || e.Param != tt.param || e.Message == "" {
					t.Fatalf("error %#v, want a 400 on %q", err, tt.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, want := r, tt.want
			if string(got.Model) != string(want.Model) {
				t.Errorf("model %q, want %q", got.Model, want.Model)
			}
			got.Model, want.Model = nil, nil
			got.Bound = openai.BoundFacts{} // openai.TestBoundFacts covers it
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestRequestParserAllocs(t *testing.T) {
	body := []byte(`{"model":"claude-x","max_tokens":64,"stream":true,"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`)
	var p RequestParser
	var r openai.Request
	if err := p.Parse(body, &r); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(200, func() { p.Parse(body, &r) }); allocs != 0 {
		t.Errorf("%v allocs per parse, want 0", allocs)
	}
}

func TestAppendMessageWithText(t *testing.T) {
	tool, err := os.ReadFile("testdata/response_tool_use.json")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("testdata/response_text.json")
	if err != nil {
		t.Fatal(err)
	}
	type block struct {
		Type, Text, Name string
	}
	type message struct {
		ID         string  `json:"id"`
		Content    []block `json:"content"`
		StopReason string  `json:"stop_reason"`
		Usage      struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	tests := []struct {
		name, stop string
		in         []byte
		want       []block
		wantStop   string
	}{
		{"two text blocks become one", "", text, []block{{Type: "text", Text: "new \"text\"\n"}}, "end_turn"},
		{"stopped: refusal", "refusal", text, []block{{Type: "text", Text: "new \"text\"\n"}}, "refusal"},
		{"text among other blocks keeps its place", "", tool, []block{{Type: "thinking"}, {Type: "text", Text: "new \"text\"\n"}, {Type: "tool_use", Name: "get_weather"}, {Type: "tool_use", Name: "get_time"}}, "tool_use"},
		{"no text block: text first", "", []byte(`{"id":"m","content":[{"type":"tool_use","name":"f","id":"t","input":{}}],"usage":{"output_tokens":3}}`),
			[]block{{Type: "text", Text: "new \"text\"\n"}, {Type: "tool_use", Name: "f"}}, ""},
		{"no content at all, stop reason added", "refusal", []byte(`{"id":"m","content":[]}`), []block{{Type: "text", Text: "new \"text\"\n"}}, "refusal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := AppendMessageWithText([]byte("prefix:"), tt.in, []byte("new \"text\"\n"), tt.stop)
			if err != nil {
				t.Fatal(err)
			}
			if string(out[:7]) != "prefix:" {
				t.Fatalf("dst not kept: %s", out)
			}
			var m message
			if err := json.Unmarshal(out[7:], &m); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(m.Content) != len(tt.want) || m.StopReason != tt.wantStop || m.ID == "" {
				t.Fatalf("got %+v", m)
			}
			for i := range m.Content {
				if m.Content[i] != tt.want[i] {
					t.Errorf("block %d %+v, want %+v", i, m.Content[i], tt.want[i])
				}
			}
		})
	}
	if _, err := AppendMessageWithText(nil, []byte(`{"content":`), nil, ""); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestAppendError(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {402, "billing_error"}, {403, "permission_error"},
		{404, "not_found_error"}, {409, "invalid_request_error"}, {413, "request_too_large"}, {429, "rate_limit_error"},
		{500, "api_error"}, {502, "api_error"}, {503, "overloaded_error"}, {504, "timeout_error"}, {529, "overloaded_error"},
	} {
		b := AppendError(nil, &openai.Error{Status: tc.status, Type: "x", Message: "m \"q\""})
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Type != "error" || e.Error.Type != tc.typ || e.Error.Message != `m "q"` {
			t.Errorf("%d: %s (%v), want type %s", tc.status, b, err, tc.typ)
		}
		// Read back by TranslateError, a mapped type keeps its status.
		if back := TranslateError(0, b); tc.typ != "invalid_request_error" && tc.typ != "api_error" && tc.typ != "overloaded_error" && back.Status != tc.status {
			t.Errorf("%d: TranslateError reads %s back as %d", tc.status, tc.typ, back.Status)
		}
	}
	ev := AppendErrorEvent(nil, &openai.Error{Status: 529, Message: "busy"})
	if string(ev) != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n" {
		t.Errorf("event %q", ev)
	}
}

func FuzzRequestParser(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","stream":true,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"r"}]}]}]}`,
		`{"model":1}`, `[]`, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`,
	} {
		f.Add([]byte(s))
	}
	var p RequestParser
	f.Fuzz(func(t *testing.T, body []byte) {
		var r openai.Request
		err := p.Parse(body, &r)
		if err != nil {
			if e, ok := err.(*openai.Error); !ok || e.Status != 400 {
				t.Fatalf("error %#v", err)
			}
			return
		}
		if len(r.Model) == 0 || r.Messages < 1 || r.EstimatedPromptTokens < 1 || r.PromptChars > len(body) {
			t.Fatalf("accepted %q as %+v", body, r)
		}
	})
}

func FuzzChunkView(f *testing.F) {
	for _, s := range []string{textDeltaEvent, argsDeltaEvent, pingEvent,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f"}}`,
		`{"type":"content_block_stop","index":1}`, `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
		`{"type":"error","error":{"type":"overloaded_error"}}`, `7`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v ChunkView
		v.Reset()
		var c openai.Chunk
		for range 2 { // the same event twice: a tool block's state is reused
			if _, err := v.Parse(data, nil, &c); err != nil {
				return
			}
			if c.Choices > 1 || (c.Done && c.Choices != 0) {
				t.Fatalf("chunk %+v from %q", c, data)
			}
		}
	})
}
