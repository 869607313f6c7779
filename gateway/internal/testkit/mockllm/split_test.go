package mockllm

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	const text = "see https://x.net/a.png now"
	chat := `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`
	tests := []struct {
		name   string
		cfg    Config
		hdr    map[string]string
		pieces []string
	}{
		{"config offsets", Config{Text: text, Split: []int{3, 12, 13}}, nil, []string{"see", " https://", "x", ".net/a.png now"}},
		{"header offsets override the config's", Config{Text: text, Split: []int{1}},
			map[string]string{HeaderSplit: "4, 9"}, []string{"see ", "https", "://x.net/a.png now"}},
		{"header text and offsets", Config{},
			map[string]string{HeaderText: url.QueryEscape("ab+c%d"), HeaderSplit: "2,3"}, []string{"ab", "+", "c%d"}},
		{"an empty header: chunk size again", Config{Text: "abcdef", Split: []int{1}, ChunkSize: 4},
			map[string]string{HeaderSplit: ""}, []string{"abcd", "ef"}},
		{"runes kept whole", Config{Text: "日本語"}, map[string]string{HeaderSplit: "3,6"}, []string{"日", "本", "語"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, tc.hdr)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
			}
			events, done := parseSSE(t, b)
			id, created := idCreated(t, events)
			want := wantStream(true, id, created, "m", tc.pieces, "stop", false, false, 0)
			if !done || !reflect.DeepEqual(events, want) {
				t.Fatalf("events\n%s\nwant\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
			}
		})
	}
	// Not streamed, the offsets change nothing.
	_, ts, c := start(t, Config{Text: text, Split: []int{3}})
	_, b, _ := do(t, c, "POST", ts.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, nil)
	if !strings.Contains(string(b), `"content":"`+text+`"`) {
		t.Fatalf("body %s", b)
	}
}

func TestToolCallAt(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`
	for _, tc := range []struct {
		at     string
		pieces []string // "TOOL" marks the tool-call event
	}{
		{"5", []string{"abc", "de", "TOOL", "f"}},
		{"6", []string{"abc", "def", "TOOL"}},
		{"3", []string{"abc", "TOOL", "def"}},
	} {
		t.Run(tc.at, func(t *testing.T) {
			_, ts, c := start(t, Config{Text: "abcdef", ChunkSize: 3})
			_, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, map[string]string{HeaderToolCallAt: tc.at})
			if err != nil {
				t.Fatal(err)
			}
			events, done := parseSSE(t, b)
			id, created := idCreated(t, events)
			var text []string
			for _, p := range tc.pieces {
				if p != "TOOL" {
					text = append(text, p)
				}
			}
			want := wantStream(true, id, created, "m", text, "tool_calls", false, false, 0)
			head := want[0][:strings.Index(want[0], `"choices":[`)+len(`"choices":[`)]
			for i, p := range tc.pieces {
				if p == "TOOL" {
					want = append(want[:i+1], append([]string{head + toolCallDelta + "]}"}, want[i+1:]...)...)
				}
			}
			if !done || !reflect.DeepEqual(events, want) {
				t.Fatalf("events\n%s\nwant\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// X-Mock-Tool-Call-Args makes the tool call's arguments arrive in the
// given fragments, one event each, JSON-escaped.
func TestToolCallArgs(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`
	_, ts, c := start(t, Config{Text: "abcdef", ChunkSize: 3})
	_, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, map[string]string{
		HeaderToolCallAt: "3", HeaderToolCallArgs: url.QueryEscape(`{"u":"ht`) + "," + url.QueryEscape(`tp://a,b"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	events, done := parseSSE(t, b)
	var calls []string
	for _, e := range events {
		if i := strings.Index(e, `"tool_calls":`); i >= 0 {
			calls = append(calls, e[i:strings.Index(e, `]},"logprobs"`)+1])
		}
	}
	want := []string{
		`"tool_calls":[{"index":0,"id":"call_mock","type":"function","function":{"name":"mock_tool","arguments":"{\"u\":\"ht"}}]`,
		`"tool_calls":[{"index":0,"function":{"arguments":"tp://a,b\"}"}}]`,
	}
	if !done || !reflect.DeepEqual(calls, want) || !strings.Contains(events[len(events)-1], `"finish_reason":"tool_calls"`) {
		t.Fatalf("tool-call events\n%s\nwant\n%s\nall:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"), strings.Join(events, "\n"))
	}
	resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, map[string]string{HeaderToolCallAt: "3", HeaderToolCallArgs: "%zz"})
	if err != nil || resp.StatusCode != 400 || !strings.Contains(string(b), "invalid X-Mock-Tool-Call-Args header") {
		t.Fatalf("malformed X-Mock-Tool-Call-Args: %v %s", err, b)
	}
}

func TestSplitErrors(t *testing.T) {
	chat := `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`
	for _, tc := range []struct {
		name string
		cfg  Config
		hdr  map[string]string
		want string
	}{
		{"not numbers", Config{Text: "abc"}, map[string]string{HeaderSplit: "1,x"}, "invalid X-Mock-Split header: value must be comma-separated byte offsets"},
		{"past the end", Config{Text: "abc"}, map[string]string{HeaderSplit: "3"}, "invalid X-Mock-Split header: offset 3 is not inside the text (3 bytes)"},
		{"zero", Config{Text: "abc"}, map[string]string{HeaderSplit: "0"}, "offset 0 is not inside the text"},
		{"not increasing", Config{Text: "abcd"}, map[string]string{HeaderSplit: "2,2"}, "offset 2 is not inside the text (4 bytes), after the previous offset"},
		{"inside a rune", Config{Text: "日本"}, map[string]string{HeaderSplit: "1"}, "on a rune boundary"},
		{"no text", Config{}, map[string]string{HeaderSplit: "1"}, "offsets need a text reply"},
		{"bad config offsets", Config{Text: "ab", Split: []int{5}}, nil, "invalid Config.Split: offset 5"},
		{"tool call past the text", Config{Text: "ab"}, map[string]string{HeaderToolCallAt: "3"}, "invalid X-Mock-Tool-Call-At header: 3 is not a rune boundary of the text (2 bytes)"},
		{"tool call negative", Config{Text: "ab"}, map[string]string{HeaderToolCallAt: "-1"}, "invalid X-Mock-Tool-Call-At header: value must be an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ts, c := start(t, tc.cfg)
			resp, b, err := do(t, c, "POST", ts.URL+"/v1/chat/completions", chat, tc.hdr)
			if err != nil || resp.StatusCode != 400 {
				t.Fatalf("status %d err %v body %s", resp.StatusCode, err, b)
			}
			if e := decodeError(t, b); !strings.Contains(e.Error.Message, tc.want) {
				t.Fatalf("message %q, want %q", e.Error.Message, tc.want)
			}
		})
	}
}
