package openai

import (
	"io"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/gateway/internal/sse"
)

// streamOf builds an SSE stream from event data strings.
func streamOf(datas ...string) string {
	var b strings.Builder
	for _, d := range datas {
		b.WriteString("data: ")
		b.WriteString(d)
		b.WriteString("\n\n")
	}
	return b.String()
}

// realisticStream is a chat stream with include_usage, tool calls and a
// keep-alive comment.
var realisticStream = streamOf(chunkRole, chunkText, chunkText, chunkTool1, chunkTool2, chunkStop, chunkUsage) +
	": keep-alive\n\n" + streamOf("[DONE]")

// loopReader serves src over and over without allocating.
type loopReader struct {
	src []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.src[l.off:])
		n += c
		l.off = (l.off + c) % len(l.src)
	}
	return n, nil
}

var _ io.Reader = (*loopReader)(nil)

// TestStreamPipelineDoesNotAllocate runs the per-event hot path of a
// streaming proxy (split, extract data, parse chunk) in steady state.
func TestStreamPipelineDoesNotAllocate(t *testing.T) {
	r := sse.NewReader(&loopReader{src: []byte(realisticStream)}, 0)
	var (
		p    ChunkParser
		c    Chunk
		data []byte
	)
	step := func() {
		raw, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		var ok bool
		data, ok = sse.AppendData(data[:0], raw)
		if !ok {
			return
		}
		if err := p.Parse(data, &c); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 { // warm up parser caches and buffers
		step()
	}
	if n := testing.AllocsPerRun(2000, step); n != 0 {
		t.Fatalf("%v allocs per event, want 0", n)
	}
}

func TestChunkParseDoesNotAllocate(t *testing.T) {
	var p ChunkParser
	var c Chunk
	for _, data := range []string{chunkText, chunkTool2, chunkUsage, chunkError, chunkCompl, "[DONE]"} {
		b := []byte(data)
		_ = p.Parse(b, &c) // warm up
		if n := testing.AllocsPerRun(500, func() { _ = p.Parse(b, &c) }); n != 0 {
			t.Errorf("%.40s...: %v allocs", data, n)
		}
	}
}

func TestRequestParseDoesNotAllocate(t *testing.T) {
	var p RequestParser
	var r Request
	for _, tc := range []struct {
		ep   Endpoint
		body string
	}{
		{ChatCompletions, chatBody},
		{ChatCompletions, `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":9}`},
		{Completions, `{"model":"m","prompt":["a","b"],"max_tokens":3}`},
		{Embeddings, `{"model":"m","input":[[1,2],[3]]}`},
	} {
		b := []byte(tc.body)
		if err := p.Parse(b, tc.ep, &r); err != nil {
			t.Fatal(err)
		}
		n := testing.AllocsPerRun(500, func() {
			if err := p.Parse(b, tc.ep, &r); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("%s: %v allocs", tc.ep, n)
		}
	}
}
