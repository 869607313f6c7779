package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const (
	testModel   = "gemini-alias"
	testID      = "chatcmpl-test"
	testCreated = 1700000000
)

// generatedID matches the tool call ids the package makes up; goldens
// hold them as call_GENERATED.
var generatedID = regexp.MustCompile(`"call_[A-Za-z0-9]{24}"`)

func normalizeIDs(b []byte) []byte {
	return generatedID.ReplaceAll(b, []byte(`"call_GENERATED"`))
}

// readAllStream reads everything a StreamReader yields from src; err is
// the error that ended it (nil for io.EOF).
func readAllStream(src io.Reader, model, id string, includeUsage bool) ([]byte, error) {
	r := NewStreamReader(0)
	r.Reset(src, model, id, testCreated, includeUsage)
	return io.ReadAll(r)
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	got = normalizeIDs(got)
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

// streamSummary is what an OpenAI client assembles from a chunk stream.
type streamSummary struct {
	text   string
	calls  []openai.ToolCallDelta
	finish string
	usage  openai.Usage
	err    bool // an error event came
	done   bool // [DONE] came
}

// summarize parses a translated stream with the gateway's own chunk
// parser, as the proxy does.
func summarize(t *testing.T, stream []byte) streamSummary {
	t.Helper()
	var s streamSummary
	var p openai.ChunkParser
	var c openai.Chunk
	rd := sse.NewReader(bytes.NewReader(stream), 0)
	var data []byte
	for {
		raw, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return s
		}
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		if data, ok = sse.AppendData(data[:0], raw); !ok {
			continue
		}
		if s.done {
			t.Fatalf("event after [DONE]: %s", data)
		}
		if sse.IsDone(data) {
			s.done = true
			continue
		}
		if bytes.HasPrefix(data, []byte(`{"error"`)) {
			s.err = true
			continue
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON chunk %s", data)
		}
		if err := p.Parse(data, &c); err != nil {
			t.Fatalf("ChunkParser: %v on %s", err, data)
		}
		s.text += string(c.Text)
		for _, tc := range c.ToolCalls {
			s.calls = append(s.calls, openai.ToolCallDelta{Index: tc.Index, ID: bytes.Clone(tc.ID), Name: bytes.Clone(tc.Name), Arguments: bytes.Clone(tc.Arguments)})
		}
		if len(c.FinishReason) > 0 {
			s.finish = string(c.FinishReason)
		}
		if c.Usage.Present {
			s.usage = c.Usage
		}
	}
}

func TestStreamGolden(t *testing.T) {
	tests := []struct {
		name         string // testdata/<name>.sse → testdata/<name>.golden
		includeUsage bool
		text         string
		finish       string
		calls        []string // name(arguments)
		usage        openai.Usage
		err          bool
	}{
		{name: "plain_text", includeUsage: true, text: "Hello, \"world\" \u2014 bye.\n", finish: "stop",
			usage: openai.Usage{Present: true, PromptTokens: 9, CompletionTokens: 5, TotalTokens: 14}},
		{name: "function_call", includeUsage: true, text: "Let me check.", finish: "tool_calls",
			calls: []string{`get_weather({"city":"Paris","days":[1,2500.0],"unit":null})`},
			usage: openai.Usage{Present: true, PromptTokens: 30, CompletionTokens: 12, TotalTokens: 42}},
		{name: "parallel_calls", finish: "tool_calls", calls: []string{`get_weather({"city":"Paris"})`, `get_time({})`}},
		{name: "max_tokens", includeUsage: true, text: "It was a dark and", finish: "length",
			usage: openai.Usage{Present: true, PromptTokens: 4, CompletionTokens: 4, TotalTokens: 8}},
		{name: "safety", text: "I will", finish: "content_filter"},
		{name: "thinking", includeUsage: true, text: "42", finish: "stop",
			usage: openai.Usage{Present: true, PromptTokens: 1200, CompletionTokens: 51, TotalTokens: 1251, CachedTokens: 1024, ReasoningTokens: 50}},
		{name: "prompt_blocked", finish: "content_filter"},
		{name: "error_midstream", text: "Partial", err: true},
		{name: "usage_after_finish", includeUsage: true, text: "Done", finish: "stop",
			usage: openai.Usage{Present: true, PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.name+".sse"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAllStream(bytes.NewReader(in), testModel, testID, tc.includeUsage)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", tc.name+".golden"), got)
			s := summarize(t, got)
			if s.text != tc.text || s.finish != tc.finish || s.usage != tc.usage || s.err != tc.err || s.done == tc.err {
				t.Fatalf("summary %+v, want text %q finish %q usage %+v err %v", s, tc.text, tc.finish, tc.usage, tc.err)
			}
			var calls []string
			for i, c := range s.calls {
				if c.Index != i || !bytes.HasPrefix(c.ID, []byte("call_")) && !bytes.HasPrefix(c.ID, []byte("fc-")) {
					t.Fatalf("call %d: index %d id %q", i, c.Index, c.ID)
				}
				calls = append(calls, string(c.Name)+"("+string(c.Arguments)+")")
			}
			if strings.Join(calls, " ") != strings.Join(tc.calls, " ") {
				t.Fatalf("calls %q, want %q", calls, tc.calls)
			}
			// Byte-at-a-time reads give the same stream.
			one, err := readAllStream(iotest.OneByteReader(bytes.NewReader(in)), testModel, testID, tc.includeUsage)
			if err != nil || !bytes.Equal(normalizeIDs(one), normalizeIDs(got)) {
				t.Fatalf("one-byte reads: err %v\n%s", err, one)
			}
		})
	}
}

