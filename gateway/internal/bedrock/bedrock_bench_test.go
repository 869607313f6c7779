package bedrock

import (
	"bytes"
	"io"
	"testing"
)

func BenchmarkAppendRequest(b *testing.B) {
	body := []byte(requestTests[4].in) // the tool round trip
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = AppendRequest(out[:0], body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendResponse(b *testing.B) {
	raw := []byte(responseTests[1].in) // tool calls
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if out, err = AppendResponse(out[:0], raw, "claude", "chatcmpl-1", 1700000000); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamReader reads a whole ConverseStream reply of 100 text
// deltas through the reader: framing, CRCs, JSON and chunk writing.
func BenchmarkStreamReader(b *testing.B) {
	msgs := [][]byte{eventMessage(b, "messageStart", `{"role":"assistant"}`)}
	for range 100 {
		msgs = append(msgs, eventMessage(b, "contentBlockDelta", textDeltaPayload))
	}
	msgs = append(msgs, eventMessage(b, "contentBlockStop", `{"contentBlockIndex":0}`),
		eventMessage(b, "messageStop", `{"stopReason":"end_turn"}`),
		eventMessage(b, "metadata", `{"usage":{"inputTokens":10,"outputTokens":100}}`))
	src := stream(msgs...)
	r := NewStreamReader(0)
	rd := bytes.NewReader(src)
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(src)
		r.Reset(rd, "claude", "chatcmpl-1", 1700000000, true)
		for {
			if _, err := r.Read(buf); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
