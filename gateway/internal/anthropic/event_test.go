package anthropic

import (
	"os"
	"testing"
)

func TestEventParser(t *testing.T) {
	tests := []struct {
		name string
		data string
		want Event
	}{
		{"message_start",
			`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":25,"cache_read_input_tokens":5,"output_tokens":1}}}`,
			Event{Type: EventMessageStart, MessageID: []byte("msg_1"), Model: []byte("claude-x"),
				Usage: Usage{Present: true, InputTokens: 25, CacheReadInputTokens: 5, OutputTokens: 1}}},
		{"text block start",
			`{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"hi"}}`,
			Event{Type: EventContentBlockStart, Index: 2, Block: BlockText, Text: []byte("hi")}},
		{"tool block start",
			`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`,
			Event{Type: EventContentBlockStart, Index: 1, Block: BlockToolUse, ToolID: []byte("toolu_1"), ToolName: []byte("f")}},
		{"thinking block start",
			`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
			Event{Type: EventContentBlockStart, Block: BlockThinking}},
		{"server tool block start",
			`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search"}}`,
			Event{Type: EventContentBlockStart, Block: BlockOther}},
		{"text delta, unescaped",
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\nc\u00e9"}}`,
			Event{Type: EventContentBlockDelta, Delta: DeltaText, Text: []byte("a\"b\ncé")}},
		{"input json delta",
			`{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
			Event{Type: EventContentBlockDelta, Index: 3, Delta: DeltaInputJSON, PartialJSON: []byte(`{"a":`)}},
		{"thinking delta",
			`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
			Event{Type: EventContentBlockDelta, Delta: DeltaThinking}},
		{"signature delta",
			`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"x"}}`,
			Event{Type: EventContentBlockDelta, Delta: DeltaOther}},
		{"block stop", `{"type":"content_block_stop","index":7}`, Event{Type: EventContentBlockStop, Index: 7}},
		{"message_delta",
			`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}`,
			Event{Type: EventMessageDelta, StopReason: []byte("tool_use"), Usage: Usage{Present: true, OutputTokens: 89}}},
		{"message_delta null stop reason, no usage",
			`{"type":"message_delta","delta":{"stop_reason":null}}`,
			Event{Type: EventMessageDelta}},
		{"message_stop", `{"type":"message_stop"}`, Event{Type: EventMessageStop}},
		{"ping", `{"type": "ping"}`, Event{Type: EventPing}},
		{"error",
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			Event{Type: EventError, ErrorType: []byte("overloaded_error"), ErrorMessage: []byte("Overloaded")}},
		{"unknown", `{"type":"future"}`, Event{Type: EventUnknown}},
		{"wrong member types are ignored",
			`{"type":"content_block_delta","index":"x","delta":{"type":"text_delta","text":5}}`,
			Event{Type: EventContentBlockDelta, Delta: DeltaText}},
	}
	var p EventParser
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ev Event
			if err := p.Parse([]byte(tc.data), nil, &ev); err != nil {
				t.Fatal(err)
			}
			if got, want := fmtEvent(ev), fmtEvent(tc.want); got != want {
				t.Errorf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func fmtEvent(e Event) string {
	return e.Type.String() + "|" + itoa(e.Index) + "|" + itoa(int(e.Block)) + "|" + itoa(int(e.Delta)) +
		"|text=" + string(e.Text) + "|pj=" + string(e.PartialJSON) + "|tool=" + string(e.ToolID) + "," + string(e.ToolName) +
		"|msg=" + string(e.MessageID) + "," + string(e.Model) + "|stop=" + string(e.StopReason) +
		"|usage=" + fmtUsage(e.Usage) + "|err=" + string(e.ErrorType) + "," + string(e.ErrorMessage)
}

func fmtUsage(u Usage) string {
	if !u.Present {
		return "-"
	}
	return itoa(int(u.InputTokens)) + "," + itoa(int(u.OutputTokens)) + "," + itoa(int(u.CacheCreationInputTokens)) + "," + itoa(int(u.CacheReadInputTokens))
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestParseStreamUsage(t *testing.T) {
	tests := []struct {
		data          string
		input, output int64
		ok            bool
	}{
		{`{"type":"message_start","message":{"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":2,"output_tokens":1}}}`, 30, 1, true},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`, 0, 15, true},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":40,"output_tokens":96}}`, 40, 96, true},
		{`{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`, 0, 0, false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`, 0, 0, false},
		{`{"type":"ping","usage":{"output_tokens":3}}`, 0, 0, false},
		{`not json`, 0, 0, false},
	}
	for _, tc := range tests {
		in, out, ok := ParseStreamUsage([]byte(tc.data))
		if in != tc.input || out != tc.output || ok != tc.ok {
			t.Errorf("ParseStreamUsage(%s) = %d, %d, %v; want %d, %d, %v", tc.data, in, out, ok, tc.input, tc.output, tc.ok)
		}
	}
}

func TestAppendStreamText(t *testing.T) {
	tests := []struct {
		data string
		want string
		ok   bool
	}{
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello \"you\"\n"}}`, "Hello \"you\"\n", true},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}`, "", true},
		{`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{}"}}`, "", false},
		{`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"secret"}}`, "", false},
		{`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"x"}}`, "", false},
		{`{"type":"message_stop"}`, "", false},
		{`[`, "", false},
	}
	for _, tc := range tests {
		got, ok := AppendStreamText([]byte("pre:"), []byte(tc.data))
		if string(got) != "pre:"+tc.want || ok != tc.ok {
			t.Errorf("AppendStreamText(%s) = %q, %v; want %q, %v", tc.data, got, ok, "pre:"+tc.want, tc.ok)
		}
	}
}

func TestResponseUsage(t *testing.T) {
	body, err := os.ReadFile("testdata/response_tool_use.json")
	if err != nil {
		t.Fatal(err)
	}
	if in, out, ok := ResponseUsage(body); in != 1520 || out != 120 || !ok {
		t.Errorf("ResponseUsage = %d, %d, %v; want 1520, 120, true", in, out, ok)
	}
	if _, _, ok := ResponseUsage([]byte(`{"content":[]}`)); ok {
		t.Error("ok without usage")
	}
	if _, _, ok := ResponseUsage([]byte(`{`)); ok {
		t.Error("ok on bad JSON")
	}
}

func TestEventName(t *testing.T) {
	for raw, want := range map[string]string{
		"event: content_block_delta\ndata: {}\n\n": "content_block_delta",
		"data: {}\nevent:ping\n\n":                 "ping",
		"event: message_stop\r\ndata: {}\r\n\r\n":  "message_stop",
		"event:  two spaces\n\n":                   " two spaces",
		"data: {}\n\n":                             "",
		": event: comment\ndata: x\n\n":            "",
		"eventually: no\n\n":                       "",
		"event\n\n":                                "",
	} {
		if got := string(EventName([]byte(raw))); got != want {
			t.Errorf("EventName(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestAppendUpstreamHeaders(t *testing.T) {
	tests := []struct {
		key, version string
		want         string
		err          bool
	}{
		{"sk-ant-1", "", "x-api-key: sk-ant-1\r\nanthropic-version: 2023-06-01\r\n", false},
		{"sk-ant-1", "2024-01-01", "x-api-key: sk-ant-1\r\nanthropic-version: 2024-01-01\r\n", false},
		{"", "", "anthropic-version: 2023-06-01\r\n", false},
		{"sk\r\nX-Evil: 1", "", "", true},
		{"k", "v\n", "", true},
	}
	for _, tc := range tests {
		got, err := AppendUpstreamHeaders([]byte("Host: h\r\n"), tc.key, tc.version)
		if (err != nil) != tc.err {
			t.Errorf("(%q, %q): err %v", tc.key, tc.version, err)
		}
		if want := "Host: h\r\n" + tc.want; string(got) != want {
			t.Errorf("(%q, %q) = %q, want %q", tc.key, tc.version, got, want)
		}
	}
}
