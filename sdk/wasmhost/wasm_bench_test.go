package wasmhost

import "testing"

// BenchmarkPhaseCall is the cost of one guest callback through the Go SDK:
// checkout, call, host function round trips the SDK makes, return.
func BenchmarkPhaseCall(b *testing.B) {
	b.Run("request", func(b *testing.B) {
		pl := pipeline(b, `{"request":"continue","phases":["request"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		b.ReportAllocs()
		for b.Loop() {
			if err := pl.Request(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk", func(b *testing.B) {
		pl := pipeline(b, `{"chunk":"continue","phases":["chunk"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		text := []byte("hello, world")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Chunk(r, text, ChunkText); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunk-replace", func(b *testing.B) {
		pl := pipeline(b, `{"chunk":"replace_upper","phases":["chunk"]}`)
		r := request(`{}`)
		defer ReleaseRequest(r)
		text := []byte("hello, world")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pl.Chunk(r, text, ChunkText); err != nil {
				b.Fatal(err)
			}
		}
	})
}
