package detect

import (
	"strings"
	"testing"
)

// benchPrompt is about n bytes of prose with some personal data in it, and
// the numbers, dates and versions that a detector must read and let go.
func benchPrompt(n int) string {
	parts := []string{
		"Hello, I am writing about my order ORD-2024-000123 placed on 2024-01-15 at 12:30. ",
		"Please contact me at john.doe@example.com or call +1 415 555 0100 after 5 pm. ",
		"The service runs version 1.2.3 on 10.0.0.1 and logs to 203.0.113.7 every 15 minutes. ",
		"My card 4111 1111 1111 1111 was charged twice, 49.99 EUR each time; the refund goes to GB82 WEST 1234 5698 7654 32. ",
		"Here is the stack trace: at main.go:42 in handler (commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3). ",
		"The quick brown fox jumps over the lazy dog, and then it sleeps for a while in the sun. ",
	}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(parts[i%len(parts)])
	}
	return b.String()[:n]
}

// BenchmarkScan10KB scans a 10 KB prompt with every detector on.
func BenchmarkScan10KB(b *testing.B) {
	text := []byte(benchPrompt(10 << 10))
	s := New(Options{})
	dst := s.Append(nil, text)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		dst = s.Append(dst[:0], text)
	}
}

// BenchmarkScanDigits is a worst case: 10 KB of digit groups, where every
// group starts the number detectors.
func BenchmarkScanDigits(b *testing.B) {
	text := []byte(strings.Repeat("12 345 6789 ", 1<<10)[:10<<10])
	s := New(Options{})
	dst := s.Append(nil, text)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		dst = s.Append(dst[:0], text)
	}
}
