package anthropic

import (
	"testing"
)

const (
	textDeltaEvent = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, \"world\" \u2014 this is a fairly typical streamed token or two.\n"}}`
	argsDeltaEvent = `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}`
	pingEvent      = `{"type": "ping"}`
)

// loopEvents serves the raw SSE events in src over and over without
// allocating, in reads of at most max bytes (0: no limit).
type loopEvents struct {
	src []byte
	off int
	max int
}

func (l *loopEvents) Read(p []byte) (int, error) {
	if l.max > 0 && len(p) > l.max {
		p = p[:l.max]
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.src[l.off:])
		n += c
		l.off = (l.off + c) % len(l.src)
	}
	return n, nil
}

func TestStreamTranslatorAllocs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event string
	}{{"text delta", textDeltaEvent}, {"arguments delta", argsDeltaEvent}, {"ping", pingEvent}} {
		t.Run(tc.name, func(t *testing.T) {
			var tr StreamTranslator
			tr.Reset("claude-alias", "chatcmpl-0123456789", 1700000000, true)
			var out []byte
			var err error
			for _, ev := range []string{
				`{"type":"message_start","message":{"id":"msg_1","model":"claude-x","usage":{"input_tokens":5,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
			} {
				if out, err = tr.Append(out, []byte(ev), nil); err != nil {
					t.Fatal(err)
				}
			}
			data, name := []byte(tc.event), []byte("content_block_delta")
			for range 10 {
				out, _ = tr.Append(out[:0], data, name)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				out, err = tr.Append(out[:0], data, name)
			})
			if err != nil || allocs != 0 {
				t.Fatalf("%v allocs per event (err %v), want 0", allocs, err)
			}
			if tc.event != pingEvent && len(out) == 0 {
				t.Fatal("no output")
			}
		})
	}
}

func TestStreamReaderAllocs(t *testing.T) {
	r := NewStreamReader(0)
	src := &loopEvents{src: []byte("event: content_block_delta\ndata: " + textDeltaEvent + "\n\nevent: ping\ndata: " + pingEvent + "\n\n")}
	r.Reset(src, "claude-alias", "chatcmpl-0123456789", 1700000000, false)
	buf := make([]byte, 32<<10)
	for range 100 {
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per Read, want 0", allocs)
	}
}

func TestNativeHelpersAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	data := []byte(textDeltaEvent)
	usage := []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`)
	var text []byte
	for range 10 {
		text, _ = AppendStreamText(text[:0], data)
		ParseStreamUsage(usage)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		text, _ = AppendStreamText(text[:0], data)
		if _, out, ok := ParseStreamUsage(usage); !ok || out != 15 {
			t.Fatal("ParseStreamUsage failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs, want 0", allocs)
	}
}
