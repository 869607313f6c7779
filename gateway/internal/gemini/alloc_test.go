package gemini

import "testing"

const (
	textEvent = `{"candidates":[{"content":{"parts":[{"text":"Hello, \"world\" \u2014 this is a fairly typical streamed token or two.\n"}],"role":"model"},"index":0}],` +
		`"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9},"modelVersion":"gemini-2.0-flash","responseId":"resp-1"}`
	callEvent = `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris","days":3}}}],"role":"model"},"index":0}],` +
		`"modelVersion":"gemini-2.0-flash","responseId":"resp-1"}`
)

// loopEvents serves the raw SSE events in src over and over without
// allocating.
type loopEvents struct {
	src []byte
	off int
}

func (l *loopEvents) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.src[l.off:])
		n += c
		l.off = (l.off + c) % len(l.src)
	}
	return n, nil
}

func TestStreamTranslatorAllocs(t *testing.T) {
	for _, tc := range []struct{ name, event string }{{"text", textEvent}, {"function call", callEvent}} {
		t.Run(tc.name, func(t *testing.T) {
			var tr StreamTranslator
			tr.Reset("gemini-alias", "chatcmpl-0123456789", 1700000000, true)
			data := []byte(tc.event)
			var out []byte
			var err error
			for range 10 {
				out, _ = tr.Append(out[:0], data)
			}
			allocs := testing.AllocsPerRun(1000, func() {
				out, err = tr.Append(out[:0], data)
			})
			if err != nil || allocs != 0 {
				t.Fatalf("%v allocs per event (err %v), want 0", allocs, err)
			}
			if len(out) == 0 {
				t.Fatal("no output")
			}
		})
	}
}

func TestStreamReaderAllocs(t *testing.T) {
	r := NewStreamReader(0)
	src := &loopEvents{src: []byte("data: " + textEvent + "\r\n\r\ndata: " + callEvent + "\r\n\r\n")}
	r.Reset(src, "gemini-alias", "chatcmpl-0123456789", 1700000000, false)
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

// TestAppendRequestAllocs: a plain chat request translates without
// allocating once the pooled writer has grown, as the proxy's attempt path
// does for OpenAI upstreams.
func TestAppendRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := []byte(`{"model":"x","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"temperature":0.5,` +
		`"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`)
	var out []byte
	for range 10 {
		out, _ = AppendRequest(out[:0], body)
	}
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if out, err = AppendRequest(out[:0], body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per request, want 0", allocs)
	}
}
