package sse

import "testing"

func BenchmarkReaderNext(b *testing.B) {
	for _, bc := range []struct {
		name  string
		chunk int
	}{{"bigreads", 0}, {"1500Breads", 1500}} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewReader(&loopReader{src: []byte(openAIStream), chunk: bc.chunk}, 0)
			b.SetBytes(int64(len(openAIStream)) / 5)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNextAppendData(b *testing.B) {
	r := NewReader(&loopReader{src: []byte(openAIStream)}, 0)
	var data []byte
	b.SetBytes(int64(len(openAIStream)) / 5)
	b.ReportAllocs()
	for b.Loop() {
		raw, err := r.Next()
		if err != nil {
			b.Fatal(err)
		}
		data, _ = AppendData(data[:0], raw)
	}
}

func BenchmarkAppendData(b *testing.B) {
	raw := []byte("data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"},\"finish_reason\":null}]}\n\n")
	var data []byte
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		data, _ = AppendData(data[:0], raw)
	}
}