func TestStreamReaderEnds(t *testing.T) {
	text := `data: {"candidates":[{"content":{"parts":[{"text":"Hi"}]}}]}` + "\n\n"
	final := `data: {"candidates":[{"content":{"parts":[{"text":"!"}]},"finishReason":"STOP"}]}` + "\n\n"
	srcErr := errors.New("connection reset")
	tests := []struct {
		name string
		src  io.Reader
		want error
	}{
		{"no finish", strings.NewReader(text), io.ErrUnexpectedEOF},
		{"empty body", strings.NewReader(""), io.ErrUnexpectedEOF},
		{"cut inside an event", strings.NewReader(text + final[:30]), io.ErrUnexpectedEOF},
		{"source error", io.MultiReader(strings.NewReader(text), iotest.ErrReader(srcErr)), srcErr},
		{"source error after finish", io.MultiReader(strings.NewReader(text+final), iotest.ErrReader(srcErr)), srcErr},
		{"not JSON", strings.NewReader("data: nope\n\n"), ErrInvalidEvent},
		{"too large", strings.NewReader("data: " + strings.Repeat("x", 2<<20) + "\n\n"), sse.ErrEventTooLarge},
		{"finished", strings.NewReader(text + final), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewStreamReader(1 << 20)
			r.Reset(tc.src, "m", "id", 1, false)
			_, err := io.ReadAll(r)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestStreamUpstreamIDs(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "plain_text.sse"))
	got, err := readAllStream(bytes.NewReader(in), "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte(`{"id":"resp-1","object":"chat.completion.chunk","created":1700000000,"model":"gemini-2.0-flash"`)) {
		t.Fatalf("upstream id and model not used:\n%s", got)
	}
}

func TestStreamCallIDsDiffer(t *testing.T) {
	in, _ := os.ReadFile(filepath.Join("testdata", "function_call.sse"))
	a, _ := readAllStream(bytes.NewReader(in), "m", "id", false)
	b, _ := readAllStream(bytes.NewReader(in), "m", "id", false)
	ida, idb := generatedID.Find(a), generatedID.Find(b)
	if ida == nil || idb == nil || bytes.Equal(ida, idb) {
		t.Fatalf("generated ids %q and %q: want two different ones", ida, idb)
	}
}

func TestFinishReason(t *testing.T) {
	tests := []struct {
		reason string
		calls  bool
		want   string
	}{
		{"STOP", false, "stop"}, {"STOP", true, "tool_calls"}, {"MAX_TOKENS", true, "length"},
		{"SAFETY", false, "content_filter"}, {"RECITATION", false, "content_filter"},
		{"BLOCKLIST", false, "content_filter"}, {"PROHIBITED_CONTENT", false, "content_filter"},
		{"SPII", false, "content_filter"}, {"IMAGE_SAFETY", false, "content_filter"},
		{"MALFORMED_FUNCTION_CALL", false, "stop"}, {"OTHER", false, "stop"}, {"", false, "stop"},
	}
	for _, tc := range tests {
		if got := FinishReason([]byte(tc.reason), tc.calls); got != tc.want {
			t.Errorf("FinishReason(%q, %v) = %q, want %q", tc.reason, tc.calls, got, tc.want)
		}
	}
}
