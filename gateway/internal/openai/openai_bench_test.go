package openai

import (
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// bigChatBody is a 20-turn conversation of about 20 KiB.
var bigChatBody = func() string {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","stream":true,"max_tokens":512,"messages":[{"role":"system","content":"You are a helpful assistant."}`)
	for i := range 20 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		b.WriteString(`,{"role":"` + role + `","content":"`)
		b.WriteString(strings.Repeat(`Lorem ipsum dolor sit amet, \"consectetur\" adipiscing elit.\n`, 16))
		b.WriteString(`"}`)
	}
	b.WriteString(`]}`)
	return b.String()
}()

func BenchmarkRequestParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		ep   Endpoint
		body string
	}{
		{"chat_small", ChatCompletions, chatBody},
		{"chat_20KiB", ChatCompletions, bigChatBody},
		{"embeddings", Embeddings, `{"model":"text-embedding-3-small","input":["The food was delicious","and the waiter was friendly"]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var p RequestParser
			var r Request
			body := []byte(bc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Parse(body, bc.ep, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChunkParse(b *testing.B) {
	for _, bc := range []struct{ name, data string }{
		{"text", chunkText},
		{"tool_calls", chunkTool2},
		{"usage", chunkUsage},
		{"done", "[DONE]"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var p ChunkParser
			var c Chunk
			data := []byte(bc.data)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := p.Parse(data, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendWithIncludeUsage(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"splice_small", chatBody},
		{"splice_compact", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello there, how are you today?"}],"stream":true,"max_tokens":256,"temperature":0.2}`},
		{"splice_20KiB", bigChatBody},
		{"rewrite_small", `{"model":"m","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"hi"}]}`},
		{"rewrite_20KiB", strings.Replace(bigChatBody, `"stream":true`, `"stream":true,"stream_options":{}`, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			dst := make([]byte, 0, len(body)+64)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = AppendWithIncludeUsage(dst[:0], body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamEvent measures the whole per-event path: split, extract
// data, parse the chunk.
func BenchmarkStreamEvent(b *testing.B) {
	r := sse.NewReader(&loopReader{src: []byte(realisticStream)}, 0)
	var (
		p    ChunkParser
		c    Chunk
		data []byte
	)
	b.ReportAllocs()
	for b.Loop() {
		raw, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		var ok bool
		if data, ok = sse.AppendData(data[:0], raw); ok {
			if err := p.Parse(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	}
}
