package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	testModel   = "claude-alias"
	testID      = "chatcmpl-test"
	testCreated = 1700000000
)

// translateEvents runs a recorded Anthropic stream through a
// StreamTranslator event by event.
func translateEvents(t testing.TB, stream []byte, model, id string, includeUsage bool) []byte {
	t.Helper()
	var tr StreamTranslator
	tr.Reset(model, id, testCreated, includeUsage)
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	var out, data []byte
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("splitting the recording: %v", err)
		}
		var ok bool
		if data, ok = sse.AppendData(data[:0], raw); !ok {
			continue
		}
		if out, err = tr.Append(out, data, EventName(raw)); err != nil {
			t.Fatalf("Append(%q): %v", data, err)
		}
	}
}

// readAllStream reads everything a StreamReader yields; err is the error
// that ended it (nil for io.EOF).
func readAllStream(src io.Reader, model, id string, includeUsage bool) ([]byte, error) {
	r := NewStreamReader(0)
	r.Reset(src, model, id, testCreated, includeUsage)
	out, err := io.ReadAll(r)
	return out, err
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run with -update after checking the change)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// usage is the translated usage: cached and written are the cache's
// reads and writes, both inside prompt.
func usage(prompt, completion, cached, written int64) *oaUsage {
	u := &oaUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if cached > 0 || written > 0 {
		u.PromptTokensDetails = &oaPromptDetails{cached, written}
	}
	return u
}

