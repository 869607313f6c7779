package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/openai"
	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// seenChunk is what a guard reads of one chunk.
type seenChunk struct {
	Text, Role, Finish string
	Calls              []string // "index id name arguments"
	Usage              openai.Usage
	Error              bool
}

func seenOf(c *openai.Chunk) seenChunk {
	s := seenChunk{Text: string(c.Text), Role: string(c.Role), Finish: string(c.FinishReason), Usage: c.Usage, Error: c.Error}
	for _, tc := range c.ToolCalls {
		s.Calls = append(s.Calls, fmt.Sprintf("%d %s %s %s", tc.Index, tc.ID, tc.Name, tc.Arguments))
	}
	return s
}

// equalSeen compares what guards read. Text is compared as runes: the
// view passes invalid UTF-8 as the upstream sent it (so does an OpenAI
// stream), where the translator writes U+FFFD.
func equalSeen(a, b seenChunk) bool {
	return string([]rune(a.Text)) == string([]rune(b.Text)) && a.Role == b.Role && a.Finish == b.Finish && slices.Equal(a.Calls, b.Calls) && a.Error == b.Error
}

// TestChunkViewMatchesTranslator checks, event by event over every
// recorded stream, that ChunkView shows guards the chunk a StreamTranslator
// emits for the same event, parsed as the proxy parses an OpenAI stream:
// same text, role, tool-call deltas, finish reason and error, and the
// translator's final usage on the view's message_delta.
func TestChunkViewMatchesTranslator(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.sse")
	if len(files) < 6 {
		t.Fatalf("only %d recorded streams", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			rec, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var (
				tr     StreamTranslator
				view   ChunkView
				cp     openai.ChunkParser
				vc, oc openai.Chunk
				out    []byte
				data   []byte
				events int
			)
			tr.Reset("", "", 1, true)
			view.Reset()
			rd := sse.NewReader(bytes.NewReader(rec), 0)
			var lastUsage openai.Usage
			for {
				raw, err := rd.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var ok bool
				if data, ok = sse.AppendData(data[:0], raw); !ok {
					continue
				}
				events++
				ev, err := view.Parse(data, EventName(raw), &vc)
				if err != nil {
					t.Fatalf("view: %v", err)
				}
				if out, err = tr.Append(out[:0], data, EventName(raw)); err != nil {
					t.Fatalf("translator: %v", err)
				}
				// The translator's chunks for this event, without the
				// usage-only chunk and [DONE] (the view reports usage
				// on message_delta and the end as Done).
				var want []seenChunk
				done := false
				for _, b := range bytes.SplitAfter(out, []byte("\n\n")) {
					d, ok := sse.AppendData(nil, b)
					if !ok {
						continue
					}
					if cp.Parse(d, &oc) != nil {
						t.Fatalf("translator wrote %q", d)
					}
					switch {
					case oc.Done:
						done = true
					case oc.IsUsageOnly():
						lastUsage = oc.Usage
					default:
						want = append(want, seenOf(&oc))
					}
				}
				got := seenOf(&vc)
				switch {
				case ev.Type == EventMessageStop:
					if !vc.Done || !done {
						t.Errorf("message_stop: view Done %v, translator [DONE] %v", vc.Done, done)
					}
					// The translator adds finish "stop" only when no
					// message_delta carried a stop_reason.
					if len(want) > 1 || (len(want) == 1 && want[0].Finish != "stop") {
						t.Errorf("message_stop: translator chunks %v", want)
					}
				case vc.Choices == 0 && !vc.Error:
					if len(want) != 0 {
						t.Errorf("event %d (%s): view shows nothing, translator emitted %v", events, ev.Type, want)
					}
				case len(want) != 1 || !equalSeen(got, want[0]):
					t.Errorf("event %d (%s): view %v, translator %v", events, ev.Type, got, want)
				}
			}
			if lastUsage.Present && view.Usage() != lastUsage {
				t.Errorf("view usage %+v, translator's usage chunk %+v", view.Usage(), lastUsage)
			}
		})
	}
}

