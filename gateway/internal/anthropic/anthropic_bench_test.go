package anthropic

import (
	"os"
	"testing"
)

func BenchmarkStreamTranslatorTextDelta(b *testing.B) {
	var tr StreamTranslator
	tr.Reset("claude-alias", "chatcmpl-0123456789", 1700000000, true)
	out, _ := tr.Append(nil, []byte(`{"type":"message_start","message":{"id":"msg_1","model":"claude-x"}}`), nil)
	data, name := []byte(textDeltaEvent), []byte("content_block_delta")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = tr.Append(out[:0], data, name)
	}
}

func BenchmarkStreamTranslatorArgsDelta(b *testing.B) {
	var tr StreamTranslator
	tr.Reset("claude-alias", "chatcmpl-0123456789", 1700000000, false)
	out, _ := tr.Append(nil, []byte(`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`), nil)
	data := []byte(argsDeltaEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = tr.Append(out[:0], data, nil)
	}
}

// BenchmarkStreamReader measures the io.Reader form — SSE splitting plus
// translation — per upstream event: the source hands over one event per
// read, as a streaming upstream does.
func BenchmarkStreamReader(b *testing.B) {
	raw := []byte("event: content_block_delta\ndata: " + textDeltaEvent + "\n\n")
	r := NewStreamReader(0)
	r.Reset(&loopEvents{src: raw, max: len(raw)}, "claude-alias", "chatcmpl-0123456789", 1700000000, false)
	buf := make([]byte, 32<<10)
	for range 10 {
		r.Read(buf)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if n, err := r.Read(buf); err != nil || n == 0 {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	body := []byte(`{"model":"claude-x","max_tokens":512,"stream":true,"messages":[` +
		`{"role":"system","content":"You are a helpful assistant."},` +
		`{"role":"user","content":"What's the weather in San Francisco?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"San Francisco, CA\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C and sunny"}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}]}`)
	var out []byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = AppendRequest(out[:0], body, 1024); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	body, err := os.ReadFile("testdata/response_tool_use.json")
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err = AppendResponse(out[:0], body, "claude-alias", "chatcmpl-1", 1700000000); err != nil {
			b.Fatal(err)
		}
	}
}