func TestStreamGolden(t *testing.T) {
	tests := []struct {
		name      string // testdata/<name>.sse → testdata/<name>.golden
		model, id string
		want      streamResult
	}{
		{
			name: "plain_text", model: testModel, id: testID,
			want: streamResult{Content: "Hello! How can I help you today?", Finish: "stop", Usage: usage(25, 12, 0, 0), Done: true},
		},
		{
			name: "tool_use", model: testModel, id: testID,
			want: streamResult{
				Tools: []resultTool{
					{"toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`},
					{"toolu_01AbCdEfGhIjKlMnOpQrStUv", "get_time", `{"timezone": "America/Los_Angeles"}`},
					{"toolu_01ZzYyXxWwVvUuTtSsRrQqPp", "list_cities", `{}`},
				},
				Finish: "tool_calls", Usage: usage(472, 89, 0, 0), Done: true,
			},
		},
		{
			name: "text_then_tool", model: testModel, id: testID,
			want: streamResult{
				Content: "Okay, let me check the weather for San Francisco.",
				Tools:   []resultTool{{"toolu_01Hk1wJRrUtgQbsdBjTUCgAm", "get_weather", `{"location": "San Francisco, CA"}`}},
				Finish:  "tool_calls", Usage: usage(384, 64, 0, 0), Done: true,
			},
		},
		{
			name: "max_tokens", model: testModel, id: testID,
			want: streamResult{Content: "Once upon a time, in a land far away, there", Finish: "length", Usage: usage(14+100+2048, 10, 2048, 100), Done: true},
		},
		{
			name: "error_overloaded", model: testModel, id: testID,
			want: streamResult{Content: "The answer", ErrType: "server_error", ErrCode: "overloaded", ErrMessage: "Overloaded"},
		},
		{
			// An empty model and id mean the upstream's.
			name: "ping_interleaved", model: "", id: "",
			want: streamResult{ID: "msg_01PingPingPingPingPingPing", Model: "claude-sonnet-4-5", Content: "Tick, tock.", Finish: "stop", Usage: usage(9, 4, 0, 0), Done: true},
		},
		{
			name: "thinking_then_text", model: testModel, id: testID,
			want: streamResult{Content: "27 * 453 = 12,231", Finish: "stop", Usage: usage(52, 96, 12, 0), Done: true},
		},
		{
			name: "escapes", model: testModel, id: testID,
			want: streamResult{
				Content: "pre\"fix\\ " + "tab\tnewline\nnul\x00bell\x07" + "sep\u2028par\u2029raw\u2028raw\u2029" +
					"emoji \U0001F600 end" + "bad utf8 \uFFFD\uFFFD and \uFFFD done" + "</script><!-- & / slash",
				Finish: "stop", Usage: usage(3, 30, 0, 0), Done: true,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.name+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			got := translateEvents(t, in, tc.model, tc.id, true)
			checkGolden(t, filepath.Join("testdata", tc.name+".golden"), got)

			if !utf8.Valid(got) {
				t.Error("output is not valid UTF-8")
			}
			if bytes.Contains(got, []byte("\u2028")) || bytes.Contains(got, []byte("\u2029")) {
				t.Error("output contains a raw U+2028 or U+2029")
			}
			r := assemble(t, got)
			want := tc.want
			if want.ID == "" {
				want.ID = tc.id
			}
			if want.Model == "" {
				want.Model = tc.model
			}
			if r.ID != want.ID || r.Model != want.Model || r.Created != testCreated || r.Role != "assistant" {
				t.Errorf("id %q model %q created %d role %q; want %q %q %d assistant", r.ID, r.Model, r.Created, r.Role, want.ID, want.Model, testCreated)
			}
			if r.Content != want.Content {
				t.Errorf("content %q\nwant    %q", r.Content, want.Content)
			}
			if len(r.Tools) != len(want.Tools) {
				t.Fatalf("tool calls %+v, want %+v", r.Tools, want.Tools)
			}
			for i := range r.Tools {
				if r.Tools[i] != want.Tools[i] {
					t.Errorf("tool call %d: %+v, want %+v", i, r.Tools[i], want.Tools[i])
				}
				if !json.Valid([]byte(r.Tools[i].Arguments)) {
					t.Errorf("tool call %d: arguments %q are not valid JSON", i, r.Tools[i].Arguments)
				}
			}
			if r.Finish != want.Finish || r.Done != want.Done {
				t.Errorf("finish %q done %v; want %q %v", r.Finish, r.Done, want.Finish, want.Done)
			}
			if (r.Usage == nil) != (want.Usage == nil) || (r.Usage != nil && !sameUsage(*r.Usage, *want.Usage)) {
				t.Errorf("usage %+v, want %+v", r.Usage, want.Usage)
			}
			if r.ErrType != want.ErrType || r.ErrCode != want.ErrCode || r.ErrMessage != want.ErrMessage {
				t.Errorf("error %q/%q/%q, want %q/%q/%q", r.ErrType, r.ErrCode, r.ErrMessage, want.ErrType, want.ErrCode, want.ErrMessage)
			}
			// With include_usage every choice chunk says "usage":null.
			if wantNulls := r.Chunks - btoi(r.Usage != nil); r.UsageNulls != wantNulls {
				t.Errorf("%d chunks with usage null, want %d", r.UsageNulls, wantNulls)
			}

			// The io.Reader form gives the same bytes, whatever the read sizes.
			for _, src := range []io.Reader{bytes.NewReader(in), iotest.OneByteReader(bytes.NewReader(in)), iotest.HalfReader(bytes.NewReader(in))} {
				viaReader, err := readAllStream(src, tc.model, tc.id, true)
				if err != nil {
					t.Fatalf("StreamReader: %v", err)
				}
				if !bytes.Equal(viaReader, got) {
					t.Fatalf("StreamReader output differs from Append's:\n%s\nvs\n%s", viaReader, got)
				}
			}

			// Without include_usage: the same reply, no usage anywhere.
			plain := assemble(t, translateEvents(t, in, tc.model, tc.id, false))
			if plain.Usage != nil || plain.UsageNulls != 0 || plain.Content != r.Content || plain.Finish != r.Finish || len(plain.Tools) != len(r.Tools) {
				t.Errorf("without include_usage: %+v", plain)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func sameUsage(a, b oaUsage) bool {
	if a.PromptTokens != b.PromptTokens || a.CompletionTokens != b.CompletionTokens || a.TotalTokens != b.TotalTokens {
		return false
	}
	if (a.PromptTokensDetails == nil) != (b.PromptTokensDetails == nil) {
		return false
	}
	return a.PromptTokensDetails == nil || a.PromptTokensDetails.CachedTokens == b.PromptTokensDetails.CachedTokens
}

// TestStreamSeenByChunkParser checks the translated stream through the
// gateway's own chunk parser: what the chunk phase and accounting read.
func TestStreamSeenByChunkParser(t *testing.T) {
	in, err := os.ReadFile("testdata/text_then_tool.sse")
	if err != nil {
		t.Fatal(err)
	}
	out := translateEvents(t, in, testModel, testID, true)
	rd := sse.NewReader(bytes.NewReader(out), 0)
	var p openai.ChunkParser
	var c openai.Chunk
	var text, args strings.Builder
	var data []byte
	var finish string
	var u openai.Usage
	done, textEvents := false, 0
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ = sse.AppendData(data[:0], raw)
		if err := p.Parse(data, &c); err != nil {
			t.Fatalf("ChunkParser: %v on %q", err, data)
		}
		if c.Done {
			done = true
			continue
		}
		if len(c.Text) > 0 {
			textEvents++
		}
		text.Write(c.Text)
		for _, tc := range c.ToolCalls {
			args.Write(tc.Arguments)
		}
		if c.FinishReason != nil {
			finish = string(c.FinishReason)
		}
		if c.IsUsageOnly() {
			u = c.Usage
		}
	}
	if text.String() != "Okay, let me check the weather for San Francisco." || textEvents != 2 {
		t.Errorf("text %q in %d events", text.String(), textEvents)
	}
	if args.String() != `{"location": "San Francisco, CA"}` || finish != "tool_calls" || !done {
		t.Errorf("args %q finish %q done %v", args.String(), finish, done)
	}
	if u != (openai.Usage{Present: true, PromptTokens: 384, CompletionTokens: 64, TotalTokens: 448}) {
		t.Errorf("usage %+v", u)
	}
}

func TestStreamTranslatorEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		events []string // data JSON of each event
		names  []string // SSE event names, when set
		want   string   // exact output
	}{
		{
			name:   "ping and unknown events produce nothing",
			events: []string{`{"type":"ping"}`, `{"type":"brand_new_event","x":1}`, `{}`},
			want:   "",
		},
		{
			name:   "text before message_start still gets the role chunk first",
			events: []string{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}`},
			want: `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
		},
		{
			name: "message_stop without message_delta finishes with stop",
			events: []string{
				`{"type":"message_start","message":{"id":"x","model":"y"}}`,
				`{"type":"message_stop"}`,
			},
			want: `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}` + "\n\n" +
				"data: [DONE]\n\n",
		},
		{
			name:   "the event name is used when the data has no type",
			events: []string{`{"error":{"type":"rate_limit_error","message":"slow down"}}`},
			names:  []string{"error"},
			want:   `data: {"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}}` + "\n\n",
		},
		{
			name: "the data's type wins over the event name",
			events: []string{
				`{"type":"ping"}`,
			},
			names: []string{"error"},
			want:  "",
		},
		{
			name: "nothing after an error event",
			events: []string{
				`{"type":"error","error":{"type":"api_error","message":"boom"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"late"}}`,
				`{"type":"message_stop"}`,
			},
			want: `data: {"error":{"message":"boom","type":"server_error","param":null,"code":null}}` + "\n\n",
		},
		{
			name: "unknown error type in a stream is a server error",
			events: []string{
				`{"type":"error","error":{"type":"novel_error"}}`,
			},
			want: `data: {"error":{"message":"The Anthropic upstream reported an error (novel_error).","type":"server_error","param":null,"code":null}}` + "\n\n",
		},
		{
			name: "input_json_delta for an unknown block is dropped",
			events: []string{
				`{"type":"message_start","message":{}}`,
				`{"type":"content_block_delta","index":4,"delta":{"type":"input_json_delta","partial_json":"{}"}}`,
			},
			want: `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n",
		},
		{
			name: "only one finish chunk and nothing after DONE",
			events: []string{
				`{"type":"message_start","message":{}}`,
				`{"type":"message_delta","delta":{"stop_reason":"refusal"}}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`,
				`{"type":"message_stop"}`,
				`{"type":"message_start","message":{}}`,
			},
			want: `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"content_filter"}]}` + "\n\n" +
				"data: [DONE]\n\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr StreamTranslator
			tr.Reset("m", "c", 1, false)
			var out []byte
			for i, ev := range tc.events {
				var name []byte
				if i < len(tc.names) {
					name = []byte(tc.names[i])
				}
				var err error
				if out, err = tr.Append(out, []byte(ev), name); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			if string(out) != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", out, tc.want)
			}
			assemble(t, out)
		})
	}
}

func TestStreamTranslatorInvalidEvent(t *testing.T) {
	var tr StreamTranslator
	tr.Reset("m", "c", 1, true)
	for _, data := range []string{``, `not json`, `[1,2]`, `"message_stop"`, `{"type":`} {
		out, err := tr.Append([]byte("keep"), []byte(data), nil)
		if !errors.Is(err, ErrInvalidEvent) || string(out) != "keep" {
			t.Errorf("Append(%q) = %q, %v; want dst unchanged and ErrInvalidEvent", data, out, err)
		}
	}
	if tr.Done() {
		t.Error("an invalid event ended the stream")
	}
}

func TestStreamTranslatorResetAndUsage(t *testing.T) {
	in, err := os.ReadFile("testdata/max_tokens.sse")
	if err != nil {
		t.Fatal(err)
	}
	var tr StreamTranslator
	var first []byte
	for round := range 3 { // a reused translator gives the same output
		tr.Reset(testModel, testID, testCreated, true)
		if tr.Usage().Present || tr.Done() {
			t.Fatalf("round %d: state survived Reset", round)
		}
		rd := sse.NewReader(bytes.NewReader(in), 0)
		var out, data []byte
		for {
			raw, err := rd.Next()
			if err != nil {
				break
			}
			data, _ = sse.AppendData(data[:0], raw)
			out, _ = tr.Append(out, data, nil)
		}
		if round == 0 {
			first = out
		} else if !bytes.Equal(out, first) {
			t.Fatalf("round %d differs", round)
		}
		want := openai.Usage{Present: true, PromptTokens: 2162, CompletionTokens: 10, TotalTokens: 2172, CachedTokens: 2048, CacheWriteTokens: 100}
		if tr.Usage() != want || !tr.Done() {
			t.Fatalf("usage %+v done %v", tr.Usage(), tr.Done())
		}
	}
}

func TestFinishReason(t *testing.T) {
	for in, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "": "stop", "whatever": "stop",
		"max_tokens": "length", "model_context_window_exceeded": "length",
		"tool_use": "tool_calls", "refusal": "content_filter",
	} {
		if got := FinishReason([]byte(in)); got != want {
			t.Errorf("FinishReason(%q) = %q, want %q", in, got, want)
		}
	}
}