func TestChunkViewUsageOnlyAtMessageDelta(t *testing.T) {
	var v ChunkView
	v.Reset()
	var c openai.Chunk
	if _, err := v.Parse([]byte(`{"type":"message_start","message":{"id":"m","model":"x","usage":{"input_tokens":7,"cache_read_input_tokens":3,"output_tokens":1}}}`), nil, &c); err != nil {
		t.Fatal(err)
	}
	if c.Usage.Present || string(c.Role) != "assistant" || c.Choices != 1 {
		t.Errorf("message_start chunk %+v", c)
	}
	if _, err := v.Parse([]byte(`{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":42}}`), nil, &c); err != nil {
		t.Fatal(err)
	}
	want := openai.Usage{Present: true, PromptTokens: 10, CompletionTokens: 42, TotalTokens: 52, CachedTokens: 3}
	if c.Usage != want || string(c.FinishReason) != "length" {
		t.Errorf("message_delta chunk usage %+v finish %q, want %+v length", c.Usage, c.FinishReason, want)
	}
	// A usage-only message_delta: no choice, usage.
	if _, err := v.Parse([]byte(`{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":43}}`), nil, &c); err != nil {
		t.Fatal(err)
	}
	if c.Choices != 0 || !c.IsUsageOnly() || c.Usage.CompletionTokens != 43 {
		t.Errorf("usage-only message_delta %+v", c)
	}
	if _, err := v.Parse([]byte(`[1]`), nil, &c); !errors.Is(err, ErrInvalidEvent) {
		t.Errorf("non-object: %v", err)
	}
}

func TestChunkViewAllocs(t *testing.T) {
	var v ChunkView
	v.Reset()
	var c openai.Chunk
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":5,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
	} {
		if _, err := v.Parse([]byte(ev), nil, &c); err != nil {
			t.Fatal(err)
		}
	}
	for _, data := range []string{textDeltaEvent, argsDeltaEvent, pingEvent} {
		d := []byte(data)
		v.Parse(d, nil, &c)
		if allocs := testing.AllocsPerRun(1000, func() { v.Parse(d, nil, &c) }); allocs != 0 {
			t.Errorf("%s: %v allocs per event, want 0", data[:40], allocs)
		}
	}
}

func TestStopReason(t *testing.T) {
	for _, tc := range []struct{ finish, want string }{
		{"stop", "end_turn"}, {"length", "max_tokens"}, {"tool_calls", "tool_use"}, {"content_filter", "refusal"}, {"other", "end_turn"},
	} {
		if got := StopReason([]byte(tc.finish)); got != tc.want {
			t.Errorf("StopReason(%q) = %q, want %q", tc.finish, got, tc.want)
		}
		if tc.finish != "other" && FinishReason([]byte(tc.want)) != tc.finish {
			t.Errorf("FinishReason(StopReason(%q)) = %q", tc.finish, FinishReason([]byte(tc.want)))
		}
	}
}

// TestSynthesizedEvents checks that the events the gateway writes itself
// form a stream the translator reads back as valid.
func TestSynthesizedEvents(t *testing.T) {
	var b []byte
	b = AppendMessageStartEvent(b, []byte("msg_1"), []byte("claude-\"x\""), 12)
	b = AppendTextBlockStartEvent(b, 0)
	b = AppendTextDeltaEvent(b, 0, []byte("line\n\"quoted\" \x01"))
	b = AppendBlockStopEvent(b, 0)
	b = AppendMessageEndEvents(b, "refusal", 9)
	out, err := readAllStream(bytes.NewReader(b), "", "id", true)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	var (
		cp           openai.ChunkParser
		c            openai.Chunk
		text, finish string
		u            openai.Usage
		done         bool
	)
	for _, ev := range bytes.SplitAfter(out, []byte("\n\n")) {
		d, ok := sse.AppendData(nil, ev)
		if !ok {
			continue
		}
		if err := cp.Parse(d, &c); err != nil {
			t.Fatal(err)
		}
		text += string(c.Text)
		if c.FinishReason != nil {
			finish = string(c.FinishReason)
		}
		if c.Usage.Present {
			u = c.Usage
		}
		done = done || c.Done
	}
	if text != "line\n\"quoted\" \x01" || finish != "content_filter" || u.PromptTokens != 12 || u.CompletionTokens != 9 || !done {
		t.Errorf("read back text %q finish %q usage %+v done %v\n%s", text, finish, u, done, b)
	}
}
