package gemini

import (
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkStreamTranslatorText(b *testing.B) {
	var tr StreamTranslator
	tr.Reset("gemini-alias", "chatcmpl-0123456789", 1700000000, true)
	data := []byte(textEvent)
	var out []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		out, _ = tr.Append(out[:0], data)
	}
}

func BenchmarkAppendRequest(b *testing.B) {
	body := []byte(requestTests[5].in) // the tool call turn
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
	body, err := os.ReadFile(filepath.Join("testdata", "response_function_call.json"))
	if err != nil {
		b.Fatal(err)
	}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		if out, err = AppendResponse(out[:0], body, "m", "id", 1); err != nil {
			b.Fatal(err)
		}
	}
}
